"""Golden numbers of fairness among tenants on a real trace: the two-tenant Philly setup of
tests/sim/test_sim_tenancy_golden.py (two VCs' 5,638 jobs of ../shared/traces/philly_mix1 sharing
one 128-GPU partition as a cohort, tests/sim/data/philly-two-teams.yaml) with the policy's
fairness set to drf or fairshare (half-life one day, equal weights). Pinned so a change in
behaviour shows up; `fairness: none` is that file's GOLDEN (fifo 7013.301 s average JCT, sjf
760.46, srtf 924.432)."""

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
    return load_cluster(CLUSTER), jobs


# (fairness, queue) -> (avg JCT, avg wait, preemptions, Jain), then per tenant (avg JCT, GPU-hours)
GOLDEN = {
    ("fairshare", "fifo"): ((6408.843, 6145.115, 228, 0.9999),
                            {"team-11cb48": (5882.788, 582.688), "team-e13805": (6953.509, 571.193)}),
    ("fairshare", "sjf"): ((716.246, 451.038, 367, 0.9999),
                           {"team-11cb48": (760.036, 584.338), "team-e13805": (670.906, 572.493)}),
    ("fairshare", "srtf"): ((948.677, 629.365, 5451, 1.0),
                            {"team-11cb48": (994.409, 656.205), "team-e13805": (901.326, 652.777)}),
    ("drf", "fifo"): ((6700.901, 6437.013, 243, 0.9999),
                      {"team-11cb48": (6185.37, 582.421), "team-e13805": (7234.671, 571.743)}),
    ("drf", "sjf"): ((758.859, 491.767, 544, 0.9999),
                     {"team-11cb48": (795.034, 585.588), "team-e13805": (721.403, 574.443)}),
    ("drf", "srtf"): ((966.119, 646.785, 5453, 1.0),
                      {"team-11cb48": (1044.327, 661.205), "team-e13805": (885.143, 653.427)}),
}  # fmt: skip


@pytest.mark.parametrize("fairness,queue", GOLDEN, ids=[f"{f}-{q}" for f, q in GOLDEN])
def test_fairness_on_the_two_tenant_philly_cohort(two_teams: tuple[Any, Any], fairness: str, queue: str) -> None:
    cluster, jobs = two_teams
    part = cluster.partitions[0]
    policy = dataclasses.replace(part.policy, fairness=fairness, half_life=86400.0)
    cluster = dataclasses.replace(cluster, partitions=(dataclasses.replace(part, policy=policy),))
    summary, _ = run(cluster, jobs, overrides=Overrides(queue=queue))
    overall, tenants = GOLDEN[(fairness, queue)]
    assert (summary["avg_jct"], summary["avg_queue"], summary["preemptions"], summary["jain"]) == overall
    assert summary["jobs"] == len(jobs) and summary["rejected"] == {}
    for name, expected in tenants.items():
        got = summary["tenants"][name]
        assert (got["avg_jct"], got["gpu_hours"]) == expected
