"""GPU shares (gputwin.core.sharing): packing onto shared GPUs, release back to the ledger, and the
scheduler's admission of shares. Hand-made layouts (tests/cluster_builders.py), then hypothesis:
whatever the shares come and go, no GPU holds over 1000 milli and every GPU goes back."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from cluster_builders import build_cluster, build_jobs, build_ledger
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.decision import Start
from gputwin.core.ledger import Ledger, OverAllocation
from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.placement import Consolidate, FirstFit
from gputwin.core.scheduler import Scheduler
from gputwin.core.sharing import Shares
from gputwin.sim.engine import Recorder, Simulator


def _share(job_id: str, milli: int, model: str = "") -> JobSpec:
    return JobSpec(job_id, 0.0, 1.0, 1, "x", gpu_milli=milli, model=model)


def _pack(shares: Shares, millis: list[int]) -> list[tuple[int, int] | None]:
    """Place and take each share in turn: its (node, slot), or None when it must wait."""
    out: list[tuple[int, int] | None] = []
    for i, milli in enumerate(millis):
        slots = shares.place(FirstFit(), _share(f"j{i}", milli), 0.0, None)
        if slots is None:
            out.append(None)
            continue
        shares.take(f"j{i}", slots[0][0], milli, 0.0)
        out.append(shares.of_job[f"j{i}"][:2])
    return out


# (id, layout, GPUs allocated to whole jobs first, shares in milli, (node, slot) of each, free GPUs after)
PACKING = [
    ("two-halves-share-one-gpu", {"l0": [2]}, [], [500, 500], [(0, 0), (0, 0)], 1),
    ("a-share-that-does-not-fit-opens-a-second-gpu", {"l0": [2]}, [], [600, 500], [(0, 0), (0, 1)], 0),
    ("best-fit-takes-the-fullest-gpu-it-fits", {"l0": [2]}, [], [600, 500, 300], [(0, 0), (0, 1), (0, 0)], 0),
    ("best-fit-skips-a-fuller-gpu-without-room", {"l0": [2]}, [], [800, 500, 300], [(0, 0), (0, 1), (0, 1)], 0),
    ("ties-go-to-the-lowest-node", {"l0": [1, 1]}, [], [700, 700, 300], [(0, 0), (1, 0), (0, 0)], 0),
    ("exactly-1000-fits", {"l0": [1]}, [], [250, 750], [(0, 0), (0, 0)], 0),
    ("no-gpu-free-and-no-room-waits", {"l0": [1]}, [], [600, 600], [(0, 0), None], 0),
    ("whole-gpu-jobs-keep-their-gpus", {"l0": [2, 2]}, [(0, 2)], [100, 100], [(1, 0), (1, 0)], 1),
]


@pytest.mark.parametrize("layout,whole,millis,expected,free", [c[1:] for c in PACKING], ids=[c[0] for c in PACKING])
def test_shares_pack_best_fit_onto_few_gpus(layout: dict, whole: list, millis: list[int], expected: list,
                                            free: int) -> None:  # fmt: skip
    ledger = build_ledger(layout, whole)
    shares = Shares(ledger)
    assert _pack(shares, millis) == expected
    assert ledger.free_gpus == free
    assert all(0 < used <= 1000 for used in shares.used().values())


# (id, two shares in milli, which leave, a later share's milli, its (node, slot), open shared GPUs, free GPUs)
RELEASES = [
    ("last-share-gives-the-gpu-back", [500, 500], [0, 1], None, None, 0, 2),
    ("a-gpu-stays-open-while-a-share-is-on-it", [500, 500], [0], None, None, 1, 1),
    ("a-later-share-joins-the-gpu-still-open", [600, 600], [1], 300, (0, 0), 1, 1),
    ("the-lowest-free-slot-is-used-again", [600, 600], [0], 600, (0, 0), 2, 0),
]


@pytest.mark.parametrize("millis,leave,later,slot,open_gpus,free", [c[1:] for c in RELEASES],
                         ids=[c[0] for c in RELEASES])  # fmt: skip
def test_shares_release_gpus_to_the_ledger(millis: list[int], leave: list[int], later: int | None,
                                           slot: tuple[int, int] | None, open_gpus: int, free: int) -> None:  # fmt: skip
    ledger = build_ledger({"l0": [2]})
    shares = Shares(ledger)
    assert _pack(shares, millis) == [(0, 0), (0, 0 if sum(millis) <= 1000 else 1)]
    for i in leave:
        shares.give_back(f"j{i}", 1.0)
    if later is not None:
        slots = shares.place(FirstFit(), _share("late", later), 1.0, None)
        assert slots is not None
        shares.take("late", slots[0][0], later, 1.0)
        assert shares.of_job["late"][:2] == slot
    assert (shares.open_gpus, ledger.free_gpus) == (open_gpus, free)


def test_integrals_count_open_gpus_and_used_fractions() -> None:
    shares = Shares(build_ledger({"l0": [2]}))
    shares.take("a", 0, 250, 0.0)
    shares.take("b", 0, 500, 10.0)
    shares.give_back("a", 20.0)
    shares.give_back("b", 30.0)
    assert (shares.open_area, shares.used_area, shares.opened) == (30.0, 0.25 * 20 + 0.5 * 20, 1)


def test_giving_back_a_share_never_taken_is_refused() -> None:
    with pytest.raises(OverAllocation):
        Shares(build_ledger({"l0": [1]})).give_back("nobody", 0.0)


def test_shares_skip_gpus_on_nodes_out_of_service() -> None:
    ledger = build_ledger({"l0": [1, 1]})
    shares = Shares(ledger)
    shares.take("a", 0, 500, 0.0)
    ledger.set_out_of_service([0])
    slots = shares.place(Consolidate(), _share("b", 500), 0.0, None)
    assert slots == ((1, 1),)


# --- the scheduler ----------------------------------------------------------------------------------

# (id, gpus, gpu_milli, reason)
REFUSED = [
    ("zero-milli", 1, 0, "asks for 0 milli-GPU; a share is 1 to 999 (1000: whole GPUs)"),
    ("more-than-one-gpu", 1, 1500, "asks for 1500 milli-GPU; a share is 1 to 999 (1000: whole GPUs)"),
    ("a-share-of-two-gpus", 2, 500, "asks for 500 milli-GPU of 2 GPUs; a share is of one GPU"),
]


@pytest.mark.parametrize("gpus,milli,reason", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_scheduler_refuses_shares_it_cannot_serve(gpus: int, milli: int, reason: str) -> None:
    sched = Scheduler(build_cluster({"l0": [4]}))
    decision = sched.submit(JobSpec("j", 0.0, 1.0, gpus, "x", gpu_milli=milli), 0.0)
    assert [r.reason for r in decision.rejects] == [reason]


@pytest.mark.parametrize("queue,packed", [("fifo", True), ("srtf", False)], ids=["strict-packs", "preemptive-whole"])
def test_shares_pack_only_where_jobs_keep_their_gpus(queue: str, packed: bool) -> None:
    # two half shares on one 1-GPU node: packed they run together; a preemptive queue gives each a GPU
    sched = Scheduler(build_cluster({"l0": [1]}, PolicySpec(queue=queue)))
    for job_id in ("a", "b"):
        sched.submit(_share(job_id, 500), 0.0)
    started = [s.job_id for s in sched.run_cycle(0.0).starts]
    assert started == (["a", "b"] if packed else ["a"])
    assert (sched.partitions["p"].shares is not None) == packed


# (id, the later jobs (id, milli, duration), the ids that start at 0). Before them, on one 2-GPU
# node: a whole 1-GPU job and a 500-milli share, both 100 s (no whole GPU left free), then a
# 2-GPU head that waits for both: shadow 100.
BACKFILL = [
    ("a-share-ending-by-the-shadow-joins-the-open-gpu", [("s", 300, 10)], ["s"]),
    ("a-share-outlasting-the-shadow-waits", [("s", 300, 500)], []),
    ("a-share-with-no-room-on-the-open-gpu-waits", [("s", 600, 10)], []),
    ("a-whole-job-needs-a-free-gpu", [("w", 1000, 10), ("s", 300, 10)], ["s"]),
]


@pytest.mark.parametrize("later,backfilled", [c[1:] for c in BACKFILL], ids=[c[0] for c in BACKFILL])
def test_backfill_puts_shares_on_open_shared_gpus(later: list[tuple[str, int, int]], backfilled: list[str]) -> None:
    sched = Scheduler(build_cluster({"l0": [2]}, PolicySpec(queue="fifo", backfill=True)))
    first = [JobSpec("a", 0.0, 100.0, 1, "x"), JobSpec("b", 0.0, 100.0, 1, "x", gpu_milli=500),
             JobSpec("head", 0.0, 10.0, 2, "x")]  # fmt: skip
    for spec in first + [JobSpec(i, 0.0, float(d), 1, "x", gpu_milli=m) for i, m, d in later]:
        sched.submit(spec, 0.0)
    started = [s.job_id for s in sched.run_cycle(0.0).starts]
    assert started == ["a", "b", *backfilled]
    shares = sched.partitions["p"].shares
    assert shares is not None and all(0 < used <= 1000 for used in shares.used().values())


def test_whole_gpu_jobs_never_make_shares() -> None:
    sched = Scheduler(build_cluster({"l0": [2]}))
    sched.submit(JobSpec("a", 0.0, 1.0, 1, "x"), 0.0)
    sched.run_cycle(0.0)
    assert sched.partitions["p"].shares is None and not sched.saw_shares


# --- invariants -------------------------------------------------------------------------------------

def _consistent(ledger: Ledger, shares: Shares | None, whole_held: int) -> None:
    open_gpus = 0 if shares is None else shares.open_gpus
    assert ledger.held_gpus == whole_held + open_gpus
    assert ledger.free_gpus + ledger.held_gpus == ledger.total_gpus
    if shares is not None:
        assert all(0 < used <= 1000 for used in shares.used().values())
        assert shares.used_milli == sum(m for _, _, m in shares.of_job.values())


OPS = st.lists(st.tuples(st.booleans(), st.integers(1, 999), st.integers(0, 50)), max_size=60)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_no_gpu_is_ever_over_1000_milli_and_every_gpu_comes_back(ops: list[tuple[bool, int, int]]) -> None:
    ledger = build_ledger({"l0": [2, 1], "l1": [3]})
    shares = Shares(ledger)
    live: list[str] = []
    for n, (add, milli, pick) in enumerate(ops):
        if add or not live:
            slots = shares.place(Consolidate(), _share(f"j{n}", milli), 0.0, None)
            if slots is not None:
                shares.take(f"j{n}", slots[0][0], milli, float(n))
                live.append(f"j{n}")
        else:
            shares.give_back(live.pop(pick % len(live)), float(n))
        _consistent(ledger, shares, 0)
    for job_id in live:
        shares.give_back(job_id, 100.0)
    assert (ledger.free_gpus, shares.open_gpus, shares.used_milli, shares.of_job) == (6, 0, 0, {})


class CheckedListener:
    """The simulator's recorder, checked after every start. A wrapper, not an attribute set on the
    recorder: the compiled build's `Recorder` has no instance dict (CI runs this on the wheel too)."""

    def __init__(self, recorder: Recorder, check: Callable[[], None]) -> None:
        self.recorder, self.check = recorder, check

    def started(self, starts: Sequence[Start], now: float) -> None:
        self.recorder.started(starts, now)
        self.check()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.recorder, name)


