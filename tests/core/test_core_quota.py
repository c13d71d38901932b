"""Tenants' quotas (gputwin.core.quota, docs/tenancy.md): the admission rule on its own, then whole
timelines through the Scheduler: waiting over quota, borrowing within a cohort's limits, reclaim of
borrowed work with the partition's checkpoint cost, the queue policy's order within a tenant."""

from __future__ import annotations

import pytest
from cluster_builders import build_jobs, job_state

from gputwin.core.model import ClusterSpec, PolicySpec, QuotaSpec
from gputwin.core.quota import PartitionQuota, quota_problem
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate

Q = QuotaSpec


def _quota(*specs: QuotaSpec, used: dict[str, int] | None = None) -> PartitionQuota:
    quota = PartitionQuota("p", specs)
    quota.used.update(used or {})
    return quota


# (quotas, usage, tenant asking, GPUs asked, fits)
FITS = [
    ("own-guarantee", [Q("a", 4)], {}, "a", 4, True),
    ("over-guarantee-no-cohort", [Q("a", 4), Q("b", 4)], {}, "a", 5, False),
    ("borrow-idle", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c")], {}, "a", 8, True),
    ("borrow-beyond-cohort", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c")], {}, "a", 9, False),
    ("borrow-busy-lender", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c")], {"b": 3}, "a", 6, False),
    ("borrow-what-is-idle", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c")], {"b": 3}, "a", 5, True),
    ("borrowing-limit", [Q("a", 4, cohort="c", borrowing_limit=1), Q("b", 4, cohort="c")], {}, "a", 6, False),
    ("within-borrowing-limit", [Q("a", 4, cohort="c", borrowing_limit=2), Q("b", 4, cohort="c")], {}, "a", 6, True),
    ("lending-limit", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c", lending_limit=1)], {}, "a", 6, False),
    ("within-lending-limit", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c", lending_limit=2)], {}, "a", 6, True),
    ("guarantee-lent-away", [Q("a", 4, cohort="c"), Q("b", 4, cohort="c")], {"a": 6}, "b", 3, False),
    ("other-cohort", [Q("a", 4, cohort="c"), Q("b", 4, cohort="d")], {}, "a", 5, False),
]


@pytest.mark.parametrize("quotas,used,tenant,gpus,expected", [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_fits_follows_the_cohort_rule(quotas, used, tenant, gpus, expected) -> None:
    assert _quota(*quotas, used=used).fits(tenant, gpus) is expected


CEILINGS = [
    ("alone", [Q("a", 4)], 4),
    ("cohort", [Q("a", 4, cohort="c"), Q("b", 6, cohort="c")], 10),
    ("borrowing-limit", [Q("a", 4, cohort="c", borrowing_limit=2), Q("b", 6, cohort="c")], 6),
    ("lending-limit", [Q("a", 4, cohort="c"), Q("b", 6, cohort="c", lending_limit=1)], 5),
]


@pytest.mark.parametrize("quotas,expected", [c[1:] for c in CEILINGS], ids=[c[0] for c in CEILINGS])
def test_ceiling_is_the_most_a_tenant_can_ever_hold(quotas, expected) -> None:
    assert _quota(*quotas).ceiling("a") == expected


def test_users_map_to_tenants_and_the_catch_all_takes_the_rest() -> None:
    quota = _quota(Q("vision", 4, users=("alice", "bob")), Q("rest", 4, users=("*",)))
    assert [quota.tenant(u) for u in ("alice", "bob", "carol")] == ["vision", "vision", "rest"]
    assert _quota(Q("a", 4)).tenant("a") == "a"  # a quota without users covers the user of its name
    assert quota_problem(_quota(Q("a", 4)), "zed", 1) == "user 'zed' has no quota in partition 'p'"
    assert quota_problem(_quota(Q("a", 4)), "a", 5) == "asks for 5 GPUs; tenant 'a' may hold at most 4 in partition 'p'"


def _cluster(cluster, quotas: tuple[QuotaSpec, ...], policy: PolicySpec = PolicySpec()) -> ClusterSpec:
    base = cluster({"l0": [8]}, policy)
    part = base.partitions[0]
    return ClusterSpec(base.topology, (type(part)(part.name, part.nodes, part.task_types, policy, quotas=quotas),))


def _run(cluster, jobs, quotas, policy: PolicySpec = PolicySpec()):
    rows = [(i, s, d, g, {"user": u}) for i, s, d, g, u in jobs]
    outcome = simulate(_cluster(cluster, quotas, policy), build_jobs(rows))
    return {j.job_id: j for j in outcome.finished}, outcome


def test_a_job_over_quota_with_nothing_to_borrow_waits_while_gpus_are_free(cluster) -> None:
    done, _ = _run(cluster, [("a1", 0, 10, 4, "a"), ("a2", 0, 10, 4, "a")], (Q("a", 4), Q("b", 4)))
    assert (done["a1"].first_start, done["a2"].first_start) == (0, 10)


def test_a_blocked_tenant_does_not_hold_back_another_tenants_jobs(cluster) -> None:
    jobs = [("a1", 0, 10, 4, "a"), ("a2", 1, 10, 2, "a"), ("a3", 2, 10, 1, "a"), ("b1", 3, 10, 4, "b")]
    done, _ = _run(cluster, jobs, (Q("a", 4), Q("b", 4)))
    # a2 waits for a's quota, a3 waits behind it (fifo within a), b1 starts at once
    assert {k: j.first_start for k, j in done.items()} == {"a1": 0, "a2": 10, "a3": 10, "b1": 3}


def test_borrowed_gpus_are_reclaimed_with_the_checkpoint_cost(cluster) -> None:
    quotas = (Q("a", 4, cohort="c"), Q("b", 4, cohort="c"))
    jobs = [("a1", 0, 100, 4, "a"), ("a2", 0, 100, 4, "a"), ("b1", 10, 50, 4, "b")]
    done, outcome = _run(cluster, jobs, quotas, PolicySpec(checkpoint_seconds=5.0))
    assert done["a2"].first_start == 0  # borrowed b's idle guarantee
    assert done["b1"].first_start == 10  # b's demand preempted a2, the most recent borrowed job
    assert (done["a2"].preemptions, done["a1"].preemptions) == (1, 0)
    # a2 ran 10 s of its 100, queued again, and borrowed b's guarantee again when b1 ended at 60
    assert done["a2"].end == 60 + 90 + 5  # 90 s of work left plus the checkpoint cost


def test_lending_limit_keeps_part_of_a_guarantee_home(cluster) -> None:
    quotas = (Q("a", 4, cohort="c"), Q("b", 4, cohort="c", lending_limit=2))
    done, _ = _run(cluster, [("a1", 0, 10, 4, "a"), ("a2", 0, 10, 3, "a"), ("a3", 0, 10, 2, "a")], quotas)
    # a2 (3 more) would take more than b lends; a3 (2) is within it, but fifo within a keeps it behind a2
    assert {k: j.first_start for k, j in done.items()} == {"a1": 0, "a2": 10, "a3": 10}


def test_submit_refuses_what_no_quota_could_ever_hold(cluster) -> None:
    sched = Scheduler(_cluster(cluster, (Q("a", 4, cohort="c", borrowing_limit=1), Q("b", 4, cohort="c"))))
    rows = build_jobs([("x", 0, 1, 6, {"user": "a"}), ("y", 0, 1, 1, {"user": "nobody"})])
    assert [sched.submit(j, 0).rejects[0].reason for j in rows] == [
        "asks for 6 GPUs; tenant 'a' may hold at most 5 in partition 'p'",
        "user 'nobody' has no quota in partition 'p'",
    ]


def test_preemptive_policy_ranks_guaranteed_demand_ahead_of_borrowed_work(cluster) -> None:
    quotas = (Q("a", 4, cohort="c"), Q("b", 4, cohort="c"))
    # srtf alone would keep a's short borrowed job over b's long one; the guarantee wins
    jobs = [("a1", 0, 20, 4, "a"), ("a2", 0, 20, 4, "a"), ("b1", 5, 100, 4, "b")]
    done, _ = _run(cluster, jobs, quotas, PolicySpec(queue="srtf", checkpoint_seconds=0.0))
    assert done["b1"].first_start == 5
    assert done["a2"].preemptions == 1 and done["a1"].preemptions == 0


RECLAIM = [
    # (running jobs (user, GPUs, order), free GPUs, GPUs b asks for, victims' orders)
    ("latest-first", [("a", 4, 1), ("a", 2, 2), ("a", 2, 3)], 0, 2, [3]),
    ("two-needed", [("a", 4, 1), ("a", 2, 2), ("a", 2, 3)], 0, 4, [3, 2]),
    ("fill-back-spares-the-unneeded", [("a", 4, 1), ("a", 3, 2), ("a", 1, 3)], 0, 3, [2]),
    ("above-the-guarantee", [("a", 4, 1), ("a", 4, 2)], 0, 5, None),  # b's guarantee is 4: no reclaim
    ("nothing-to-take", [("a", 4, 1)], 4, 4, None),  # it fits already: no reclaim is asked
]


@pytest.mark.parametrize("running,free,gpus,expected", [c[1:] for c in RECLAIM], ids=[c[0] for c in RECLAIM])
def test_reclaim_takes_the_fewest_latest_borrowed_jobs(running, free, gpus, expected) -> None:
    quota = _quota(Q("a", 4, cohort="c"), Q("b", 4, cohort="c"), used={"a": sum(g for _, g, _ in running)})
    jobs = [job_state(user, gpus, order) for user, gpus, order in running]  # no stored tenant: by user
    victims = quota.reclaim("b", gpus, jobs, free)
    assert (None if victims is None else [v.order for v in victims]) == expected
