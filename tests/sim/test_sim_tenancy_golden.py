"""Golden numbers of quotas on a real trace: the jobs of two Philly VCs (11cb48 and e13805 of
../shared/traces/philly_mix1/jobs.csv, 5,638 jobs; each VC has one user, vc_<VC>) sharing one
16-node partition as a two-tenant cohort (tests/sim/data/philly-two-teams.yaml: 64 GPUs guaranteed
each, borrowing up to 32, e13805 lending at most 48; checkpoints cost 60 s). Numbers are pinned so
a change in behaviour shows up; the same jobs on the same partition without quotas are the
baseline each is compared with."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.sim.run import Overrides, run

TRACES = Path(__file__).resolve().parents[2].parent / "shared" / "traces" / "philly_mix1"
CLUSTER = Path(__file__).resolve().parent / "data" / "philly-two-teams.yaml"
pytestmark = pytest.mark.skipif(not TRACES.is_dir(), reason=f"shared traces not found at {TRACES}")
USERS = ("vc_11cb48", "vc_e13805")


@pytest.fixture(scope="module")
def two_teams() -> tuple[Any, Any]:
    jobs = [j for j in read_trace(TRACES / "jobs.csv").jobs if j.user in USERS]
    assert len(jobs) == 2868 + 2770
    return load_cluster(CLUSTER), jobs


# queue policy -> (avg JCT, avg wait, preemptions, Jain) overall, then per tenant
# (avg JCT, GPU-hours, borrowed GPU-hours, quota delivered, preemptions)
GOLDEN = {
    "fifo": ((7013.301, 6749.03, 279, 0.9999),
             {"team-11cb48": (6687.066, 583.505, 6.129, 0.857, 159),
              "team-e13805": (7351.078, 571.677, 3.163, 0.856, 120)}),
    "sjf": ((760.46, 493.337, 547, 0.9999),
            {"team-11cb48": (816.236, 587.471, 6.726, 0.9129, 312),
             "team-e13805": (702.712, 574.143, 6.009, 0.8701, 235)}),
    "srtf": ((924.432, 607.078, 5267, 0.9999),
             {"team-11cb48": (1012.865, 660.221, 0.451, 0.9254, 2585),
              "team-e13805": (832.87, 644.66, 0.236, 0.8892, 2682)}),
}  # fmt: skip


@pytest.mark.parametrize("queue", GOLDEN)
def test_two_tenant_cohort_on_philly(two_teams: tuple[Any, Any], queue: str) -> None:
    cluster, jobs = two_teams
    summary, _ = run(cluster, jobs, overrides=Overrides(queue=queue))
    overall, tenants = GOLDEN[queue]
    assert (summary["avg_jct"], summary["avg_queue"], summary["preemptions"], summary["jain"]) == overall
    assert summary["jobs"] == len(jobs) and summary["rejected"] == {}
    for name, expected in tenants.items():
        got = summary["tenants"][name]
        assert (got["avg_jct"], got["gpu_hours"], got["borrowed_gpu_hours"], got["quota_delivered"],
                got["preemptions"]) == expected  # fmt: skip
    # every GPU-hour the jobs ran is some tenant's
    used = sum(t["gpu_hours"] for t in summary["tenants"].values())
    assert used == pytest.approx(summary["gpu_utilization"] * 128 * summary["makespan"] / 3600, rel=1e-3)


# The baseline: the same jobs and partition without quotas. Quotas cost fifo 3.7 % of its JCT
# (a tenant's borrowed GPUs are handed back at a checkpoint's cost), sjf 5.6 %, srtf 0.3 %.
BASELINE = {"fifo": (6762.04, 6500.738, 0), "sjf": (720.234, 458.932, 0), "srtf": (921.54, 613.945, 4350)}


@pytest.mark.parametrize("queue", BASELINE)
def test_baseline_without_quotas(two_teams: tuple[Any, Any], queue: str) -> None:
    cluster, jobs = two_teams
    part = dataclasses.replace(cluster.partitions[0], quotas=())
    summary, _ = run(dataclasses.replace(cluster, partitions=(part,)), jobs, overrides=Overrides(queue=queue))
    assert (summary["avg_jct"], summary["avg_queue"], summary["preemptions"]) == BASELINE[queue]
    assert "tenants" not in summary
