"""`gputwin forecast`: the table and --json on the golden snapshot, --save, --cluster, and usage errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.cli.main import cli

DATA = Path(__file__).resolve().parents[1] / "twin" / "data"
SNAPSHOT = str(DATA / "philly-mix1-2vc.snapshot.json")


def forecast(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["forecast", *args])
    return result.exit_code, result.stdout, result.stderr


def test_json_has_every_pending_job_and_both_partitions() -> None:
    status, out, err = forecast("--snapshot", SNAPSHOT, "--samples", "4", "--seed", "7", "--json")
    assert status == 0, err
    doc = json.loads(out.splitlines()[-1])
    assert (len(doc["jobs"]), doc["samples"], doc["seed"], doc["workers"]) == (474, 4, 7, 1)
    assert [p["partition"] for p in doc["partitions"]] == ["ed69ec", "103959"]
    first = doc["jobs"][0]
    assert first["job_id"] == "12851" and 0 <= first["start_p50_s"] <= first["start_p90_s"]
    assert first["start_p50_at"] == pytest.approx(doc["taken_at"] + first["start_p50_s"], abs=1e-3)


def test_the_table_and_the_saved_snapshot(tmp_path: Path) -> None:
    saved = tmp_path / "again.json"
    status, out, err = forecast("--snapshot", SNAPSHOT, "--samples", "2", "--horizon", "2h", "--save", str(saved))
    assert status == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("forecast: 474 pending jobs, 2 samples, horizon 2h00m00s")
    assert lines[1].split() == ["JOB", "PARTITION", "GPUS", "START", "p50", "START", "p90", "END", "p50"]
    assert "> horizon" in out  # a 2 h horizon does not reach the 103959 queue's end
    assert lines[-1].startswith("partition 103959: 360 pending, drains in > horizon")
    assert saved.read_bytes() == Path(SNAPSHOT).read_bytes()


def test_a_declared_cluster_missing_a_partition_is_refused(tmp_path: Path) -> None:
    cluster = tmp_path / "vc.csv"
    cluster.write_text("vc,num_nodes\ned69ec,8\n")
    status, _, err = forecast("--snapshot", SNAPSHOT, "--cluster", str(cluster))
    assert status == 2 and err.splitlines() == [
        f"error: {cluster}: partitions: no partition named '103959', which jobs of the snapshot wait in"]


@pytest.mark.parametrize(
    ("args", "message"),
    [((), "give exactly one of --slurm, --kube and --snapshot FILE"),
     (("--slurm", "--snapshot", SNAPSHOT), "give exactly one of --slurm, --kube and --snapshot FILE"),
     (("--snapshot", SNAPSHOT, "--horizon", "0"), "want a duration up to 366d"),
     (("--snapshot", SNAPSHOT, "--horizon", "5y"), "want a duration up to 366d"),
     (("--snapshot", SNAPSHOT, "--samples", "0"), "--samples")],
    ids=["neither", "both", "zero-horizon", "unknown-unit", "no-samples"],
)  # fmt: skip
def test_usage_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    status, _, err = forecast(*args)
    assert status == 2 and message in err


TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly_mix1"
needs_traces = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")


@needs_traces
def test_estimator_learned_from_a_history(tmp_path: Path) -> None:
    """History: the first 3,000 jobs of ../shared/traces/philly_mix1/jobs.csv."""
    history = tmp_path / "philly-3000.csv"
    history.write_text("".join((TRACES / "jobs.csv").read_text().splitlines(keepends=True)[:3001]))
    args = ("--snapshot", SNAPSHOT, "--samples", "2", "--horizon", "1d", "--json", "--history", str(history))
    docs = []
    for estimator in ("history", "learned", "learned"):
        status, out, err = forecast(*args, "--estimator", estimator)
        assert status == 0, err
        docs.append([j["start_p50_s"] for j in json.loads(out.splitlines()[-1])["jobs"]])
    assert docs[1] == docs[2] and docs[1] != docs[0]


@pytest.mark.parametrize(
    ("args", "message"),
    [(("--model", "m"), "Error: --model needs --estimator learned"),
     (("--estimator", "learned"), "Error: --estimator learned needs --history TRACE or --model DIR"),
     (("--estimator", "learned", "--model", "nowhere"), "error: nowhere/model.json: model: not found")],
    ids=["model-without-learned", "learned-without-input", "missing-model"],
)  # fmt: skip
def test_estimator_errors_exit_2(args: tuple[str, ...], message: str) -> None:
    status, _, err = forecast("--snapshot", SNAPSHOT, *args)
    assert status == 2 and message in err and "Traceback" not in err


def test_start_latency_option_delays_the_first_starts_by_exactly_that() -> None:
    """`--start-latency` overrides the snapshot's (0 here): the jobs that start as soon as room
    appears start that much later; a bad value is refused before any replay."""
    from gputwin.cli.forecast import forecast

    def first_starts(*extra: str) -> list[float]:
        result = CliRunner().invoke(forecast, ["--snapshot", str(SNAPSHOT), "--samples", "2", "--horizon", "12h",
                                               "--json", *extra])  # fmt: skip
        assert result.exit_code == 0, result.output
        return [job["start_p50_s"] for job in json.loads(result.output)["jobs"][:3]]

    base, later = first_starts(), first_starts("--start-latency", "5")
    assert later == [pytest.approx(s + 5, abs=1e-6) for s in base]
    refused = CliRunner().invoke(forecast, ["--snapshot", str(SNAPSHOT), "--start-latency", "4000"])
    assert refused.exit_code == 2 and "--start-latency" in refused.output
