"""`gputwin compare` on the embedded demo trace and cluster: ranking, report files, skips, errors."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["compare", *args])
    return result.exit_code, result.stdout, result.stderr


def demo_args(out: Path, *extra: str) -> list[str]:
    return ["--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()), "--out", str(out), *extra]


@pytest.fixture(scope="module")
def grid_2x2(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """fifo,sjf x consolidate,topology-aware in two worker processes, with plots, as --json."""
    out = tmp_path_factory.mktemp("compare")
    code, stdout, stderr = invoke(*demo_args(out, "--policies", "fifo,sjf", "--placements",
                                             "consolidate,topology-aware", "--jobs", "2", "--json"))  # fmt: skip
    assert code == 0, stderr
    return out, json.loads(stdout)


def test_2x2_grid_gives_four_candidates_ranked_by_avg_jct(grid_2x2: tuple[Path, dict]) -> None:
    _, data = grid_2x2
    rows = data["candidates"]
    assert {r["candidate"] for r in rows} == {
        "fifo/consolidate", "fifo/topology-aware", "sjf/consolidate", "sjf/topology-aware"}
    assert [r["rank"] for r in rows] == [1, 2, 3, 4]
    jcts = [r["avg_jct"] for r in rows]
    assert jcts == sorted(jcts)
    assert rows[0]["queue"] == "sjf"  # sjf beats fifo on the demo trace
    assert data["skipped"] == []
    assert data["trace"]["jobs"] == 3375
    for row in rows:
        assert row["jobs"] == 3375
        assert set(row["partitions"]) == {"train", "dev", "infer"}
        assert {"avg_jct", "p99_jct", "avg_queue", "p99_queue", "gpu_utilization", "avg_overhead",
                "preemptions"} <= row.keys()  # fmt: skip


def test_summary_json_and_csv_match_the_ranked_list(grid_2x2: tuple[Path, dict]) -> None:
    out, data = grid_2x2
    written = json.loads((out / "summary.json").read_text())
    assert written["candidates"] == data["candidates"]
    with open(out / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 4 * (1 + 3)  # overall + three partitions per candidate
    overall = [r for r in rows if r["partition"] == "all"]
    assert [r["candidate"] for r in overall] == [c["candidate"] for c in data["candidates"]]
    assert [float(r["avg_jct"]) for r in overall] == [c["avg_jct"] for c in data["candidates"]]
    dev = next(r for r in rows if r["partition"] == "dev" and r["rank"] == "1")
    assert float(dev["avg_queue"]) == data["candidates"][0]["partitions"]["dev"]["avg_queue"]


def test_plots_and_html_are_written(grid_2x2: tuple[Path, dict]) -> None:
    out, _ = grid_2x2
    for name in ("jct_cdf.png", "queue_by_partition.png", "utilization.png", "span_hist.png"):
        data = (out / name).read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000, name
    page = (out / "index.html").read_text()
    assert page.count('src="data:image/png;base64,iVBORw0KGgo') == 4  # self-contained
    assert "sjf/topology-aware" in page


def test_table_output_notes_skipped_backfill_with_preemptive_policies(tmp_path: Path) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path, "--policies", "sjf,srtf", "--placements", "consolidate",
                                             "--backfill", "on,off", "--jobs", "1", "--no-plots", "--quiet"))  # fmt: skip
    assert code == 0, stderr
    assert "srtf/consolidate+backfill: skipped" in stdout
    for name in ("sjf/consolidate+backfill", "sjf/consolidate ", "srtf/consolidate "):
        assert name in stdout
    data = json.loads((tmp_path / "summary.json").read_text())
    assert len(data["candidates"]) == 3
    note = "srtf/consolidate+backfill: skipped, backfill does not apply to the preemptive srtf policy"
    assert data["skipped"] == [note]
    assert not (tmp_path / "index.html").exists()


@pytest.mark.parametrize(
    "extra,message",
    [
        (("--policies", "fifo,nope"), "unknown queue policy 'nope'"),
        (("--placements", ","), "empty list"),
        (("--backfill", "maybe"), "--backfill takes on,off"),
        (("--sizing", "huge"), "unknown sizing policy 'huge'"),
    ],
)
def test_bad_grid_is_a_one_line_error(tmp_path: Path, extra: tuple[str, ...], message: str) -> None:
    code, stdout, stderr = invoke(*demo_args(tmp_path, *extra))
    assert code == 2
    assert stdout == ""
    assert stderr.count("\n") == 1 and stderr.startswith("error: ") and message in stderr


def test_bad_trace_is_a_one_line_error(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,user,vc,gpu_num,submit_time,duration\n1,u,train,x,0,10\n")
    code, _, stderr = invoke("--trace", str(trace), "--cluster", str(demo_cluster_path()), "--out",
                             str(tmp_path / "out"), "--policies", "fifo", "--placements", "consolidate")  # fmt: skip
    assert code == 2
    assert stderr.count("\n") == 1 and ":2: gpu_num: " in stderr


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_resumed_sweep_runs_on_its_own_copy_of_the_trace_not_the_edited_original(
    tmp_path: Path, workers: str
) -> None:
    # compare loads the trace once and hands it to the local workers, but only while the sweep's
    # copy is that same file: an edit made before resuming must not mix two traces in one report.
    trace = tmp_path / "jobs.csv"
    trace.write_bytes(demo_trace_path().read_bytes())
    args = ["--trace", str(trace), "--cluster", str(demo_cluster_path()), "--out", str(tmp_path / "out"),
            "--policies", "fifo,sjf", "--placements", "consolidate", "--jobs", workers, "--no-plots", "--json"]
    code, stdout, stderr = invoke(*args)
    assert code == 0, stderr
    first = {c["candidate"]: c["avg_jct"] for c in json.loads(stdout)["candidates"]}
    (tmp_path / "out" / "sweep" / "results" / "1.json").unlink()  # as if interrupted before sjf ended
    lines = trace.read_text().splitlines(keepends=True)
    trace.write_text("".join(lines[: len(lines) // 2]))  # the original changes meanwhile
    code, stdout, stderr = invoke(*args)
    assert code == 0, stderr
    assert {c["candidate"]: c["avg_jct"] for c in json.loads(stdout)["candidates"]} == first
