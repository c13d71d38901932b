"""A smoke run of benchmarks/tenancy.py at a tiny size: the JSON last line has what was measured
(the Alibaba pods with fractions packed beside rounded up). No timing asserts."""

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
        whole, packed = report["alibaba"]["whole"], report["alibaba"]["fractional"]
        assert whole["jobs"] == packed["jobs"] > 0 and whole["share_jobs"] == 0 < packed["share_jobs"]
        assert whole["gpu_hours_allocated"] == whole["gpu_hours"]  # each pod holds what it uses
        assert packed["gpu_hours"] < whole["gpu_hours"]  # a share uses its fraction, not a GPU
        assert packed["gpu_hours"] <= packed["gpu_hours_allocated"] < whole["gpu_hours_allocated"]


def test_a_bad_size_is_refused() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "tenancy.py"), "--jobs", "0"],
                          capture_output=True, text=True, timeout=60, cwd=ROOT, check=False)  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: --jobs: expected at least 1\n")
