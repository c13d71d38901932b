"""A smoke run of benchmarks/tenancy.py at a tiny size: the JSON last line has what was measured
(and nothing unmeasured: no `fractional` until the simulator packs fractions). No timing asserts."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ALIBABA = ROOT.parent / "shared" / "traces" / "alibaba_openb" / "openb_pod_list_default.csv"


def test_benchmark_smoke_run_prints_json_last() -> None:
    command = [sys.executable, str(ROOT / "benchmarks" / "tenancy.py"), "--jobs", "3000", "--json"]
    if not ALIBABA.is_file():
        command.append("--skip-alibaba")
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    synthetic = report["synthetic_1m"]
    assert {"wall_s", "baseline_wall_s", "ratio", "jain"} <= set(synthetic) and synthetic["jobs"] == 3000
    assert synthetic["wall_s"] > 0 and synthetic["baseline_wall_s"] > 0 and synthetic["cpu_ratio"] > 0
    assert 0 < synthetic["jain"] <= 1  # 20 tenants each with a guarantee and jobs: measured
    assert "20 tenants, quotas + fairshare" in done.stderr
    if ALIBABA.is_file():
        whole = report["alibaba"]["whole"]
        assert set(report["alibaba"]) == {"whole"}  # nothing made up for the fractional half
        assert {"avg_jct", "fragmented_gpus", "gpus_allocated"} <= set(whole)
        assert whole["gpus_allocated"] >= whole["jobs"] > 0  # every GPU pod holds at least one GPU


def test_a_bad_size_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tenancy.py"), "--jobs", "0"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: --jobs: expected at least 1\n")
