"""Per-model quotas (gputwin.core.quota, docs/tenancy.md "GPU models"): a tenant's guarantee per GPU
model is its own quota keyed `tenant/model`, with the same admission, borrowing and reclaim rules,
meeting only that model's quotas in its cohort; a job asking for no model, or a model its tenant's
quota does not name, counts against the tenant's plain `gpus`. Then one timeline through the
simulator on nodes of two models."""

from __future__ import annotations

import dataclasses

import pytest
from cluster_builders import build_cluster, build_jobs

from gputwin.core.model import ClusterSpec, PolicySpec, QuotaSpec
from gputwin.core.quota import PartitionQuota, quota_problem
from gputwin.sim.engine import simulate

Q = QuotaSpec
AB = {"a100": 4, "h100": 2}


def _quota(*specs: QuotaSpec, used: dict[str, int] | None = None) -> PartitionQuota:
    quota = PartitionQuota("p", specs)
    quota.used.update(used or {})
    return quota


# (id, quotas, model asked, pool it counts against)
POOLS = [
    ("named-model", [Q("a", 0, models=AB)], "a100", "a/a100"),
    ("other-named-model", [Q("a", 0, models=AB)], "h100", "a/h100"),
    ("no-model-any-pool", [Q("a", 3, models=AB)], "", "a"),
    ("unnamed-model-any-pool", [Q("a", 3, models=AB)], "v100", "a"),
    ("plain-number-any-model", [Q("a", 3)], "a100", "a"),
]


@pytest.mark.parametrize("quotas,model,expected", [c[1:] for c in POOLS], ids=[c[0] for c in POOLS])
def test_a_job_counts_against_its_models_quota_or_the_any_model_one(quotas, model, expected) -> None:
    assert _quota(*quotas).pool("a", model) == expected


C = "c"
# (id, quotas, usage, pool asking, GPUs asked, fits)
FITS = [
    ("own-model-guarantee", [Q("a", 0, models=AB)], {}, "a/a100", 4, True),
    ("over-model-guarantee", [Q("a", 8, models=AB)], {}, "a/h100", 3, False),
    ("models-apart", [Q("a", 0, models=AB)], {"a/a100": 4}, "a/h100", 2, True),
    ("any-pool-apart", [Q("a", 2, models=AB)], {"a/a100": 4, "a/h100": 2}, "a", 2, True),
    ("borrow-same-model", [Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, models=AB)], {}, "a/a100", 8, True),
    ("not-from-other-model", [Q("a", 0, cohort=C, models={"a100": 4}), Q("b", 0, cohort=C, models={"h100": 4})], {},
     "a/a100", 5, False),
    ("not-from-any-pool", [Q("a", 0, cohort=C, models={"a100": 4}), Q("b", 4, cohort=C)], {}, "a/a100", 5, False),
    ("borrow-busy-lender", [Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, models=AB)], {"b/a100": 3},
     "a/a100", 6, False),
    ("borrowing-limit-per-model", [Q("a", 0, cohort=C, borrowing_limit=1, models=AB),
                                   Q("b", 0, cohort=C, models=AB)], {}, "a/a100", 6, False),
    ("lending-limit-per-model", [Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, lending_limit=1, models=AB)],
     {}, "a/a100", 5, True),
    ("lending-limit-caps-model", [Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, lending_limit=1, models=AB)],
     {}, "a/a100", 6, False),
]  # fmt: skip


@pytest.mark.parametrize("quotas,used,pool,gpus,expected", [c[1:] for c in FITS], ids=[c[0] for c in FITS])
def test_fits_follows_the_cohort_rule_per_model(quotas, used, pool, gpus, expected) -> None:
    assert _quota(*quotas, used=used).fits(pool, gpus) is expected


PROBLEMS = [
    ("model-ceiling", "a100", 9, "asks for 9 GPUs; tenant 'a' of model 'a100' may hold at most 8 in partition 'p'"),
    ("any-model-ceiling", "", 1, "asks for 1 GPUs; tenant 'a' (any model not named in its quota) may hold at most 0 "
     "in partition 'p'"),
    ("fits", "h100", 4, None),
]  # fmt: skip