JOBS = st.lists(st.tuples(st.integers(0, 20), st.integers(1, 30), st.sampled_from([1, 1, 2, 4]),
                          st.sampled_from([1000, 1000, 100, 250, 500, 700, 999])), min_size=1, max_size=40)


@settings(max_examples=60, deadline=None)
@given(JOBS, st.sampled_from(["fifo", "sjf"]), st.booleans())
def test_a_replay_of_mixed_jobs_never_overcommits_and_ends_with_every_gpu_free(
        rows: list[tuple[int, int, int, int]], queue: str, backfill: bool) -> None:  # fmt: skip
    specs = build_jobs([(f"j{i}", s, d, 1 if m < 1000 else g, {"gpu_milli": m}) for i, (s, d, g, m) in enumerate(rows)])
    sim = Simulator(build_cluster({"l0": [4, 2]}, PolicySpec(queue=queue, backfill=backfill)))
    part = sim.scheduler.partitions["p"]
    sim.runtime.listener = CheckedListener(sim.recorder, lambda: _consistent(
        part.ledger, part.shares, sum(j.gpus for j in part.running.values() if j.spec.gpu_milli == 1000)))
    outcome = sim.run(specs)
    assert len(outcome.finished) == len(specs)
    assert part.ledger.free_gpus == 6 and part.ledger.held_gpus == 0
    assert part.shares is None or (part.shares.of_job, part.shares.open_gpus) == ({}, 0)
    if part.shares is not None:  # every share ran its whole duration, counted by its fraction
        expected = sum(s.gpu_milli / 1000 * s.duration for s in specs if s.gpu_milli < 1000)
        assert part.shares.used_area == pytest.approx(expected)
