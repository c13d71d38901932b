"""The `gputwin` command as a user runs it: real files in, exit codes and messages out."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli

REQUIRED_KEYS = {"jobs", "avg_jct", "avg_queue", "p50_jct", "p95_jct", "p99_jct", "p99_queue", "makespan",
                 "gpu_utilization", "wall_seconds", "skipped", "partitions"}  # fmt: skip
ALIBABA = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "alibaba_openb"
PHILLY = ALIBABA.parent / "philly_mix1"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def simulate_json(*extra: str) -> dict:
    code, out, err = invoke("simulate", "--trace", str(demo_trace_path()), "--cluster",
                            str(demo_cluster_path()), "--json", *extra)  # fmt: skip
    assert code == 0, err
    return json.loads(out)


def test_simulate_json_has_every_documented_key_overall_and_per_partition() -> None:
    summary = simulate_json()
    assert REQUIRED_KEYS <= summary.keys()
    assert summary["jobs"] == 3375
    assert set(summary["partitions"]) == {"train", "dev", "infer"}
    for metrics in summary["partitions"].values():
        assert {"jobs", "avg_jct", "avg_queue", "p99_jct", "gpu_utilization"} <= metrics.keys()
    assert sum(m["jobs"] for m in summary["partitions"].values()) == summary["jobs"]


def test_simulate_writes_job_log_and_summary(tmp_path: Path) -> None:
    simulate_json("--out", str(tmp_path), "--policy", "sjf", "--placement", "topology-aware")
    rows = (tmp_path / "jobs.csv").read_text().splitlines()
    assert rows[0].startswith("job_id,partition,user,name,task_type,gpus_requested,gpus,submit,start,end,jct")
    assert len(rows) == 1 + 3375
    assert json.loads((tmp_path / "summary.json").read_text())["jobs"] == 3375


def test_policy_overrides_change_the_outcome() -> None:
    fifo, sjf = simulate_json("--policy", "fifo"), simulate_json("--policy", "sjf")
    assert sjf["avg_queue"] < fifo["avg_queue"]
    assert {label.split("/")[0].removesuffix("+backfill") for label in sjf["policies"].values()} == {"sjf"}


@pytest.mark.parametrize(
    "content,expected",
    [
        ("job_id,user,vc,gpu_num,submit_time,duration\n1,u,train,x,0,10\n", ":2: gpu_num: "),
        ("job_id,user,vc,gpu_num,submit_time,duration\n1,u,train,1,0,-5\n", ":2: duration: "),
        ("job_id,user,gpu_num,submit_time,duration\n", ":1: "),
    ],
    ids=["not-an-integer", "negative-duration", "missing-column"],
)
def test_bad_trace_is_one_line_error_with_file_line_field(tmp_path: Path, content: str, expected: str) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text(content)
    code, out, err = invoke("simulate", "--trace", str(trace), "--cluster", str(demo_cluster_path()))
    assert code == 2
    assert err.startswith(f"error: {trace}{expected}"), err
    assert "Traceback" not in err and out == ""


def test_skip_invalid_counts_bad_lines_instead_of_stopping(tmp_path: Path) -> None:
    trace = tmp_path / "some-bad.csv"
    trace.write_text("job_id,user,vc,gpu_num,submit_time,duration\n1,u,train,x,0,10\n2,u,train,2,0,10\n")
    code, out, err = invoke("simulate", "--trace", str(trace), "--cluster", str(demo_cluster_path()),
                            "--json", "--skip-invalid")  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["jobs"] == 1 and summary["skipped"] == {"invalid: gpu_num": 1}


def test_bad_cluster_file_names_document_and_field(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(demo_cluster_path().read_text().replace("gpusPerNode: 8", "gpusPerNode: -1", 1))
    code, _, err = invoke("simulate", "--trace", str(demo_trace_path()), "--cluster", str(cluster))
    assert code == 2
    assert f"error: {cluster}:doc1: spec.nodeGroups[0].gpusPerNode: " in err


def test_missing_trace_file_is_a_clear_error(tmp_path: Path) -> None:
    code, _, err = invoke("simulate", "--trace", str(tmp_path / "nope.csv"), "--cluster", str(demo_cluster_path()))
    assert code == 2 and "nope.csv" in err and "Traceback" not in err


def test_compat_refuses_what_it_cannot_reproduce() -> None:
    code, _, err = invoke("simulate", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()),
                          "--compat", "helios", "--policy", "las", "--placement", "consolidate")  # fmt: skip
    assert code == 2 and "--compat helios reproduces queue policies fifo/sjf/srtf" in err


ESTIMATES_TRACE = "job_id,user,vc,jobname,gpu_num,submit_time,duration\n1,u,a,j1,1,0,10\n2,u,a,j2,2,0,10\n"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(("--policy", "qssf", "--compat", "helios"),
                     "error: --compat helios reproduces qssf only with --estimates FILE", id="compat-qssf-without-estimates"),
        pytest.param(("--policy", "fifo", "--estimates", "E"),
                     "error: --estimates: only the qssf queue policy reads run-time estimates", id="estimates-without-qssf"),
        pytest.param(("--policy", "sjf", "--compat", "helios", "--estimates", "E"),
                     "error: --estimates: only the qssf queue policy reads", id="compat-sjf-with-estimates"),
    ],
)  # fmt: skip
def test_estimates_go_with_qssf_and_compat_qssf_needs_them(tmp_path: Path, args: tuple[str, ...],
                                                           message: str) -> None:  # fmt: skip
    trace, cluster, estimates = tmp_path / "jobs.csv", tmp_path / "cluster.csv", tmp_path / "e.csv"
    trace.write_text(ESTIMATES_TRACE)
    cluster.write_text("vc,num_nodes\na,1\n")
    estimates.write_text("jobname,priority\nj1,5\nj2,6\n")
    code, _, err = invoke("simulate", "--trace", str(trace), "--cluster", str(cluster), "--placement", "consolidate",
                          *[str(estimates) if a == "E" else a for a in args])  # fmt: skip
    assert code == 2 and err.startswith(message) and len(err.splitlines()) == 1, err


@pytest.mark.parametrize("compat", [True, False], ids=["compat-helios", "native"])
def test_estimates_drive_qssf_from_the_command_line(tmp_path: Path, compat: bool) -> None:
    # The file's row for no trace job is counted as unused, and reported with the file.
    trace, cluster, estimates = tmp_path / "jobs.csv", tmp_path / "cluster.csv", tmp_path / "e.csv"
    trace.write_text(ESTIMATES_TRACE)
    cluster.write_text("vc,num_nodes\na,1\n")
    estimates.write_text("jobname,priority\nj1,50\nj2,1\nunused,3\n")
    code, out, err = invoke("simulate", "--trace", str(trace), "--cluster", str(cluster), "--policy", "qssf",
                            "--placement", "consolidate", "--estimates", str(estimates), "--json",
                            *(["--compat", "helios"] if compat else []))  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["estimates"] == {"path": str(estimates), "rows": 3, "unused": 1}
    assert summary["compat"] == ("helios" if compat else None)
    assert (summary["jobs"], summary["avg_jct"]) == (2, 10.0)  # both fit the 8-GPU node at once


@pytest.mark.skipif(not PHILLY.is_dir(), reason=f"shared traces not found at {PHILLY}")
def test_compat_qssf_with_the_reference_estimates_prints_the_reference_numbers() -> None:
    # The golden test (tests/sim/test_sim_golden.py) pins every partition; this is the command a user types.
    code, out, err = invoke("simulate", "--trace", str(PHILLY / "jobs.csv"), "--cluster", str(PHILLY / "cluster.csv"),
                            "--policy", "qssf", "--placement", "random", "--compat", "helios",
                            "--estimates", str(PHILLY / "helios_estimates.csv"), "--json")  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    reference = json.loads((PHILLY / "qssf_reference_results.json").read_text())["qssf"]["random"]
    assert (summary["avg_jct"], summary["avg_queue"]) == (round(reference["avg_jct"], 3), round(reference["avg_queue"], 3))


def test_help_lists_commands_and_options() -> None:
    code, out, _ = invoke("simulate", "--help")
    assert code == 0
    for option in ("--trace", "--format", "--cluster", "--policy", "--placement", "--sizing", "--backfill",
                   "--compat", "--estimates", "--seed", "--out", "--json", "--skip-invalid"):  # fmt: skip
        assert option in out


@pytest.mark.skipif(not ALIBABA.is_dir(), reason=f"shared traces not found at {ALIBABA}")
@pytest.mark.parametrize("policy", ["fifo", "sjf", "srtf", "las", "qssf", "priority"])
@pytest.mark.parametrize("placement", ["first-fit", "consolidate", "topology-aware", "random"])
def test_every_policy_and_placer_replays_the_alibaba_trace(policy: str, placement: str) -> None:
    # 6,203 GPU pods routed to the demo cluster's catch-all partition (64 GPUs).
    code, out, err = invoke("simulate", "--trace", str(ALIBABA / "openb_pod_list_default.csv"), "--cluster",
                            str(demo_cluster_path()), "--policy", policy, "--placement", placement, "--json")  # fmt: skip
    assert code == 0, err
    summary = json.loads(out)
    assert summary["jobs"] + sum(summary["rejected"].values()) == 6203
    assert summary["avg_jct"] >= summary["avg_queue"] >= 0


def test_console_script_runs_as_installed() -> None:
    proc = subprocess.run([sys.executable, "-m", "gputwin.cli.main", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and "gputwin" in proc.stdout
