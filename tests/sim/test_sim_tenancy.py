"""Per-tenant metrics (gputwin.sim.metrics.tenant_metrics, jain_index) and their place in the
summary: worked by hand on a one-node timeline, and absent from a cluster without quotas."""

from __future__ import annotations

import dataclasses

import pytest

from gputwin.core.model import QuotaSpec
from gputwin.sim.evaluation import Summary, TenantMetrics
from gputwin.sim.metrics import jain_index
from gputwin.sim.run import run

JAIN = [
    ("equal", [(10, 4), (20, 8)], 1.0),
    ("one-gets-nothing", [(10, 4), (0, 4)], 0.5),
    ("no-guarantee-left-out", [(10, 4), (99, 0)], 1.0),
    ("nothing-used", [(0, 4)], None),
    ("no-tenants", [], None),
]


@pytest.mark.parametrize("usage,expected", [c[1:] for c in JAIN], ids=[c[0] for c in JAIN])
def test_jain_index_of_gpu_hours_per_guaranteed_gpu(usage, expected) -> None:
    tenants = {f"t{i}": TenantMetrics(gpu_hours=h, guaranteed_gpus=g) for i, (h, g) in enumerate(usage)}
    assert jain_index(tenants) == expected


def _cluster(sim_cluster, quotas):
    base = sim_cluster({"l0": [8]})
    return dataclasses.replace(base, partitions=(dataclasses.replace(base.partitions[0], quotas=quotas),))


def test_tenant_metrics_of_a_reclaim_worked_by_hand(sim_cluster, sim_jobs) -> None:
    # a1 holds a's 4 GPUs 0..3600; a2 borrows b's 4 from 0 until b1 reclaims them at 1800; a2 runs
    # again at 3600, within a's own guarantee then, for its last 1800 s + 30 s (the default
    # checkpoint cost of a 4-GPU job).
    quotas = (QuotaSpec("a", 4, cohort="c"), QuotaSpec("b", 4, cohort="c"))
    jobs = sim_jobs([("a1", 0, 3600, 4, {"user": "a"}), ("a2", 0, 3600, 4, {"user": "a"}),
                     ("b1", 1800, 1800, 4, {"user": "b"})])  # fmt: skip
    summary, _ = run(_cluster(sim_cluster, quotas), jobs)
    a, b = summary["tenants"]["a"], summary["tenants"]["b"]
    assert (a["jobs"], a["preemptions"], b["jobs"]) == (2, 1, 1)
    assert a["gpu_hours"] == round(4 * (3600 + 1800 + 1800 + 30) / 3600, 3)  # 4-GPU jobs pay 30 s
    assert a["borrowed_gpu_hours"] == 4 * 1800 / 3600
    # a wanted 8 but its guarantee is 4, always delivered; b got its 4 at once
    assert (a["quota_delivered"], b["quota_delivered"], b["guaranteed_gpus"]) == (1.0, 1.0, 4)
    assert summary["jain"] == jain_index({k: TenantMetrics(gpu_hours=v["gpu_hours"], guaranteed_gpus=4)
                                          for k, v in summary["tenants"].items()})  # fmt: skip


def test_summary_round_trips_its_tenants(sim_cluster, sim_jobs) -> None:
    summary, _ = run(_cluster(sim_cluster, (QuotaSpec("a", 8),)), sim_jobs([("a1", 0, 10, 2, {"user": "a"})]))
    again = Summary.from_json(summary).to_json()
    assert again["tenants"] == summary["tenants"] and again["jain"] == summary["jain"] == 1.0


def test_a_cluster_without_quotas_prints_no_tenant_keys(sim_cluster, sim_jobs) -> None:
    summary, _ = run(sim_cluster({"l0": [8]}), sim_jobs([("j", 0, 10, 2, {"user": "a"})]))
    assert "tenants" not in summary and "jain" not in summary
