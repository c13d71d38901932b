"""MIG profiles in `simulate` (gputwin.core.sharing): golden numbers of a hand-made timeline on a
cluster declaring NVIDIA's A100-40GB profiles (tests/sim/data/a100-mig.yaml, two 1-GPU nodes),
profiles packed onto MIG-partitioned GPUs against the same jobs rounded up to whole GPUs."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from gputwin.api.loader import load_cluster
from gputwin.core.model import JobSpec
from gputwin.core.sharing import profile_milli, profile_slices
from gputwin.sim.run import run_summary

CLUSTER = Path(__file__).parent / "data" / "a100-mig.yaml"


def _job(i: int, ask: str | int, duration: float) -> JobSpec:
    milli = ask if isinstance(ask, int) else profile_milli(profile_slices(ask))
    return JobSpec(f"j{i}", 0.0, duration, 1, "x", seq=i, model="a100-40gb", gpu_milli=milli,
                   gpu_profile="" if isinstance(ask, int) else ask)  # fmt: skip


# Seven 1g.5gb fill n1's 7 slices (0-100 s); the 4g.20gb opens n2 (0-50 s); the half GPU may not
# join n2's MIG GPU (3 slices free) and waits for it to empty (50-100 s), the 3g.20gb behind it
# (FIFO) for a GPU (100-200 s). JCT (7 * 100 + 50 + 100 + 200) / 10 = 105; allocated
# (100 + 50 + 50 + 100) GPU-s over 200 s = 1.5 GPUs; used 7 * 0.143 * 100 + 0.571 * 50
# + 0.5 * 50 + 0.429 * 100 = 196.55 GPU-s.
JOBS = [_job(i, "1g.5gb", 100) for i in range(7)] + [_job(7, "4g.20gb", 50), _job(8, 500, 50),
                                                     _job(9, "3g.20gb", 100)]  # fmt: skip


def test_golden_profiles_packed_on_mig_gpus_against_whole_gpu_rounding() -> None:
    cluster = load_cluster(CLUSTER)
    assert cluster.topology.profiles["a100-40gb"] == ("1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb")
    packed, _ = run_summary(cluster, JOBS)
    assert (packed.avg_jct, packed.makespan, packed.gpu_utilization) == (105.0, 200.0, 0.4914)
    assert packed.sharing == {"share_jobs": 10, "shared_gpus_opened": 4, "gpu_hours_used": 0.055,
                              "gpu_hours_allocated": 0.083, "gpus_allocated": 1.5, "allocated_utilization": 0.75}
    whole, _ = run_summary(cluster, [replace(j, gpu_milli=1000, gpu_profile="") for j in JOBS])
    assert (whole.avg_jct, whole.makespan, whole.sharing) == (285.0, 500.0, None)
