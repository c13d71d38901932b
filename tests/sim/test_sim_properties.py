"""Properties of whole simulations on random small clusters and traces, for every queue policy,
every placer and backfill on/off.

Each run is instrumented by a listener on the runtime (`Checked`): at every transition the
ledgers are checked against the running jobs, and every run segment (start, preemption, end) is
recorded; it runs the same on the compiled core (.ci/run runs it on the wheel). Then, per job:

* it finishes exactly once (or was rejected, and only for a task type no partition serves);
* work is conserved: each run starts with the work the previous one left (never below 0) plus the
  checkpoint cost, and lasts that work x (1 + overhead) + release lag; with no lag (the default
  options) this sums to: segment lengths / (1 + overhead) == duration + the checkpoint costs;
* time is accounted for: wait + sum of segment lengths == end - submit, hence JCT >= duration;
* the engine ends the last segment exactly `run_seconds` after it started;
* busy GPU-seconds of the tracker == sum of GPUs x segment lengths;
and the same input and seed give identical per-job results. Under strict FIFO without backfill no
job of a partition starts before an earlier-submitted one. A second test runs the same checks in the
reference simulator's world (`SchedulerOptions.helios()`: 8-GPU nodes, its placers, release lag).
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from listening import Forwarding

from gputwin.core.compat import helios_checkpoint_cost
from gputwin.core.decision import Preempt, Start
from gputwin.core.model import (
    ClusterSpec,
    JobSpec,
    NodeSpec,
    OverheadModel,
    PartitionSpec,
    PolicySpec,
    SwitchSpec,
    TopologySpec,
)
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.core.state import JobState, Phase
from gputwin.sim.engine import Recorder, SimOutcome, Simulator

QUEUES = ("fifo", "sjf", "priority", "qssf", "srtf", "las")
PLACERS = ("first-fit", "consolidate", "topology-aware", "random")
UNROUTED = "nobody-serves-this"


@dataclass
class Scenario:
    cluster: ClusterSpec
    jobs: list[JobSpec]
    options: SchedulerOptions


# Strategies are built once: creating them inside the composite on every draw costs more than the runs.
_LEAF_SPINE = st.lists(st.integers(0, 1), min_size=1, max_size=3)  # 1-3 leaves, each under spine 0 or 1
_NODE = st.tuples(st.integers(1, 8), st.integers(0, 2))  # (GPUs, leaf choice)
_PARTITION = st.lists(_NODE, min_size=1, max_size=6)
# One job is one integer, decoded field by field (see _decode_job): a single draw per job keeps data
# generation cheaper than the simulation itself, and shrinking still heads for 0 = the smallest job.
_JOB = st.integers(0, 1001 * 500 * 256 * 10 * 9 * 4 - 1)


def _decode_job(raw: int) -> tuple[int, int, int, int, int, int]:
    """(submit 0..1000, duration 1..500, GPUs seed, partition choice 0..9 (9: unrouted), who 0..8, priority)."""
    raw, submit = divmod(raw, 1001)
    raw, duration = divmod(raw, 500)
    raw, gpus = divmod(raw, 256)
    raw, part = divmod(raw, 10)
    prio, who = divmod(raw, 9)
    return submit, duration + 1, gpus, part, who, prio


_POLICY_KNOBS = st.tuples(
    st.booleans(),  # backfill
    st.one_of(st.none(), st.integers(0, 60)),  # checkpoint seconds
    st.sampled_from([0, 30, 300]),  # topology-aware max_wait
    st.sampled_from(["100", "200,2000", "50,500,5000"]),  # LAS thresholds
    st.sampled_from([0.0, 0.1, 0.5]),  # per-tier overhead
    st.sampled_from([0.0, 0.25]),  # cross-node overhead
    st.integers(0, 3),  # seed
    st.sampled_from([100, 1000]),  # submit horizon: crowded or spread out
    st.booleans(),  # GPU models: nodes a100 and h100 in turn, a job asking for one or for any
)


@st.composite
def scenarios(draw: st.DrawFn, queue: str, placer: str, helios: bool = False) -> Scenario:
    """A random cluster and trace; `helios`: the reference simulator's world (8-GPU nodes, no network
    overhead, no backfill, its checkpoint costs) run with `SchedulerOptions.helios()`."""
    spines = draw(_LEAF_SPINE)
    n_leaves = len(spines)
    switches = [SwitchSpec("root"), SwitchSpec("s0", "root"), SwitchSpec("s1", "root")]
    switches += [SwitchSpec(f"l{i}", f"s{s}") for i, s in enumerate(spines)]
    backfill, checkpoint, max_wait, las, per_tier, cross_node, seed, horizon, models = draw(_POLICY_KNOBS)
    if helios:
        backfill, checkpoint, per_tier, cross_node = False, None, 0.0, 0.0
    policy = PolicySpec(
        queue=queue,
        placement=placer,
        backfill=backfill,
        checkpoint_seconds=None if checkpoint is None else float(checkpoint),
        params={"max_wait": max_wait, "las_thresholds": las},
    )
    nodes: list[NodeSpec] = []
    parts: list[PartitionSpec] = []
    totals: list[dict[str, int]] = []  # per partition: "" (all its GPUs) and each model's GPUs
    for p, members in enumerate(draw(st.lists(_PARTITION, min_size=1, max_size=3))):
        names = []
        totals.append({})
        for gpus, leaf in members:  # mixed node sizes on purpose (they used to stall consolidate)
            gpus = 8 if helios else gpus
            model = ("a100", "h100")[len(nodes) % 2] if models and not helios else ""
            names.append(f"n{len(nodes)}")
            nodes.append(NodeSpec(names[-1], gpus, f"l{leaf % n_leaves}", model=model))
            for kind in {"", model}:
                totals[-1][kind] = totals[-1].get(kind, 0) + gpus
        parts.append(PartitionSpec(f"p{p}", tuple(names), (f"t{p}",), policy))
    overhead = OverheadModel(per_tier=per_tier, cross_node=cross_node)
    cluster = ClusterSpec(TopologySpec("t", tuple(switches), tuple(nodes), overhead), tuple(parts))

    jobs = []
    count = draw(st.integers(0, 40))  # hypothesis keeps plain lists short; ask for a length first
    for seq, raw in enumerate(draw(st.lists(_JOB, min_size=count, max_size=count))):
        submit, duration, gpus, p, who, prio = _decode_job(raw)
        part = None if p == 9 else p % len(parts)
        want = ("", "a100", "h100")[(submit + duration) % 3] if models else ""
        if part is None or want not in totals[part]:
            want = ""  # this partition has no GPU of that model
        jobs.append(
            JobSpec(
                f"j{seq}",
                submit=float(submit % (horizon + 1)),
                duration=float(duration),
                gpus=1 + gpus % (8 if part is None else totals[part][want]),
                task_type=UNROUTED if part is None else f"t{part}",
                user=f"u{who % 3}",
                name=("a1", "a2", "b1")[who // 3],
                priority=prio,
                seq=seq,
                model=want,
            )
        )
    jobs.sort(key=lambda j: (j.submit, j.seq))
    options = SchedulerOptions.helios(seed) if helios else SchedulerOptions(seed=seed)
    return Scenario(cluster, jobs, options)


@dataclass
class Segment:
    start: float
    overhead: float
    run_seconds: float
    gpus: int
    end: float | None = None


@dataclass
class Record:
    segments: dict[str, list[Segment]] = field(default_factory=lambda: defaultdict(list))
    preemptions: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))  # checkpoint costs
    completions: Counter = field(default_factory=Counter)


def check_ledgers(sched: Scheduler) -> None:
    """Every partition's ledger agrees with its running jobs, node by node and leaf by leaf."""
    for part in sched.partitions.values():
        led = part.ledger
        assert 0 <= led.free_gpus <= led.total_gpus
        assert sum(j.gpus for j in part.running.values()) == led.used_gpus
        used: Counter = Counter()
        for job in part.running.values():
            assert job.phase is Phase.RUNNING
            assert sum(g for _, g in job.slots) == job.gpus
            assert len({n for n, _ in job.slots}) == len(job.slots)  # one slot per node
            for node, gpus in job.slots:
                assert gpus > 0
                used[node] += gpus
        for node, cap in zip(led.nodes, led.capacity):
            assert led.free_of(node) == cap - used[node] >= 0
        leaf_free: Counter = Counter()
        for node in led.nodes:
            leaf_free[sched.topology.node_leaf[node]] += led.free_of(node)
        assert {lf: led.leaf_free(lf) for lf in led.leaves} == {lf: leaf_free[lf] for lf in led.leaves}
        assert list(led.avail_nodes()) == [n for n in led.nodes if led.free_of(n)]
        queued = {j.job_id for j in part.queued.values()}
        assert all(j.phase is Phase.QUEUED for j in part.queued.values())
        assert not queued & set(part.running)
        in_order = part.queued_jobs()
        assert sorted(map(id, in_order)) == sorted(map(id, part.queued.values()))  # each queued job once


