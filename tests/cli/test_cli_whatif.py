"""`gputwin whatif`: compare's ranked JSON and table on the golden snapshot, the changes, and
one-line refusals. Fixture: tests/twin/data/philly-mix1-2vc.snapshot.json (two VCs of the
Philly-shaped trace at t = 10,000 s; tests/twin/data/make_snapshot.py made it)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli

SNAPSHOT = str(Path(__file__).resolve().parents[1] / "twin" / "data" / "philly-mix1-2vc.snapshot.json")
HEADER = "job_id,user,vc,jobname,gpu_num,state,submit_time,duration\n"  # the Philly-shaped trace's columns
QUICK = ("--snapshot", SNAPSHOT, "--samples", "2", "--horizon", "1d")


def whatif(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["whatif", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_ranks_the_current_policy_with_the_proposed_ones() -> None:
    status, out, err = whatif(*QUICK, "--policy", "sjf", "--policy", "fifo/consolidate", "--policy", "priority",
                              "--json")  # fmt: skip
    assert status == 0, err
    doc = json.loads(out.splitlines()[-1])
    names = [c["candidate"] for c in doc["candidates"]]
    # the current policy once (--policy priority is it), each proposal once, best average JCT first
    assert sorted(names) == ["fifo/consolidate/as-requested+backfill", "priority/first-fit/as-requested+backfill",
                             "sjf/first-fit/as-requested+backfill"]  # fmt: skip
    jcts = [c["avg_jct"] for c in doc["candidates"]]
    assert jcts == sorted(jcts) and [c["rank"] for c in doc["candidates"]] == [1, 2, 3]
    assert doc["changes"] == "none" and doc["objective"] == "avg_jct" and doc["snapshot"]["pending"] == 474


def test_changes_move_the_figures_and_show_in_the_title(tmp_path: Path) -> None:
    submit = tmp_path / "new.csv"
    submit.write_text(f"{HEADER}new1,u1,ed69ec,a,8,COMPLETED,0,3600\nnew2,u2,103959,b,1,COMPLETED,0,600\n")
    base = json.loads(whatif(*QUICK, "--json")[1].splitlines()[-1])["candidates"][0]
    status, out, err = whatif(*QUICK, "--add-nodes", "103959:4x8", "--submit", str(submit), "--json")
    assert status == 0, err
    doc = json.loads(out.splitlines()[-1])
    assert doc["changes"] == "add 103959:4x8, submit 2 jobs" and doc["snapshot"]["pending"] == 476
    assert doc["candidates"][0]["avg_jct"] < base["avg_jct"]  # 32 more GPUs for the longer queue
    status, out, _ = whatif(*QUICK, "--drain", _first_node(), "--policy", "sjf")
    assert status == 0 and "changes: drain" in out and " 1 " in out and " 2 " in out


def _first_node() -> str:
    return json.loads(Path(SNAPSHOT).read_text())["partitions"][0]["nodes"][0]


@pytest.mark.parametrize(
    ("args", "message"),
    [((), "give exactly one of --slurm, --kube and --snapshot FILE"),
     (("--snapshot", SNAPSHOT, "--add-nodes", "103959:4"), "error: --add-nodes: '103959:4': want PARTITION:COUNTxGPUS"),
     (("--snapshot", SNAPSHOT, "--add-nodes", "nope:1x8"), "error: --add-nodes: 'nope': no such partition"),
     (("--snapshot", SNAPSHOT, "--drain", "n999"), "error: --drain: 'n999': no such node in the cluster"),
     (("--snapshot", SNAPSHOT, "--policy", "magic"), "error: unknown queue policy 'magic'"),
     (("--snapshot", SNAPSHOT, "--policy", "sjf/magic"), "error: unknown placement policy 'magic'"),
     (("--snapshot", SNAPSHOT, "--model", "m"), "--model needs --estimator learned")],
    ids=["no-source", "spec", "partition", "node", "queue", "placement", "model"],
)  # fmt: skip
def test_refusals_are_one_line_exit_2(args: tuple[str, ...], message: str) -> None:
    status, out, err = whatif(*args)
    assert status == 2 and message in err and "Traceback" not in err and out == ""


def test_a_submitted_job_already_in_the_snapshot_is_refused(tmp_path: Path) -> None:
    taken = json.loads(Path(SNAPSHOT).read_text())["pending"][0]["job_id"]
    submit = tmp_path / "dup.csv"
    submit.write_text(f"{HEADER}{taken},u,ed69ec,a,1,COMPLETED,0,60\n")
    status, _, err = whatif("--snapshot", SNAPSHOT, "--submit", str(submit))
    assert status == 2 and err.strip() == f"error: {submit}: job {taken}: job_id: already in the snapshot"
