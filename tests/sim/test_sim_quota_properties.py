"""Properties of whole simulations under tenants' quotas (gputwin.core.quota), on random small
clusters, quotas and traces, for every queue policy, with and without backfill.

After every scheduling cycle (a listener on the runtime: it runs on the compiled core too): the quota's usage is what the running jobs hold; no tenant holds more
than its guarantee (no cohort) or its guarantee plus borrowing limit; no cohort lends more than its
lenders have idle within their lending limits; no GPU is over-committed. Per job: it finishes once,
or was refused by a quota rule; reclaim never loses work (the runs' work, net of overhead, is the
duration plus the checkpoint costs). And one tenant owning every GPU changes nothing: the same
per-job results as no quotas at all (without backfill, which a quota-blocked job holds back)."""

from __future__ import annotations

import dataclasses
import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listening import Forwarding

from gputwin.core.compat import helios_checkpoint_cost
from gputwin.core.decision import Preempt, Reject, Start
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
from gputwin.core.quota import PartitionQuota
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState
from gputwin.runtime.clock import Replay, VirtualClock, run_steps
from gputwin.sim.engine import Recorder, Simulator
from gputwin.sim.finished import FinishedLog

QUEUES = ("fifo", "sjf", "priority", "qssf", "srtf", "las")
USERS = ("u0", "u1", "u2", "u3")
_LIMIT = st.one_of(st.none(), st.integers(0, 8))
_TENANT = st.tuples(st.integers(0, 8), st.sampled_from([None, "c", "d"]), _LIMIT, _LIMIT)
_JOB = st.tuples(st.integers(0, 300), st.integers(1, 200), st.integers(1, 12), st.integers(0, 3))


@st.composite
def scenarios(draw: st.DrawFn, queue: str) -> tuple[ClusterSpec, list[JobSpec]]:
    node_gpus = draw(st.lists(st.integers(1, 8), min_size=1, max_size=4))
    nodes = tuple(NodeSpec(f"n{i}", g, "l0") for i, g in enumerate(node_gpus))
    total = sum(node_gpus)
    quotas, left = [], total
    for t, (gpus, cohort, borrow, lend) in enumerate(draw(st.lists(_TENANT, min_size=1, max_size=4))):
        gpus = min(gpus, left)  # guarantees never add up to more than the partition has
        left -= gpus
        users = ("*",) if t == 3 else (USERS[t],)
        quotas.append(QuotaSpec(f"t{t}", gpus, users, cohort, borrow, lend))
    policy = PolicySpec(queue=queue, placement=draw(st.sampled_from(["first-fit", "consolidate"])),
                        backfill=draw(st.booleans()) and queue not in ("srtf", "las"),
                        checkpoint_seconds=draw(st.sampled_from([None, 0.0, 7.0])),
                        params={"las_thresholds": "100,1000"})  # fmt: skip
    part = PartitionSpec("p", tuple(n.name for n in nodes), ("*",), policy, quotas=tuple(quotas))
    topo = TopologySpec("t", (SwitchSpec("root"), SwitchSpec("l0", "root")), nodes)
    jobs = [JobSpec(f"j{i}", float(s), float(d), g, "x", user=USERS[u], seq=i)
            for i, (s, d, g, u) in enumerate(draw(st.lists(_JOB, max_size=30)))]  # fmt: skip
    return ClusterSpec(topo, (part,)), sorted(jobs, key=lambda j: (j.submit, j.seq))


def check_quota(sched: Scheduler) -> None:
    for part in sched.partitions.values():
        quota = part.quota
        assert quota is not None
        held: Counter[str] = Counter()
        for job in part.running.values():
            held[quota.tenant_of(job)] += job.gpus
        assert {t: u for t, u in quota.used.items() if u} == dict(held)
        assert part.ledger.used_gpus == sum(held.values()) <= part.ledger.total_gpus
        for tenant, used in quota.used.items():
            cohort, own = quota.cohort[tenant], quota.nominal[tenant]
            limit = 0 if cohort is None else quota.borrowing[tenant]
            assert limit is None or used - own <= limit
        for members in quota.members.values():
            check_cohort(quota, members)


def check_cohort(quota: PartitionQuota, members: tuple[str, ...]) -> None:
    """What cohort members borrow is at most what the others have idle and may lend."""
    borrowed = sum(max(0, quota.used[t] - quota.nominal[t]) for t in members)
    lendable = 0
    for t in members:
        own = quota.nominal[t]
        idle = max(0, own - quota.used[t])
        lend = own - quota.reserved[t]
        lendable += min(idle, lend)
    assert borrowed <= lendable


