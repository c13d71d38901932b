"""benchmarks/forecast_accuracy.py: its trace excerpt and statistics (pure), and a small run on the
real test cluster (skipped without SLURM, a failure under CI: `slurm_cluster`).

The small run checks the report's shape and that every figure is a finite number; how accurate the
forecasts are is the full benchmark's business (no accuracy or timing assertions in tests).
The excerpt is rows 29000.. of ../shared/traces/philly_mix1/jobs.csv (skipped without the traces).
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from slurm_testcluster import Cluster  # tests/slurm/ helpers

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
BENCHMARK = BENCHMARKS / "forecast_accuracy.py"
KEYS = {"jobs", "gputwin_median_abs_err_s", "squeue_start_median_abs_err_s", "ratio", "gputwin_p90_abs_err_s",
        "squeue_start_p90_abs_err_s", "gputwin_median_rel_err", "start_latency_s", "compared"}  # fmt: skip


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    sys.path.insert(0, str(BENCHMARKS))  # it imports slurm_live as a sibling, as when run as a script
    try:
        spec = importlib.util.spec_from_file_location("forecast_accuracy", BENCHMARK)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(str(BENCHMARKS))
    return module


def test_excerpt_compresses_and_clips(bench: ModuleType) -> None:
    if not bench.TRACE.is_file():
        pytest.skip(f"shared traces not found at {bench.TRACE}")
    jobs = bench.excerpt(bench.TRACE, 29000, 50, 30.0, 120)
    assert len(jobs) == 50 and jobs[0].arrival == 0.0
    assert [j.arrival for j in jobs] == sorted(j.arrival for j in jobs)
    assert all(1 <= j.gpus <= 8 and 3 <= j.seconds <= 120 for j in jobs)
    assert all(j.limit_minutes * 60 >= 2 * j.seconds for j in jobs)


@pytest.mark.parametrize(
    ("pairs", "median", "p90"),
    [pytest.param([(1.0, 0.1)], 1.0, 1.0, id="one"),
     pytest.param([(float(i), i / 10) for i in range(1, 11)], 5.0, 9.0, id="nearest-rank")],
)  # fmt: skip
def test_summary_quantiles(bench: ModuleType, pairs: list[tuple[float, float]], median: float, p90: float) -> None:
    errs = {"gputwin": pairs, "gputwin_no_latency": pairs, "gputwin_limits": pairs,
            "squeue_start": [(2 * a, r) for a, r in pairs]}
    result = bench.summary(errs)
    assert (result["gputwin_median_abs_err_s"], result["gputwin_p90_abs_err_s"]) == (median, p90)
    assert result["ratio"] == 0.5 and result["compared"] == len(pairs)


def test_small_run_on_the_live_cluster(slurm_cluster: Cluster) -> None:
    command = [sys.executable, str(BENCHMARK), "--state", str(slurm_cluster.state), "--jobs", "80",
               "--max-seconds", "30", "--moments", "3", "--samples", "4", "--json"]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])["slurm"]
    assert KEYS <= set(result) and result["jobs"] == 80 and result["compared"] > 0
    assert all(isinstance(result[k], (int, float)) and math.isfinite(result[k]) for k in KEYS), result
    assert result["start_latency_s"] >= 0
    assert "squeue_start" in done.stderr  # the table goes to stderr with --json
