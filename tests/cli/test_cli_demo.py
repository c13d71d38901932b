"""`gputwin demo`: the embedded run; `--json` has compare's shape (tests/cli/test_cli_compare.py)."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli


def invoke(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_demo_json_ranks_every_candidate_best_first() -> None:
    code, out, err = invoke("demo", "--json")
    assert code == 0, err
    data = json.loads(out)
    rows = data["candidates"]
    assert len(rows) == 6 and all(r["jobs"] == 3375 for r in rows)
    assert [r["rank"] for r in rows] == list(range(1, 7))
    assert [r["avg_jct"] for r in rows] == sorted(r["avg_jct"] for r in rows)
    assert data["trace"]["jobs"] == 3375 and data["objective"] == "avg_jct"


def test_demo_json_has_the_keys_compare_json_has(tmp_path: Path) -> None:
    code, out, err = invoke("compare", "--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()),
                            "--policies", "fifo", "--placements", "first-fit", "--backfill", "off", "--jobs", "1", "--no-plots",
                            "--out", str(tmp_path / "out"), "--json")  # fmt: skip
    assert code == 0, err
    compared = json.loads(out)
    code, out, err = invoke("demo", "--json")
    assert code == 0, err
    demo = json.loads(out)
    assert set(demo) == set(compared)
    assert set(demo["trace"]) == set(compared["trace"])
    assert set(demo["candidates"][0]) == set(compared["candidates"][0])
    # the same candidate on the same inputs gives the same numbers either way
    fifo = next(r for r in demo["candidates"] if r["candidate"] == compared["candidates"][0]["candidate"])
    assert fifo["avg_jct"] == compared["candidates"][0]["avg_jct"]


def test_demo_table_names_the_candidates() -> None:
    code, out, err = invoke("demo")
    assert code == 0, err
    rows = [line for line in out.splitlines() if line.startswith("│")]
    assert len(rows) == 6 and all(" 3,375 " in row for row in rows) and "fifo/first-fit" in out
