"""The preemptive re-rank's shortcut (only running jobs that can be overtaken are sorted) decides
exactly what the plain walk over every running job, fully sorted, decides.

The reference below is that plain walk, as `Scheduler._rerank` was before the shortcut; both
schedulers are fed the same random submissions, completions, GPUs held by others and nodes out of
service (then a running job needs from the quota fewer GPUs than it holds), and must agree on every
decision.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gputwin.core.scheduler
from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.policies import RunningEntry
from gputwin.core.scheduler import Scheduler
from gputwin.core.state import JobState, PartitionState, Phase

LAYOUT = {"l0": [4, 4], "l1": [8]}
NODES = ("l0-n0", "l0-n1", "l1-n0")


class _FullSort(Scheduler):
    """The re-rank before the shortcut: sort every running job, then one merged walk."""

    def _rerank(self, part: PartitionState, running: list[RunningEntry]) -> tuple[list[JobState], list[JobState]]:
        running = sorted(running)
        ledger = part.ledger
        quota, partial = ledger.usable_gpus(), ledger.has_out_of_service
        to_run: list[JobState] = []
        victims: list[JobState] = []
        queued, jobs = iter(part.order), part.queued
        entry = next(queued, None)
        count, r = len(running), 0
        while entry is not None or r < count:
            if entry is not None and (r == count or entry[0] <= running[r][0]):
                job = jobs[entry[1]]
                entry = next(queued, None)
                if job.gpus > quota:
                    continue
                quota -= job.gpus
                to_run.append(job)
            else:
                job = running[r][2]
                r += 1
                need = ledger.held_in_service(job.slots) if partial else job.gpus
                if need > quota:
                    victims.append(job)
                    continue
                quota -= need
            if quota == 0 and not partial:
                victims.extend(e[2] for e in running[r:])
                break
        return to_run, victims


OPS = st.lists(
    st.one_of(
        st.tuples(st.just("submit"), st.integers(1, 16), st.integers(1, 400)),
        st.tuples(st.just("advance"), st.integers(0, 200), st.booleans()),
        st.tuples(st.just("others"), st.integers(0, 2), st.integers(0, 4)),
        st.tuples(st.just("out"), st.integers(0, 3), st.booleans()),
    ),
    min_size=1,
    max_size=40,
)


@pytest.mark.skipif(
    not gputwin.core.scheduler.__file__.endswith(".py"),
    reason="the reference subclasses Scheduler, and a compiled (mypyc) class cannot be subclassed",
)
@settings(max_examples=200, deadline=None)
@given(queue=st.sampled_from(["srtf", "las"]), ops=OPS)
def test_shortcut_rerank_decides_like_sorting_every_running_job(cluster, queue, ops) -> None:
    policy = PolicySpec(queue=queue, placement="consolidate", params={"las_thresholds": "40,300"})
    spec = cluster(LAYOUT, policy)
    fast, slow = Scheduler(spec), _FullSort(spec)
    now, n = 0.0, 0
    for op in ops:
        done: JobState | None = None  # the job that ends during an "advance", chosen on `fast`
        if op[0] == "advance":
            running = [j for j in fast.jobs.values() if j.phase is Phase.RUNNING]
            first = min(running, key=lambda j: (j.seg_end, j.order), default=None)
            if op[2] and first is not None and first.seg_end <= now + op[1]:
                done, now = first, max(now, first.seg_end)
            else:
                now += op[1]
        for sched in (fast, slow):
            if op[0] == "submit":
                sched.submit(JobSpec(f"j{n}", now, float(op[2]), op[1], "x", seq=n), now)
            elif done is not None:
                sched.complete(done.spec.job_id, now)
            elif op[0] == "others":
                sched.set_external_use({NODES[op[1]]: op[2]})
            elif op[0] == "out":
                sched.set_out_of_service(NODES[op[1] : op[1] + 1] if op[2] else ())
            sched.wake()
        n += op[0] == "submit"
        assert fast.run_cycle(now) == slow.run_cycle(now), op
    assert {k: (j.phase, j.work_left) for k, j in fast.jobs.items()} == {
        k: (j.phase, j.work_left) for k, j in slow.jobs.items()
    }