@pytest.mark.parametrize("model,gpus,expected", [c[1:] for c in PROBLEMS], ids=[c[0] for c in PROBLEMS])
def test_a_job_its_models_quota_can_never_hold_is_refused(model, gpus, expected) -> None:
    quota = _quota(Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, models=AB))
    assert quota_problem(quota, "a", gpus, model) == expected


def test_each_model_has_its_own_cohort_and_ceiling() -> None:
    quota = _quota(Q("a", 0, cohort=C, models=AB), Q("b", 0, cohort=C, models=AB))
    assert quota.ceiling("a/a100") == 8 and quota.ceiling("a/h100") == 4 and quota.ceiling("a") == 0
    assert quota.members == {"c": ("a", "b"), "c/a100": ("a/a100", "b/a100"), "c/h100": ("a/h100", "b/h100")}


def _two_models(quotas: tuple[QuotaSpec, ...], policy: PolicySpec = PolicySpec()) -> ClusterSpec:
    """One leaf, an 8-GPU a100 node (n0) and an 8-GPU h100 node (n1), one partition with `quotas`."""
    base = build_cluster({"l0": [8, 8]}, policy)
    nodes = tuple(dataclasses.replace(n, model=m) for n, m in zip(base.topology.nodes, ("a100", "h100")))
    part = dataclasses.replace(base.partitions[0], quotas=quotas)
    return ClusterSpec(dataclasses.replace(base.topology, nodes=nodes), (part,))


def _run(cluster: ClusterSpec, rows: list[tuple]) -> dict[str, tuple[float | None, float | None, int]]:
    jobs = build_jobs([(i, s, d, g, {"user": u, "model": m}) for i, s, d, g, u, m in rows])
    return {j.job_id: (j.first_start, j.end, j.preemptions) for j in simulate(cluster, jobs).finished}


# (id, quotas, jobs (id, submit, duration, GPUs, user, model), job -> (start, end, preemptions))
TIMELINES = [
    ("a-model-full-the-other-runs", (Q("a", 0, models={"a100": 4, "h100": 4}),),
     [("a1", 0, 10, 4, "a", "a100"), ("a2", 0, 10, 4, "a", "a100"), ("h1", 0, 10, 4, "a", "h100")],
     {"a1": (0, 10, 0), "a2": (10, 20, 0), "h1": (0, 10, 0)}),
    ("borrows-idle-same-model", (Q("a", 0, cohort=C, models={"a100": 4}), Q("b", 0, cohort=C, models={"a100": 4})),
     [("a1", 0, 10, 8, "a", "a100")], {"a1": (0, 10, 0)}),
    ("owner-reclaims-its-model", (Q("a", 0, cohort=C, models={"a100": 4}), Q("b", 0, cohort=C, models={"a100": 4})),
     [("a1", 0, 100, 8, "a", "a100"), ("b1", 5, 10, 4, "b", "a100")], {"b1": (5, 15, 0)}),
]  # fmt: skip


@pytest.mark.parametrize("quotas,rows,expected", [c[1:] for c in TIMELINES], ids=[c[0] for c in TIMELINES])
def test_per_model_quotas_through_the_simulator(quotas, rows, expected) -> None:
    done = _run(_two_models(quotas, PolicySpec(checkpoint_seconds=0.0)), rows)
    assert {k: done[k] for k in expected} == expected
    if "a1" in done and len(rows) == 2:
        assert done["a1"][2] == 1  # the borrower was preempted once, its work kept


def test_a_preemptive_rerank_under_quotas_counts_each_models_gpus() -> None:
    # srtf under a quota, n0 a100 and n1 h100: the 5 s h100 job outranks both running jobs, but only
    # the h100 one (90 s left) holds GPUs it can use. Counted as one pool, the quota walk admitted
    # the short job and the h100 job, and preempted the a100 job (last in rank) for nothing: the
    # short job still could not start, and waited for the h100 job to end at 100.
    cluster = _two_models((Q("a", 16),), PolicySpec(queue="srtf", checkpoint_seconds=0.0))
    rows = [("a", 0, 200, 8, "a", "a100"), ("h", 0, 100, 8, "a", "h100"), ("short", 10, 5, 8, "a", "h100")]
    done = _run(cluster, rows)
    assert done["short"][:2] == (10, 15)
    assert done["a"] == (0, 200, 0)
    assert done["h"] == (0, 105, 1)