class Checked(Forwarding):
    """The runtime's listener for a checked run (`gputwin.runtime.loop.Transitions`): records every
    run segment and checks the ledgers at each transition, then tells the simulator's own Recorder.
    A listener (tests/listening.py): it runs the same on the pure and the compiled core."""

    def __init__(self, inner: Recorder, sched: Scheduler, rec: Record) -> None:
        super().__init__(inner)
        self.sched, self.rec = sched, rec

    def started(self, starts: Sequence[Start], now: float) -> None:
        for start in starts:
            segs = self.rec.segments[start.job_id]
            assert not segs or segs[-1].end is not None  # never started twice without stopping
            segs.append(Segment(now, start.overhead, start.run_seconds, sum(g for _, g in start.slots)))
        check_ledgers(self.sched)
        self.inner.started(starts, now)

    def preempted(self, preempt: Preempt, now: float) -> None:
        seg = self.rec.segments[preempt.job_id][-1]
        assert seg.end is None  # only a running job is preempted
        seg.end = now
        self.rec.preemptions[preempt.job_id].append(preempt.checkpoint_seconds)
        check_ledgers(self.sched)
        self.inner.preempted(preempt, now)

    def completed(self, ends: Sequence[tuple[JobState, float]], now: float) -> None:
        for state, end in ends:
            self.rec.completions[state.spec.job_id] += 1
            seg = self.rec.segments[state.spec.job_id][-1]
            assert seg.end is None
            seg.end = end
        check_ledgers(self.sched)
        self.inner.completed(ends, now)


