"""benchmarks/estimator.py runs and prints its JSON last line (a smoke run: timings only, small fit).

Uses the shared Philly-shaped trace (../shared/traces/philly_mix1) like the benchmark itself.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared" / "traces"


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")
def test_benchmark_smoke_run_prints_its_figures() -> None:
    argv = [sys.executable, str(ROOT / "benchmarks" / "estimator.py"), "--skip-accuracy", "--repeat", "1",
            "--train-rows", "5000", "--traces", str(SHARED), "--json"]  # fmt: skip
    proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert set(result) == {"load", "overhead", "training"}
    assert result["overhead"]["history"] > 0 and result["overhead"]["learned"] > 0
    assert result["training"]["rows"] == 5000 and result["training"]["fit_s"] > 0
