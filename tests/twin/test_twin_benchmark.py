"""benchmarks/forecast.py runs end to end at a small size and its --json line holds the figures
(timings are printed, never asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "forecast.py"


@pytest.mark.parametrize("extra", [(), ("--no-backfill",)], ids=["backfill", "strict"])
def test_the_benchmark_prints_its_figures_and_a_json_line(extra: tuple[str, ...]) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--nodes", "40", "--pending", "300", "--samples", "2",
                           "--json", *extra], capture_output=True, text=True, timeout=300, check=True)  # fmt: skip
    figures = json.loads(done.stdout.splitlines()[-1])
    assert (figures["pending"], figures["nodes"], figures["samples"], figures["backfill"]) == (300, 40, 2, not extra)
    assert figures["forecast_s"] == min(figures["workers_1_s"], figures["workers_2_s"]) > 0
    assert (figures["forecast_s_10k_pending"], figures["target_size"]) == (None, False)  # not the size
    assert "workers 1:" in done.stdout and "workers 2:" in done.stdout
    # CPU seconds per replay sit beside the wall seconds (their size is printed, never asserted).
    assert figures["cpu_s_per_replay_1"] > 0 and figures["cpu_s_per_replay_2"] > 0
    assert "CPU s per replay" in done.stdout