def instrumented_run(scenario: Scenario) -> tuple[SimOutcome, Record, Simulator]:
    sim = Simulator(scenario.cluster, scenario.options)
    rec = Record()
    sim.runtime.listener = Checked(sim.recorder, sim.scheduler, rec)
    return sim.run(scenario.jobs), rec, sim


def check_outcome(scenario: Scenario, out: SimOutcome, rec: Record, sim: Simulator) -> None:
    policy = scenario.cluster.partitions[0].policy
    unrouted = {j.job_id for j in scenario.jobs if j.task_type == UNROUTED}
    assert {r.job_id for r in out.rejected} == unrouted
    finished_ids = [j.job_id for j in out.finished]
    assert len(finished_ids) == len(set(finished_ids))  # nothing finishes twice
    assert set(finished_ids) == {j.job_id for j in scenario.jobs} - unrouted  # every admitted job finishes
    assert all(rec.completions[i] == 1 for i in finished_ids)
    assert sim.scheduler.jobs == {}

    busy = 0.0
    for job in out.finished:
        segs = rec.segments[job.job_id]
        costs = rec.preemptions[job.job_id]
        assert len(segs) == len(costs) + 1 == job.preemptions + 1
        if not sim.scheduler.partitions[job.partition].policy.preemptive:
            assert job.preemptions == 0
        expected_cost = (
            policy.checkpoint_seconds
            if policy.checkpoint_seconds is not None
            else helios_checkpoint_cost(job.gpus)
        )
        assert all(c == expected_cost for c in costs)
        preemptive = sim.scheduler.partitions[job.partition].policy.preemptive
        lag = scenario.options.release_lag if preemptive else 0.0
        # work conservation, run by run: each run gets the duration (first run) or what the run before
        # had left (never below 0) plus its checkpoint cost, and lasts that work x (1 + overhead) + lag
        left = job.spec.duration
        for seg, cost in zip(segs, [*costs, None]):
            slow = 1 + seg.overhead
            assert (seg.run_seconds - lag) / slow == pytest.approx(left, rel=1e-9, abs=1e-6)
            if cost is not None:
                left = max(0.0, left - (seg.end - seg.start) / slow) + cost  # type: ignore[operator]
        # the engine ends the last run exactly when its Start said
        assert segs[-1].end == pytest.approx(segs[-1].start + segs[-1].run_seconds, rel=1e-12, abs=1e-9)
        if lag == 0:  # then nothing is clamped: the runs did the job plus its checkpoints, net of overhead
            work = math.fsum((s.end - s.start) / (1 + s.overhead) for s in segs)  # type: ignore[operator]
            assert work == pytest.approx(job.spec.duration + sum(costs), rel=1e-9, abs=1e-6)
        ran = math.fsum(s.end - s.start for s in segs)  # type: ignore[operator]
        jct = job.end - job.spec.submit  # type: ignore[operator]
        assert job.wait + ran == pytest.approx(jct, rel=1e-9, abs=1e-6)
        assert jct >= job.spec.duration + lag - 1e-9
        assert job.first_start == segs[0].start >= job.spec.submit
        assert job.overhead == pytest.approx(max(s.overhead for s in segs))
        busy += math.fsum(s.gpus * (s.end - s.start) for s in segs)  # type: ignore[operator]
    assert math.fsum(out.busy.area.values()) == pytest.approx(busy, rel=1e-9, abs=1e-6)
    assert all(b == 0 for b in out.busy.busy.values())
    for part in sim.scheduler.partitions.values():
        assert part.ledger.free_gpus == part.ledger.total_gpus

    # strict FIFO without backfill never lets a later job start before an earlier one of its partition
    if policy.queue == "fifo" and not policy.backfill:
        for part in scenario.cluster.partitions:
            starts = [
                (j.spec.submit, j.spec.seq, j.first_start) for j in out.finished if j.partition == part.name
            ]
            ordered = [s for _, _, s in sorted(starts)]
            assert ordered == sorted(ordered)


