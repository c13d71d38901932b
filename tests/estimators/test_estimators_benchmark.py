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


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")
def test_instructions_child_builds_the_learned_estimator_with_config() -> None:
    """`--config` reaches the replay `--instructions` counts: with a first fit out of reach, the first
    3,000 jobs are answered by the running mean alone, and QSSF's JCT differs from the default's."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import estimator as bench
    finally:
        sys.path.pop(0)
    jcts = {}
    for name, config in (("default", None), ("no fit", {"min_train": 10**6})):
        argv = bench.child_argv(SHARED / "philly_mix1", "learned", 3000, config)
        proc = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
        assert proc.returncode == 0, proc.stderr
        jcts[name] = float(proc.stdout.strip().splitlines()[-1])
    assert jcts["default"] != jcts["no fit"], jcts


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")
def test_digest_is_the_same_for_the_same_predictions_and_moves_with_them() -> None:
    """`--digest` hashes every learned prediction: two runs agree; another setting changes it."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import estimator as bench
    finally:
        sys.path.pop(0)
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        data = bench.inputs(SHARED, Path(folder))
    data = {name: (cluster, _first(trace, 2000)) for name, (cluster, trace) in data.items()}
    runs = [bench.digest(data, None), bench.digest(data, None), bench.digest(data, {"rounds": 10})]
    assert runs[0] == runs[1] and runs[0]["philly_mix1"]["fits"] >= 1
    assert runs[2]["philly_mix1"]["sha256"] != runs[0]["philly_mix1"]["sha256"]


def _first(trace: object, count: int) -> object:
    import dataclasses

    return dataclasses.replace(trace, jobs=trace.jobs[:count])  # type: ignore[attr-defined, type-var]


def test_tie_noise_leaves_seed_0_and_unknowns_and_moves_others_by_about_a_percent() -> None:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import estimator as bench
    finally:
        sys.path.pop(0)
    from gputwin.core.model import JobSpec

    class Fixed:
        def __init__(self, value: float) -> None:
            self.value = value

        def predict(self, job: JobSpec) -> float:
            return self.value

    jobs = [JobSpec(f"j{i}", 0.0, 1.0, 1, "t", "u", "n") for i in range(200)]
    assert [bench._TieNoise(Fixed(100.0), 0).predict(j) for j in jobs] == [100.0] * 200
    nan = bench._TieNoise(Fixed(float("nan")), 3).predict(jobs[0])
    assert nan != nan
    noisy = [bench._TieNoise(Fixed(100.0), 3).predict(j) for j in jobs]
    assert noisy == [bench._TieNoise(Fixed(100.0), 3).predict(j) for j in jobs]  # seeded
    assert len(set(noisy)) == 200 and all(95.0 < v < 105.0 for v in noisy)
