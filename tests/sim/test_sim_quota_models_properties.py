"""Properties of whole simulations under per-model quotas (gputwin.core.quota, `QuotaSpec.models`):
random small clusters of two GPU models, tenants with per-model guarantees (and a plain one for
jobs of any model), random traces asking for a model or none, every queue policy.

After every cycle (`check_quota` of test_sim_quota_properties, over the `tenant/model` keys): the
quota's usage is what running jobs hold per (tenant, model); no (tenant, model) holds more than its
guarantee plus borrowing; no model's cohort lends more than its lenders have idle; and no GPU is
over-committed. Each job finishes once or was refused by a quota or model rule, its work kept."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import test_sim_quota_properties as plain
from test_sim_quota_properties import QUEUES, USERS, run_checked

from gputwin.core.scheduler import Scheduler
from gputwin.core.model import (
    ClusterSpec,
    JobSpec,
    NodeSpec,
    PartitionSpec,
    PolicySpec,
    QuotaSpec,
    SwitchSpec,
    TopologySpec,
)

MODELS = ("a100", "h100")
_LIMIT = st.one_of(st.none(), st.integers(0, 8))
_TENANT = st.tuples(st.integers(0, 4), st.integers(0, 8), st.integers(0, 8), st.sampled_from([None, "c"]), _LIMIT,
                    _LIMIT)  # fmt: skip
_JOB = st.tuples(st.integers(0, 300), st.integers(1, 200), st.integers(1, 12), st.integers(0, 3),
                 st.sampled_from(("", *MODELS, "v100")))  # fmt: skip


@st.composite
def scenarios(draw: st.DrawFn, queue: str) -> tuple[ClusterSpec, list[JobSpec]]:
    node_gpus = draw(st.lists(st.integers(1, 8), min_size=2, max_size=4))
    nodes = tuple(NodeSpec(f"n{i}", g, "l0", model=MODELS[i % 2]) for i, g in enumerate(node_gpus))
    quotas = []
    for t, (anyg, a100, h100, cohort, borrow, lend) in enumerate(draw(st.lists(_TENANT, min_size=1, max_size=4))):
        users = ("*",) if t == 3 else (USERS[t],)
        models = {m: n for m, n in zip(MODELS, (a100, h100)) if draw(st.booleans())}
        quotas.append(QuotaSpec(f"t{t}", anyg, users, cohort, borrow, lend, models))
    policy = PolicySpec(queue=queue, placement=draw(st.sampled_from(["first-fit", "consolidate"])),
                        backfill=draw(st.booleans()) and queue not in ("srtf", "las"),
                        checkpoint_seconds=draw(st.sampled_from([None, 0.0, 7.0])),
                        params={"las_thresholds": "100,1000"})  # fmt: skip
    part = PartitionSpec("p", tuple(n.name for n in nodes), ("*",), policy, quotas=tuple(quotas))
    topo = TopologySpec("t", (SwitchSpec("root"), SwitchSpec("l0", "root")), nodes)
    jobs = [JobSpec(f"j{i}", float(s), float(d), g, "x", user=USERS[u], seq=i, model=m)
            for i, (s, d, g, u, m) in enumerate(draw(st.lists(_JOB, max_size=30)))]  # fmt: skip
    return ClusterSpec(topo, (part,)), sorted(jobs, key=lambda j: (j.submit, j.seq))


def check_models(sched: Scheduler) -> None:
    """`plain.check_quota`, and each (tenant, model)'s GPUs worked out from the specs alone: the
    model's quota if its tenant's names it, else the tenant's plain one: the quota's usage under
    those keys, none over its guarantee (no cohort) or its guarantee plus borrowing limit."""
    plain_check(sched)
    (part,) = sched.partitions.values()
    specs = {q.tenant: q for q in part.spec.quotas}
    of_user = {u: q.tenant for q in part.spec.quotas for u in q.users}
    held: Counter[tuple[str, str]] = Counter()
    for job in part.running.values():
        spec = specs[of_user.get(job.spec.user) or of_user["*"]]
        held[spec.tenant, job.spec.model if job.spec.model in spec.models else ""] += job.gpus
    assert {k: u for k, u in part.quota.used.items() if u} == {f"{t}/{m}" if m else t: g for (t, m), g in held.items()}
    for (tenant, model), gpus in held.items():
        spec = specs[tenant]
        own = spec.models[model] if model else spec.gpus
        limit = 0 if spec.cohort is None else spec.borrowing_limit
        assert limit is None or gpus <= own + limit, (tenant, model, gpus)


plain_check = plain.check_quota


@pytest.mark.parametrize("queue", QUEUES)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_no_tenant_model_over_its_guarantee_plus_borrowing(queue: str, data: st.DataObject) -> None:
    cluster, jobs = data.draw(scenarios(queue))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plain, "check_quota", check_models)
        outcome, segments, costs, completions = run_checked(cluster, jobs)
    refused = {r.job_id for r in outcome.rejected}
    assert all("may hold at most" in r.reason or "GPU model" in r.reason or "has" in r.reason
               for r in outcome.rejected), [r.reason for r in outcome.rejected]  # fmt: skip
    assert {j.job_id for j in outcome.finished} == {j.job_id for j in jobs} - refused
    assert set(completions.values()) <= {1}
    for job in outcome.finished:
        work = math.fsum((end - start) / (1 + overhead) for start, overhead, end in segments[job.job_id])
        assert work == pytest.approx(job.spec.duration + sum(costs[job.job_id]), rel=1e-9, abs=1e-6)
