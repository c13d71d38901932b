"""benchmarks/forecast_horizon.py (and `forecast_accuracy.py --offline`) end to end at a tiny size on
../shared/traces/philly_mix1 (its first 1,500 jobs): the table, the plot and its numbers, the
--json line (errors are printed, never asserted against a target; the oracle's floor is checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"
TRACES = BENCH.parents[1] / "shared" / "traces" / "philly_mix1"
SMALL = ["--jobs", "1500", "--moments", "2", "--samples", "2", "--estimators", "oracle,history", "--json"]


@pytest.fixture(autouse=True)
def _traces() -> None:
    if not TRACES.is_dir():
        pytest.skip(f"shared traces not found at {TRACES}")


@pytest.mark.parametrize("script, extra, policy", [
    ("forecast_horizon.py", ["--policy", "fifo"], "fifo"),
    ("forecast_accuracy.py", ["--offline"], "live"),
], ids=["fifo-direct", "live-via-offline-mode"])  # fmt: skip
def test_the_offline_benchmark_prints_a_table_a_plot_and_a_json_line(
    tmp_path: Path, script: str, extra: list[str], policy: str
) -> None:
    plot = tmp_path / "err.png"
    done = subprocess.run([sys.executable, str(BENCH / script), *SMALL, *extra, "--plot", str(plot)],
                          capture_output=True, text=True, timeout=600, check=True)  # fmt: skip
    offline = json.loads(done.stdout.splitlines()[-1])["offline"]
    assert (offline["jobs"], offline["moments"], offline["policy"]) == (1500, 2, policy)
    assert set(offline["overall"]) == set(offline["by_horizon"]) == {"oracle", "history"}
    for name, buckets in offline["by_horizon"].items():
        assert sum(b["count"] for b in buckets) == offline["overall"][name]["pairs"]
    if policy == "fifo":  # fifo: nothing arriving later overtakes, so the oracle is exact
        assert offline["overall"]["oracle"]["p90_abs_err_s"] == 0.0
    assert plot.stat().st_size > 1000 and json.loads(plot.with_suffix(".json").read_text())["buckets"]
    assert "horizon" in done.stderr and "oracle n" in done.stderr


def test_an_unknown_estimator_is_one_line_and_status_2() -> None:
    done = subprocess.run([sys.executable, str(BENCH / "forecast_horizon.py"), "--estimators", "psychic"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "--estimators among" in done.stderr.splitlines()[-1]
