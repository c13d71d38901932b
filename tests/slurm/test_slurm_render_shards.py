"""GPU fractions deployed to SLURM as GRES shards (adapters/slurm/render_gres.py, render_lua.py): a node
group's `shardsPerGpu` S renders ``GresTypes=gpu,shard``, ``Gres=gpu:T:G,shard:G*S``, gres.conf
``Name=shard Count=G*S`` lines and ``gres/shard`` in AccountingStorageTRES; job_submit.lua turns a
``milli:M`` comment into ``gres:shard:ceil(M*S/1000)``. The Lua is run for real (lua5.1) where it is
installed, against the same rule in Python."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from gputwin.adapters.slurm.errors import SlurmInputError
from gputwin.adapters.slurm.render import JOB_SUBMIT, render
from gputwin.adapters.slurm.render_gres import partition_shards, shards_for
from gputwin.api.convert import cluster_documents
from gputwin.api.loader import load_cluster
from gputwin.api.meta import SHARDS_LABEL
from gputwin.api.problems import ClusterError
from gputwin.core.model import ClusterSpec, NodeSpec, PartitionSpec, SwitchSpec, TopologySpec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "shared-gpus.yaml"

CLUSTER = """\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: lab}
spec:
  switches: [{name: leaf1}]
  nodeGroups:
    - {switch: leaf1, nodes: "t[1-2]", gpusPerNode: 8, model: h100}
    - {switch: leaf1, nodes: "i[1-2]", gpusPerNode: 4, model: h100, shardsPerGpu: SHARDS}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: train}
spec: {topology: lab, taskTypes: [train], nodes: "t[1-2]"}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: infer}
spec: {topology: lab, taskTypes: ["*"], nodes: "i[1-2]"}
"""


def _cluster(tmp_path: Path, shards: str = "4") -> ClusterSpec:
    path = tmp_path / "lab.yaml"
    path.write_text(CLUSTER.replace("SHARDS", shards))
    return load_cluster(path)


def test_shared_nodes_render_shard_gres_and_accounting(tmp_path: Path) -> None:
    rendered = render(_cluster(tmp_path))
    assert rendered.nodes.decode().splitlines()[1:] == [
        "GresTypes=gpu,shard",
        "AccountingStorageTRES=gres/gpu,gres/shard",
        "NodeName=t[1-2] Gres=gpu:h100:8",
        "NodeName=i[1-2] Gres=gpu:h100:4,shard:16",
    ]
    assert [line for line in rendered.gres_conf.decode().splitlines() if not line.startswith("#")] == [
        "NodeName=i[1-2] Name=shard Count=16"
    ]
    assert rendered.node_shards == (("i1", 16), ("i2", 16))
    assert ("GresTypes", "shard") in rendered.requires and ("AccountingStorageTRES", "gres/shard") in rendered.requires


def test_unshared_cluster_renders_as_before(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(CLUSTER.replace(", shardsPerGpu: SHARDS", ""))
    rendered = render(load_cluster(path))
    assert "shard" not in rendered.nodes.decode() and rendered.gres_conf == b"" and rendered.node_shards == ()
    assert not any(key == "GresTypes" for key, _ in rendered.requires)
    assert "local SHARDS = {}" in rendered[JOB_SUBMIT].decode()


@pytest.mark.parametrize("bad", ["0", "1001", "-1", "2.5", "four"])
def test_shards_per_gpu_out_of_range_is_a_located_error(tmp_path: Path, bad: str) -> None:
    with pytest.raises(ClusterError) as err:
        _cluster(tmp_path, bad)
    text = str(err.value)
    assert "lab.yaml:doc1" in text and "spec.nodeGroups[1].shardsPerGpu" in text, text


def test_the_carrier_label_cannot_be_set_by_hand(tmp_path: Path) -> None:
    path = tmp_path / "lab.yaml"
    path.write_text(CLUSTER.replace("shardsPerGpu: SHARDS", f"labels: {{{SHARDS_LABEL}: '4'}}"))
    with pytest.raises(ClusterError, match=r"nodeGroups\[1\]\.labels.*use that field"):
        load_cluster(path)


def _code_cluster(shards: dict[str, str]) -> ClusterSpec:
    nodes = tuple(NodeSpec(n, 2, "s", labels={SHARDS_LABEL: v} if (v := shards.get(n)) else {}) for n in ("a", "b"))
    return ClusterSpec(TopologySpec("t", (SwitchSpec("s"),), nodes), (PartitionSpec("p", ("a", "b"), ("*",)),))


def test_a_partition_whose_nodes_differ_in_shards_is_refused() -> None:
    with pytest.raises(SlurmInputError, match=r"partition p: its nodes split GPUs into \[2, 4\] shards"):
        render(_code_cluster({"a": "2", "b": "4"}))
    assert partition_shards(_code_cluster({"a": "4"})) == {"p": 4}  # unshared nodes beside shared: fine


def test_a_label_built_in_code_is_checked_again() -> None:
    with pytest.raises(SlurmInputError, match=r"node a: shardsPerGpu '4;x' is not a whole number 1\.\.1000"):
        render(_code_cluster({"a": "4;x"}))


@pytest.mark.parametrize(("milli", "per_gpu", "want"), [
    (250, 4, 1), (251, 4, 2), (500, 4, 2), (999, 4, 4), (1, 4, 1), (300, 4, 2), (333, 1000, 333), (1, 1, 1),
])  # fmt: skip
def test_shards_for_rounds_up(milli: int, per_gpu: int, want: int) -> None:
    assert shards_for(milli, per_gpu) == want


@pytest.mark.parametrize("per_gpu", [1, 3, 4, 7, 10, 1000])
def test_shards_on_one_gpu_never_hold_more_than_1000_milli(per_gpu: int) -> None:
    # The most shares of one size that fit the GPU's shards hold at most 1000 milli between them.
    for milli in range(1, 1000):
        fit = per_gpu // shards_for(milli, per_gpu)
        assert fit * milli <= 1000, (milli, per_gpu)


def test_round_trip_keeps_shards_as_the_field(tmp_path: Path) -> None:
    docs = cluster_documents(_cluster(tmp_path))
    groups = docs[0]["spec"]["nodeGroups"]
    assert [g.get("shardsPerGpu") for g in groups] == [None, None, 4, 4]
    assert all(SHARDS_LABEL not in g["labels"] for g in groups)


def test_example_manifest_renders_shards() -> None:
    rendered = render(load_cluster(EXAMPLE))
    assert "shard:" in rendered.nodes.decode() and rendered.gres_conf


# --- job_submit.lua, run by lua5.1 --------------------------------------------------------------

LUA = shutil.which("lua5.1")
needs_lua = pytest.mark.skipif(LUA is None, reason="lua5.1 not installed (apt-get install lua5.1)")

HARNESS = """
slurm = {SUCCESS = 0, ERROR = -1, log_user = function(m) print("user: " .. m) end,
         log_info = function(...) end}
