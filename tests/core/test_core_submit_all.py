"""`Scheduler.submit_all`: queueing a batch at once (one sorted insert per queue) is queueing each job
in turn, with the run times given instead of the specs' (a forecast shares its specs across samples).

Per policy setup (plain priority with backfill, fairness, quotas, history sizing) and a batch with
rejected jobs (too big, no partition, a duplicate id) among the queued ones: the same decisions,
the same queue, the same job states, and the same starts in the cycles that follow. `adopt` with a
`duration` holds the job for that run, not its spec's.
"""

from __future__ import annotations

import random

import pytest

from gputwin.core.model import ClusterSpec, JobSpec, NodeSpec, PartitionSpec, PolicySpec, QuotaSpec, SwitchSpec
from gputwin.core.model import TopologySpec
from gputwin.core.scheduler import Scheduler
from gputwin.runtime.loop import Quiet, Runtime
from gputwin.runtime.virtual import VirtualRuns

POLICIES = {
    "priority+backfill": PolicySpec(queue="priority", backfill=True),
    "fifo": PolicySpec(queue="fifo"),
    "fairshare": PolicySpec(queue="fifo", fairness="fairshare"),
    "sized": PolicySpec(queue="fifo", sizing="history"),
}


def _cluster(policy: PolicySpec, quotas: bool = False) -> ClusterSpec:
    nodes = tuple(NodeSpec(f"n{i}", 8, "s") for i in range(4))
    quota = (QuotaSpec("a", 16, ("u0",)), QuotaSpec("b", 16, ("*",))) if quotas else ()
    part = PartitionSpec("p", tuple(n.name for n in nodes), ("p",), policy, quotas=quota)
    return ClusterSpec(TopologySpec("t", (SwitchSpec("s"),), nodes), (part,))


def _specs(seed: int) -> tuple[list[JobSpec], list[float]]:
    """60 jobs of 1-16 GPUs, submitted in no order, with a too-big one, one nobody serves and a duplicate."""
    rng = random.Random(seed)
    specs, runs = [], []
    for i in range(60):
        gpus = 64 if i == 9 else rng.choice((1, 2, 4, 8, 16))
        task = "nowhere" if i == 17 else "p"
        job_id = "q3" if i == 30 else f"q{i}"
        specs.append(JobSpec(job_id, rng.uniform(0, 100), 0.0, gpus, task, f"u{i % 3}", priority=rng.randrange(3)))
        runs.append(rng.uniform(10.0, 500.0))
    return specs, runs


def _state(sched: Scheduler) -> list[object]:
    part = sched.partitions["p"]
    jobs = [(j.job_id, j.order, j.key, j.duration, j.work_left, j.predicted, j.queued_since, j.phase, j.gpus)
            for j in sched.jobs.values()]  # fmt: skip
    return [list(part.order), sorted(part.queued), jobs]


def _cycles(sched: Scheduler) -> list[object]:
    """Starts cycle by cycle, every started job completing at its end."""
    seen: list[object] = []
    now = 100.0
    for _ in range(100):
        decision = sched.run_cycle(now)
        seen.append(decision)
        running = [j for j in sched.jobs.values() if j.phase.name == "RUNNING"]
        if not running and not decision.starts:
            break
        first = min(running, key=lambda j: (j.seg_end, j.order))
        now = first.seg_end
        sched.complete(first.job_id, now)
    return seen


@pytest.mark.parametrize(("name", "quotas"), [(name, False) for name in POLICIES] + [("fifo", True)])
def test_a_batch_queues_as_one_job_at_a_time_does(name: str, quotas: bool) -> None:
    cluster = _cluster(POLICIES[name], quotas)
    specs, runs = _specs(7)
    one, batch = Scheduler(cluster), Scheduler(cluster)
    decisions = []
    for i, (spec, run) in enumerate(zip(specs, runs)):
        decision = one.submit(JobSpec(spec.job_id, spec.submit, run, spec.gpus, spec.task_type, spec.user,
                                      priority=spec.priority), spec.submit)  # fmt: skip
        if decision.rejects or decision.resizes:
            decisions.append((i, decision))
    assert batch.submit_all(specs, runs) == decisions
    assert len(decisions) >= 3  # the three refused ones at least
    assert _state(batch) == _state(one)
    assert _cycles(batch) == _cycles(one)


@pytest.mark.parametrize("hint", ["right", "reversed", "partial", "empty"])
def test_a_hint_of_the_queue_order_never_changes_it(hint: str) -> None:
    """`ranks` (where a previous replay queued the same jobs) orders the batch before its queue
    sorts it: right, wrong or partial, the queue and what follows are the ones without it."""
    cluster = _cluster(POLICIES["priority+backfill"])
    specs, runs = _specs(11)
    plain = Scheduler(cluster)
    plain.submit_all(specs, runs)
    order = [plain.partitions["p"].queued[o].job_id for _, o in plain.partitions["p"].order]
    ranks = {job_id: k for k, job_id in enumerate(order)}
    if hint == "reversed":
        ranks = {job_id: -k for job_id, k in ranks.items()}
    elif hint == "partial":
        ranks = {job_id: k for job_id, k in ranks.items() if k % 3}
    elif hint == "empty":
        ranks = {}
    hinted = Scheduler(cluster)
    hinted.submit_all(specs, runs, ranks)
    assert _state(hinted) == _state(plain)
    assert _cycles(hinted) == _cycles(plain)


def test_a_batch_tells_the_listener_what_arrivals_one_by_one_tell() -> None:
    class Heard(Quiet):
        def __init__(self) -> None:
            self.heard: list[object] = []

        def submitted(self, specs, now):  # type: ignore[no-untyped-def]
            self.heard.append(("submitted", [s.job_id for s in specs]))

        def rejected(self, reject, now):  # type: ignore[no-untyped-def]
            self.heard.append(("rejected", reject.job_id))

    cluster = _cluster(POLICIES["fifo"])
    specs, runs = _specs(3)
    timed = [JobSpec(s.job_id, s.submit, r, s.gpus, s.task_type, s.user) for s, r in zip(specs, runs)]
    arrivals, batch = Heard(), Heard()
    Runtime(Scheduler(cluster), VirtualRuns(), arrivals).submit_arrived(timed, 0, 100.0)
    Runtime(Scheduler(cluster), VirtualRuns(), batch).submit_all(specs, runs, 100.0)
    assert batch.heard == arrivals.heard
    assert [e for e in batch.heard if e[0] == "rejected"] == [("rejected", "q9"), ("rejected", "q17"),
                                                              ("rejected", "q3")]  # fmt: skip


def test_an_adopted_job_runs_for_the_duration_given() -> None:
    sched = Scheduler(_cluster(POLICIES["fifo"]))
    job = sched.adopt(JobSpec("r", 0.0, 0.0, 4, "p"), ((0, 4),), 10.0, duration=300.0)
    assert (job.duration, job.work_left, job.seg_end) == (300.0, 300.0, 310.0)