def per_job(out: SimOutcome) -> list[tuple]:
    return [
        (j.job_id, j.partition, j.first_start, j.end, j.wait, j.slots, j.preemptions, j.overhead, j.gpus)
        for j in out.finished
    ]


@pytest.mark.parametrize("placer", PLACERS)
@pytest.mark.parametrize("queue", QUEUES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_simulation_invariants(queue: str, placer: str, data: st.DataObject) -> None:
    scenario = data.draw(scenarios(queue, placer))
    out, rec, sim = instrumented_run(scenario)
    check_outcome(scenario, out, rec, sim)
    # same input + seed -> identical per-job results, in the same completion order
    again, _, _ = instrumented_run(scenario)
    assert per_job(again) == per_job(out)


@pytest.mark.parametrize("placer", ["consolidate", "random"])
@pytest.mark.parametrize("queue", ["fifo", "sjf", "srtf"])
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_simulation_invariants_in_helios_compat(queue: str, placer: str, data: st.DataObject) -> None:
    # The same checks with the reference simulator's rules: its placers, SRTF runs released one second
    # late (so a run preempted in that last second keeps 0 s of work plus the checkpoint), and a
    # re-ranking one second after every change.
    scenario = data.draw(scenarios(queue, placer, helios=True))
    out, rec, sim = instrumented_run(scenario)
    check_outcome(scenario, out, rec, sim)
    again, _, _ = instrumented_run(scenario)
    assert per_job(again) == per_job(out)