class Checked(Forwarding):
    """The runtime's listener (`gputwin.runtime.loop.Transitions`) for a checked run: records each
    run segment, then tells the simulator's own Recorder; `step_done`, the replay's end-of-instant
    hook, closes a decision (one cycle an instant) and checks the quotas (tests/listening.py)."""

    def __init__(self, inner: Recorder, sched: Scheduler) -> None:
        super().__init__(inner)
        self.sched = sched
        self.segments: dict[str, list[list[float]]] = defaultdict(list)  # [start, overhead, end]
        self.costs: dict[str, list[float]] = defaultdict(list)
        self.completions: Counter[str] = Counter()
        self.preempted_now: set[str] = set()  # this instant's decision
        self.started_now: set[str] = set()

    def step_done(self, now: float) -> None:
        # borrowing and reclaim run in that order, so no job is started and preempted in one cycle
        assert not self.started_now & self.preempted_now
        self.started_now.clear()
        self.preempted_now.clear()
        check_quota(self.sched)  # looked up now: the per-model properties put their own in

    def started(self, starts: Sequence[Start], now: float) -> None:
        for start in starts:
            self.segments[start.job_id].append([now, start.overhead, math.nan])
            self.started_now.add(start.job_id)
        self.inner.started(starts, now)

    def preempted(self, preempt: Preempt, now: float) -> None:
        segment = self.segments[preempt.job_id][-1]
        assert math.isnan(segment[2])  # only a running job is preempted
        segment[2] = now
        self.costs[preempt.job_id].append(preempt.checkpoint_seconds)
        self.preempted_now.add(preempt.job_id)
        self.inner.preempted(preempt, now)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        for state, end in ends:
            self.completions[state.spec.job_id] += 1
            self.segments[state.spec.job_id][-1][2] = end
        self.inner.completed(ends, now)


@dataclass(frozen=True)
class Outcome:
    finished: FinishedLog
    rejected: list[Reject]


def run_checked(cluster: ClusterSpec, jobs: list[JobSpec]):
    """Replay `jobs` as `Simulator.run` does, with `Checked` listening and closing each instant."""
    sim = Simulator(cluster)
    checked = Checked(sim.recorder, sim.scheduler)
    sim.runtime.listener = checked
    run_steps(Replay(sim.runtime, jobs, after=checked.step_done), VirtualClock())
    sim.recorder.close()
    outcome = Outcome(sim.recorder.finished, sim.recorder.rejects)
    return outcome, checked.segments, checked.costs, checked.completions


@pytest.mark.parametrize("queue", QUEUES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_quotas_hold_and_reclaim_never_loses_work(queue: str, data: st.DataObject) -> None:
    cluster, jobs = data.draw(scenarios(queue))
    outcome, segments, costs, completions = run_checked(cluster, jobs)
    refused = {r.job_id for r in outcome.rejected}
    assert all("quota" in r.reason or "may hold at most" in r.reason or "partition 'p' has" in r.reason
               for r in outcome.rejected)  # fmt: skip
    assert {j.job_id for j in outcome.finished} == {j.job_id for j in jobs} - refused
    assert set(completions.values()) <= {1}
    policy = cluster.partitions[0].policy
    for job in outcome.finished:
        expected = policy.checkpoint_seconds if policy.checkpoint_seconds is not None else helios_checkpoint_cost(job.gpus)
        assert all(c == expected for c in costs[job.job_id])
        work = math.fsum((end - start) / (1 + overhead) for start, overhead, end in segments[job.job_id])
        assert work == pytest.approx(job.spec.duration + sum(costs[job.job_id]), rel=1e-9, abs=1e-6)


def _results(cluster: ClusterSpec, jobs: list[JobSpec]) -> dict[str, tuple]:
    outcome = Simulator(cluster).run(jobs)
    return {j.job_id: (j.first_start, j.end, j.preemptions, j.slots) for j in outcome.finished}


@pytest.mark.parametrize("queue", QUEUES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_one_tenant_owning_every_gpu_is_the_same_as_no_quotas(queue: str, data: st.DataObject) -> None:
    cluster, jobs = data.draw(scenarios(queue))
    part = cluster.partitions[0]
    plain = dataclasses.replace(part, policy=dataclasses.replace(part.policy, backfill=False), quotas=())
    total = sum(n.gpus for n in cluster.topology.nodes)
    owned = dataclasses.replace(plain, quotas=(QuotaSpec("all", total, ("*",)),))
    fitting = [j for j in jobs if j.gpus <= total]
    assert _results(dataclasses.replace(cluster, partitions=(owned,)), fitting) == _results(
        dataclasses.replace(cluster, partitions=(plain,)), fitting
    )
