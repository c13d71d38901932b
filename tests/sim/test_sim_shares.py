"""GPU shares in `simulate`'s summary (gputwin.sim.shares): GPUs allocated vs used, shares packed vs
rounded up. Hand-made timelines, then golden numbers on the Alibaba 2023 default pod list
(../shared/traces/alibaba_openb, the trace of "Beware of Fragmentation": 2,573 of its 6,203 GPU
pods ask for a share of one GPU) on the demo cluster, as tests/sim/test_sim_fragmentation.py runs it."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cluster_builders import build_cluster, build_jobs

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.core.model import PolicySpec
from gputwin.sim.evaluation import Summary
from gputwin.sim.run import Overrides, run, run_summary

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"


def _summary(rows: list[tuple], queue: str = "fifo") -> Summary:
    summary, _ = run_summary(build_cluster({"l0": [1]}, PolicySpec(queue=queue)), build_jobs(rows))
    return summary


# (id, queue, jobs (id, submit, duration, gpus, extra), avg JCT, gpu_utilization, sharing figures)
TIMELINES = [
    ("two-halves-run-together-on-one-gpu", "fifo", [("a", 0, 100, 1, {"gpu_milli": 500}), ("b", 0, 100, 1, {"gpu_milli": 500})],
     100.0, 1.0, {"share_jobs": 2, "shared_gpus_opened": 1, "gpu_hours_used": 0.028, "gpu_hours_allocated": 0.028,
                  "gpus_allocated": 1.0, "allocated_utilization": 1.0}),
    ("a-quarter-alone-holds-the-whole-gpu", "fifo", [("a", 0, 100, 1, {"gpu_milli": 250})],
     100.0, 0.25, {"share_jobs": 1, "shared_gpus_opened": 1, "gpu_hours_used": 0.007, "gpu_hours_allocated": 0.028,
                   "gpus_allocated": 1.0, "allocated_utilization": 1.0}),
    ("a-preemptive-queue-runs-shares-whole", "srtf", [("a", 0, 100, 1, {"gpu_milli": 500}), ("b", 0, 100, 1, {"gpu_milli": 500})],
     150.0, 0.5, {"share_jobs": 2, "shared_gpus_opened": 0, "gpu_hours_used": 0.028, "gpu_hours_allocated": 0.056,
                  "gpus_allocated": 1.0, "allocated_utilization": 1.0}),
]  # fmt: skip


@pytest.mark.parametrize("queue,rows,jct,util,sharing", [c[1:] for c in TIMELINES], ids=[c[0] for c in TIMELINES])
def test_shares_are_used_by_their_fraction_and_allocated_whole(queue: str, rows: list[tuple], jct: float, util: float,
                                                               sharing: dict) -> None:  # fmt: skip
    summary = _summary(rows, queue)
    assert (summary.avg_jct, summary.gpu_utilization, summary.sharing) == (jct, util, sharing)
    assert Summary.from_json(summary.to_json()).sharing == sharing


def test_whole_gpu_traces_print_no_sharing() -> None:
    summary = _summary([("a", 0, 100, 1), ("b", 0, 10, 1)])
    assert summary.sharing is None and "sharing" not in summary.to_json()


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
@pytest.mark.parametrize(
    "queue,fractional,whole",
    [
        ("fifo", (30861.33, 0.0561, 53600.836, 0.005), (30904.372, 0.065, 59612.0, 0.035)),
        ("sjf", (30857.162, 0.0561, 53603.495, 0.005), (30860.857, 0.065, 59612.0, 0.015)),
    ],
    ids=["fifo", "sjf"],
)
def test_golden_alibaba_packed_shares_against_whole_gpu_rounding(queue: str, fractional: tuple, whole: tuple) -> None:
    # (avg JCT, GPU utilisation, GPU-hours allocated, fragmented GPUs): packing ~1,400 shared GPUs
    # saves ~6,000 of ~59,600 GPU-hours allocated on the demo cluster's 64 GPUs
    from gputwin.api.resources import demo_cluster_path

    jobs = read_trace(TRACES / "alibaba_openb" / "openb_pod_list_default.csv").jobs
    cluster = load_cluster(demo_cluster_path())
    overrides = Overrides(queue=queue, placement="consolidate")
    packed, _ = run(cluster, jobs, overrides=overrides)
    rounded, outcome = run(cluster, [replace(j, gpu_milli=1000) for j in jobs], overrides=overrides)
    assert packed["sharing"]["share_jobs"] == 2_573 and "sharing" not in rounded
    got_packed = (packed["avg_jct"], packed["gpu_utilization"], packed["sharing"]["gpu_hours_allocated"],
                  packed["fragmented_gpus"])  # fmt: skip
    rounded_hours = round(sum(outcome.busy.area.values()) / 3600, 0)  # whole GPUs: allocated = used
    assert got_packed == fractional
    assert (rounded["avg_jct"], rounded["gpu_utilization"], rounded_hours, rounded["fragmented_gpus"]) == whole