dofile(arg[1])
local cases = {COMMENTS}
for _, c in ipairs(cases) do
  local job = {comment = c[1], tres_per_node = c[2], partition = c[3], name = "j", user_name = "u"}
  local rc = slurm_job_submit(job, {}, 0)
  print(rc .. " " .. tostring(job.partition) .. " " .. tostring(job.tres_per_node))
end
"""


def _run_lua(tmp_path: Path, script: bytes, cases: list[tuple[str, str | None, str | None]]) -> list[str]:
    (tmp_path / "job_submit.lua").write_bytes(script)
    literal = ", ".join("{" + ", ".join("nil" if v is None else f'"{v}"' for v in case) + "}" for case in cases)
    (tmp_path / "harness.lua").write_text(HARNESS.replace("COMMENTS", literal))
    assert LUA is not None
    out = subprocess.run([LUA, str(tmp_path / "harness.lua"), str(tmp_path / "job_submit.lua")],
                         capture_output=True, text=True, check=True, timeout=30).stdout  # fmt: skip
    return [line for line in out.splitlines() if not line.startswith("user: ")]


@needs_lua
def test_lua_maps_milli_to_shards_as_python_does(tmp_path: Path) -> None:
    script = render(_cluster(tmp_path, "4"))[JOB_SUBMIT]
    millis = [1, 250, 251, 500, 750, 999]
    got = _run_lua(tmp_path, script, [(f"task:infer,milli:{m}", "gres:gpu:1", None) for m in millis])
    assert got == [f"0 infer gres:shard:{shards_for(m, 4)}" for m in millis]


@needs_lua
def test_lua_fraction_cases(tmp_path: Path) -> None:
    script = render(_cluster(tmp_path, "4"))[JOB_SUBMIT]
    got = _run_lua(tmp_path, script, [
        ("milli:300", None, "infer"),          # no task: its own partition, no GPU request -> shards
        ("task:train,milli:300", None, None),  # a partition without shards: one whole GPU
        ("task:train,milli:300", "gres:gpu:h100:1", None),  # typed stays typed there
        ("task:infer,milli:300", "gres:gpu:h100:1", None),  # a typed share keeps its model in shards
        ("task:infer,milli:300", "gres:gpu:2", None),       # a fraction of more than one GPU: refused
        ("task:infer,milli:1000", None, None),              # not a fraction: refused
        ("task:infer", "gres:shard:3", None),               # shards asked directly pass as they are
        ("task:infer", "gres:gpu:2", None),                 # whole GPUs as before
    ])  # fmt: skip
    assert got == [
        "0 infer gres:shard:2",
        "0 train gres:gpu:1",
        "0 train gres:gpu:h100:1",
        "0 infer gres:shard:h100:2",
        "-1 infer gres:gpu:2",
        "-1 infer nil",
        "0 infer gres:shard:3",
        "0 infer gres:gpu:2",
    ]


def test_cli_render_shows_the_node_and_gres_conf_lines() -> None:
    from click.testing import CliRunner
    from gputwin.cli.main import cli

    done = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(EXAMPLE)])
    assert done.exit_code == 0, done.output
    assert "NodeName=i[1-2] Gres=gpu:h100:4,shard:16" in done.output
    assert "==> gres.conf lines" in done.output and "NodeName=i[1-2] Name=shard Count=16" in done.output


@pytest.mark.parametrize("bad", ["1001", "-1", "x", ""])
def test_start_sh_refuses_a_bad_shard_count_before_anything(tmp_path: Path, bad: str) -> None:
    state = tmp_path / "state"
    done = subprocess.run(["bash", str(ROOT / "scripts" / "slurm" / "start.sh"), "--state", str(state), "--shards", bad],
                          capture_output=True, text=True, timeout=60, check=False)  # fmt: skip
    assert done.returncode != 0 and not state.exists(), done.stderr
    assert "--shards must be 0..1000" in done.stderr or not bad, done.stderr  # "": bash's ${2:?} says so
