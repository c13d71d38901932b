"""One notion of a valid cluster: what `load_cluster` (simulate), `apply` and `slurm render` accept.

The API model decides (task-type pattern, the "*" catch-all, one partition per task type); the
renderer keeps its own guards for what it writes into slurm.conf and Lua. These tests run the same
clusters through all three and assert they all accept or all refuse, and that a catch-all renders.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.adapters.slurm.apply import check_lua, lua_checker
from gputwin.adapters.slurm.render import JOB_SUBMIT, render
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError
from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = (ROOT / "manifests" / "samples" / "two-leaf.yaml").read_text()


def with_task_types(train: str, infer: str = "[infer, dev]") -> str:
    return TWO_LEAF.replace("taskTypes: [train]", f"taskTypes: {train}").replace(
        "taskTypes: [infer, dev]", f"taskTypes: {infer}"
    )


# id -> the cluster's YAML and whether a valid cluster it is
CLUSTERS: dict[str, tuple[str, bool]] = {
    "sample": (TWO_LEAF, True),
    "catch-all": (with_task_types('["*"]'), True),
    "catch-all-and-types": (with_task_types('[train, "*"]'), True),
    "dots-dashes-underscores": (with_task_types("[a.b-c_d, _x, '9']"), True),
    "64-character-type": (with_task_types("[" + "t" * 64 + "]"), True),
    "63-character-partition": (TWO_LEAF.replace("name: train", "name: " + "t" * 63), True),
    "65-character-type": (with_task_types("[" + "t" * 65 + "]"), False),
    "64-character-partition": (TWO_LEAF.replace("name: train", "name: " + "t" * 64), False),
    "newline": (with_task_types('["a\\nPartitionName=evil"]'), False),
    "hash": (with_task_types('["#x"]'), False),
    "long-bracket": (with_task_types('["a]]..os.exit()--[["]'), False),
    "double-quote": (with_task_types("['x\"]=1']"), False),
    "single-quote": (with_task_types('["x\'y"]'), False),
    "space": (with_task_types('["a b"]'), False),
    "comma": (with_task_types('["a,b"]'), False),
    "leading-dash": (with_task_types('["-p"]'), False),
    "leading-dot": (with_task_types('[".x"]'), False),
    "star-in-a-name": (with_task_types('["tr*"]'), False),
    "two-stars": (with_task_types('["**"]'), False),
    "empty": (with_task_types('[""]'), False),
    "non-ascii": (with_task_types('["träin"]'), False),
    "one-type-two-partitions": (with_task_types("[train, dev]"), False),
    "two-catch-alls": (with_task_types('["*"]', '[infer, "*"]'), False),
}


def verdicts(tmp_path: Path, text: str) -> tuple[bool, bool, bool]:
    """(load_cluster accepts, apply accepts, slurm render accepts)."""
    path = tmp_path / "cluster.yaml"
    path.write_text(text)
    try:
        load_cluster(path)
        loaded = True
    except ClusterError:
        loaded = False
    runner = CliRunner()
    applied = runner.invoke(cli, ["apply", "-f", str(path), "--state", str(tmp_path / "state")])
    rendered = runner.invoke(cli, ["slurm", "render", "--cluster", str(path)])
    for result, refused in ((applied, 1), (rendered, 2)):  # apply exits as kubectl, render as gputwin
        assert result.exit_code in (0, refused) and "Traceback" not in result.output, result.output
        if result.exit_code == refused:
            assert result.stderr.startswith(f"error: {path}"), result.stderr
    return loaded, applied.exit_code == 0, rendered.exit_code == 0


@pytest.mark.parametrize(("text", "valid"), CLUSTERS.values(), ids=CLUSTERS.keys())
def test_simulate_apply_and_render_agree(tmp_path: Path, text: str, valid: bool) -> None:
    assert verdicts(tmp_path, text) == (valid, valid, valid)


TASK_CHARS = st.sampled_from(list("abcXYZ019_.-*#\"' ,;=[]{}\n\t\\$") + ["ä", "\u2028"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(task=st.text(TASK_CHARS, min_size=0, max_size=70))
def test_any_task_type_gets_the_same_verdict_everywhere(
    tmp_path_factory: pytest.TempPathFactory, task: str
) -> None:
    text = with_task_types(f"[{json.dumps(task)}]")  # a JSON string is a YAML double-quoted scalar
    loaded, applied, rendered = verdicts(tmp_path_factory.mktemp("t"), text)
    assert loaded == applied == rendered, (task, loaded, applied, rendered)


@pytest.mark.parametrize(
    ("name", "table", "valid"),
    [
        ("vcs.csv", "vc,num_nodes\ntrain,2\n" + "v" * 48 + ",1\n", True),
        ("my vcs!.csv", "vc,num_nodes\ntrain,2\n", True),  # the topology is then named vc-table
        ("vcs.csv", "vc,num_nodes\n" + "v" * 49 + ",1\n", False),
        ("vcs.csv", "vc,num_nodes\n_x,1\n", False),
    ],
    ids=["48-character-vc", "odd-file-name", "49-character-vc", "underscore-first"],
)
def test_a_vc_table_gets_the_same_verdict_from_simulate_and_render(
    tmp_path: Path, name: str, table: str, valid: bool
) -> None:
    path = tmp_path / name
    path.write_text(table)
    try:
        render(load_cluster(path))
        loaded = True
    except ClusterError:
        loaded = False
    rendered = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(path)])
    assert (loaded, rendered.exit_code) == (valid, 0 if valid else 2), rendered.output


def test_the_catch_all_takes_unknown_task_types_in_lua(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text(with_task_types('[train, "*"]'))
    lua = render(load_cluster(path))[JOB_SUBMIT]
    assert b'local CATCH_ALL = "train"\n' in lua
    assert b'["*"]' not in lua and b"part = ROUTES[task] or CATCH_ALL\n" in lua
    if lua_checker() is not None:
        check_lua(lua)
