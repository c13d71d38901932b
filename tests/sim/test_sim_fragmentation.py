"""Fragmentation in `simulate`'s summary (gputwin.sim.metrics, FragmentTracker): the time-averaged
free GPUs that cannot host the next waiting job; absent when every job asks for one GPU. Hand-made
timelines, then golden numbers on real traces (../shared/traces: the Philly two-tenant excerpt of
tests/sim/test_sim_tenancy_golden.py and the Alibaba 2023 default pod list)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from cluster_builders import build_cluster, build_jobs, build_ledger

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.core.model import PolicySpec
from gputwin.sim.evaluation import Summary
from gputwin.sim.run import Overrides, run, run_summary

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces"

# (id, per-node free GPUs, GPUs the head asks for, fragmented GPUs)
LEDGER = [
    ("fits-everywhere", [8, 8], 4, 0),
    ("holes-too-small", [2, 3, 8], 4, 5),
    ("one-gpu-fits-any-hole", [1, 3], 1, 0),
    ("larger-than-a-node-takes-whole-nodes", [8, 5, 3], 12, 8),
]


@pytest.mark.parametrize("free,gpus,expected", [c[1:] for c in LEDGER], ids=[c[0] for c in LEDGER])
def test_ledger_counts_free_gpus_the_job_cannot_use(free: list[int], gpus: int, expected: int) -> None:
    ledger = build_ledger({"l0": [8] * len(free)}, allocations=[(i, 8 - f) for i, f in enumerate(free) if f < 8])
    assert ledger.fragmented(gpus) == expected


def _summary(rows: list[tuple], layout: dict) -> Summary:
    cluster = build_cluster(layout, PolicySpec(placement="consolidate"))  # one node if it fits one
    summary, _ = run_summary(cluster, build_jobs(rows))
    return summary


def test_a_waiting_job_that_fits_no_hole_counts_them_until_it_starts() -> None:
    # a and b take 6 GPUs of each 8-GPU node; c (4) waits 100 s beside 2 + 2 free GPUs, then runs 10 s
    summary = _summary([("a", 0, 100, 6), ("b", 0, 100, 6), ("c", 0, 10, 4)], {"l0": [8, 8]})
    assert (summary.makespan, summary.fragmented_gpus) == (110.0, round(4 * 100 / 110, 3))
    assert summary.to_json()["fragmented_gpus"] == 3.636
    assert Summary.from_json(summary.to_json()).fragmented_gpus == 3.636


def test_no_fragmentation_while_the_waiting_job_fits_a_hole() -> None:
    summary = _summary([("a", 0, 100, 6), ("b", 0, 100, 8), ("c", 0, 10, 2)], {"l0": [8, 8]})
    assert summary.fragmented_gpus == 0.0


def test_single_gpu_traces_leave_it_out() -> None:
    summary = _summary([("a", 0, 100, 1), ("b", 0, 10, 1)], {"l0": [1]})
    assert summary.fragmented_gpus is None and "fragmented_gpus" not in summary.to_json()


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
@pytest.mark.parametrize("queue,expected", [("fifo", 13.923), ("sjf", 11.023)], ids=["fifo", "sjf"])
def test_golden_on_the_philly_two_tenant_excerpt(queue: str, expected: float) -> None:
    # of 128 GPUs, on average ~14 (fifo) or ~11 (sjf) sit free where the queue head cannot fit
    jobs = [j for j in read_trace(TRACES / "philly_mix1" / "jobs.csv").jobs if j.user in ("vc_11cb48", "vc_e13805")]
    cluster = load_cluster(Path(__file__).resolve().parent / "data" / "philly-two-teams.yaml")
    summary, _ = run(cluster, jobs, overrides=Overrides(queue=queue))
    assert summary["fragmented_gpus"] == expected


@pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
@pytest.mark.parametrize("queue,expected", [("fifo", 0.035), ("sjf", 0.015)], ids=["fifo", "sjf"])
def test_golden_on_the_alibaba_pods(queue: str, expected: float) -> None:
    # 6,203 GPU pods (1 to 8 GPUs, one node each) on the demo cluster's 64 GPUs, consolidated:
    # most pods ask for one GPU, so a waiting head rarely finds no hole it fits
    from gputwin.api.resources import demo_cluster_path

    # GPU shares rounded up to whole GPUs, as the reader once did (packed shares: tests/sim/test_sim_shares.py)
    jobs = [replace(j, gpu_milli=1000) for j in read_trace(TRACES / "alibaba_openb" / "openb_pod_list_default.csv").jobs]
    summary, _ = run(load_cluster(demo_cluster_path()), jobs, overrides=Overrides(queue=queue, placement="consolidate"))
    assert summary["fragmented_gpus"] == expected
