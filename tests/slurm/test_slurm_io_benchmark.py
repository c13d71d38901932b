"""Smoke run of benchmarks/slurm_io.py: small sizes, no live cluster, the JSON report on the last line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_slurm_io_benchmark_smoke_run_prints_json_last() -> None:
    # Without GPUTWIN_SLURM_STATE the live apply is left out (and said so): this test needs no cluster.
    env = {key: value for key, value in os.environ.items() if key != "GPUTWIN_SLURM_STATE"}
    command = [
        sys.executable,
        str(ROOT / "benchmarks" / "slurm_io.py"),
        "--records",
        "2000",
        "--repeat",
        "1",
        "--json",
    ]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, cwd=ROOT, env=env, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert {"sacct_records_per_s", "apply_seconds", "render_seconds"} <= set(report)
    assert report["sacct_records"] == 2000 and report["sacct_records_per_s"] > 0
    assert 0 < report["sacct_jobs"] < 2000 and report["sacct_skipped"]["job steps"] > 0
    assert (
        report["render_nodes"] == 1000 and report["render_partitions"] == 8 and report["render_seconds"] > 0
    )
    assert report["apply_seconds"] is None and "GPUTWIN_SLURM_STATE" in report["apply_note"]
    assert "sacct -P records/s" in done.stderr  # the human table goes to stderr with --json
