"""MIG profiles (gputwin.core.sharing): a profile takes its compute slices of one MIG-partitioned GPU
of 7, best fit, never mixed with milli-GPU fractions on one GPU, the GPU back to the ledger when its
last slice-holder leaves. Hand-made layouts (tests/cluster_builders.py), then hypothesis: whatever
profiles and fractions come and go, no GPU holds over 7 slices (or 1000 milli) and every GPU comes back."""

from __future__ import annotations

from dataclasses import replace

import pytest
from cluster_builders import build_cluster, build_jobs, build_ledger
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.placement import Consolidate, FirstFit
from gputwin.core.scheduler import Scheduler
from gputwin.core.sharing import Shares, profile_milli, profile_slices, share_problem
from gputwin.sim.engine import Simulator


def _job(job_id: str, ask: str | int) -> JobSpec:
    """A 1-GPU job asking for MIG profile `ask` (a name) or `ask` milli-GPU (a number)."""
    if isinstance(ask, int):
        return JobSpec(job_id, 0.0, 1.0, 1, "x", gpu_milli=ask)
    return JobSpec(job_id, 0.0, 1.0, 1, "x", gpu_profile=ask, gpu_milli=profile_milli(profile_slices(ask)))


def _pack(shares: Shares, asks: list[str | int]) -> list[tuple[int, int] | None]:
    """Place and take each request in turn: its (node, slot), or None when it must wait."""
    out: list[tuple[int, int] | None] = []
    for i, ask in enumerate(asks):
        spec = _job(f"j{i}", ask)
        slots = shares.place(FirstFit(), spec, 0.0, None)
        if slots is None:
            out.append(None)
            continue
        shares.take(spec.job_id, slots[0][0], spec.gpu_milli, 0.0, spec.gpu_profile)
        out.append(shares.of_job[spec.job_id][:2])
    return out


# (id, profile name, compute slices; 0: not a MIG profile name)
NAMES = [
    ("a100-smallest", "1g.5gb", 1), ("h100-smallest", "1g.10gb", 1), ("media-extension", "1g.10gb+me", 1),
    ("a100-half", "3g.20gb", 3), ("h100-whole", "7g.80gb", 7), ("eight-slices", "8g.80gb", 0),
    ("zero-slices", "0g.5gb", 0), ("no-memory", "2g", 0), ("upper-case", "1G.5GB", 0), ("empty", "", 0),
]  # fmt: skip


@pytest.mark.parametrize("name,slices", [c[1:] for c in NAMES], ids=[c[0] for c in NAMES])
def test_a_profile_takes_the_compute_slices_its_name_starts_with(name: str, slices: int) -> None:
    assert profile_slices(name) == slices


# (id, layout, requests (profile names or milli), (node, slot) of each, free GPUs after)
PACKING = [
    ("seven-1g-fill-one-gpu", {"l0": [2]}, ["1g.5gb"] * 7, [(0, 0)] * 7, 1),
    ("an-eighth-1g-opens-a-second-gpu", {"l0": [2]}, ["1g.5gb"] * 8, [(0, 0)] * 7 + [(0, 1)], 0),
    ("two-3g-share-one-gpu", {"l0": [2]}, ["3g.20gb", "3g.20gb"], [(0, 0), (0, 0)], 1),
    ("4g-and-3g-fill-one-gpu", {"l0": [2]}, ["4g.20gb", "3g.20gb"], [(0, 0), (0, 0)], 1),
    ("two-4g-need-two-gpus", {"l0": [2]}, ["4g.20gb", "4g.20gb"], [(0, 0), (0, 1)], 0),
    ("best-fit-takes-the-fullest-gpu-it-fits", {"l0": [2]}, ["4g.20gb", "4g.20gb", "2g.10gb"],
     [(0, 0), (0, 1), (0, 0)], 0),
    ("ties-go-to-the-lowest-node", {"l0": [1, 1]}, ["4g.20gb", "4g.20gb", "1g.5gb"], [(0, 0), (1, 0), (0, 0)], 0),
    ("no-gpu-free-and-no-room-waits", {"l0": [1]}, ["4g.20gb", "4g.20gb"], [(0, 0), None], 0),
    ("a-fraction-never-joins-a-mig-gpu", {"l0": [2]}, ["1g.5gb", 100], [(0, 0), (0, 1)], 0),
    ("a-profile-never-joins-a-fraction-gpu", {"l0": [2]}, [100, "1g.5gb"], [(0, 0), (0, 1)], 0),
    ("each-kind-packs-on-its-own-gpu", {"l0": [2]}, [500, "2g.10gb", 500, "2g.10gb"], [(0, 0), (0, 1), (0, 0), (0, 1)], 0),
    ("mixing-kinds-waits-rather-than-mixes", {"l0": [1]}, ["1g.5gb", 100], [(0, 0), None], 0),
]  # fmt: skip


@pytest.mark.parametrize("layout,asks,expected,free", [c[1:] for c in PACKING], ids=[c[0] for c in PACKING])
def test_profiles_pack_best_fit_onto_mig_gpus(layout: dict, asks: list, expected: list, free: int) -> None:
    ledger = build_ledger(layout)
    shares = Shares(ledger)
    assert _pack(shares, asks) == expected
    assert ledger.free_gpus == free
    assert all(0 < used <= 7 for used in shares.slices_used().values())
    assert all(0 < used <= 1000 for used in shares.used().values())


# (id, profiles taken, which leave, open shared GPUs after, free GPUs after)
RELEASES = [
    ("last-slice-holder-gives-the-gpu-back", ["3g.20gb", "3g.20gb"], [0, 1], 0, 2),
    ("the-gpu-stays-open-while-a-slice-is-held", ["3g.20gb", "1g.5gb"], [0], 1, 1),
    ("both-mig-gpus-come-back", ["4g.20gb", "4g.20gb"], [1, 0], 0, 2),
]


@pytest.mark.parametrize("asks,leave,open_gpus,free", [c[1:] for c in RELEASES], ids=[c[0] for c in RELEASES])
def test_mig_gpus_go_back_when_their_last_slice_leaves(asks: list, leave: list[int], open_gpus: int,
                                                       free: int) -> None:  # fmt: skip
    ledger = build_ledger({"l0": [2]})
    shares = Shares(ledger)
    _pack(shares, asks)
    for i in leave:
        shares.give_back(f"j{i}", 1.0)
    assert (shares.open_gpus, ledger.free_gpus, len(shares.mig)) == (open_gpus, free, open_gpus)


def test_a_freed_mig_gpu_can_hold_fractions_again() -> None:
    # a MIG GPU returned to the ledger is a plain GPU again (re-partitioning needs an idle GPU: it is)
    ledger = build_ledger({"l0": [1]})
    shares = Shares(ledger)
    assert _pack(shares, ["1g.5gb"]) == [(0, 0)]
    shares.give_back("j0", 1.0)
    assert _pack(shares, [300]) == [(0, 0)] and not shares.mig


def test_integrals_count_slices_by_their_milli() -> None:
    shares = Shares(build_ledger({"l0": [2]}))
    shares.take("a", 0, profile_milli(1), 0.0, "1g.5gb")
    shares.take("b", 0, profile_milli(3), 7.0, "3g.20gb")
    shares.give_back("a", 14.0)
    shares.give_back("b", 21.0)
    assert (shares.open_area, shares.opened) == (21.0, 1)
    assert shares.used_area == pytest.approx(0.143 * 14 + 0.429 * 14)  # as the engine counts them busy


# --- the scheduler ----------------------------------------------------------------------------------

# (id, gpus, profile, milli, reason)
REFUSED = [
    ("not-a-profile-name", 1, "9g.5gb", 143,
     "asks for MIG profile '9g.5gb'; a profile is named like 1g.10gb (1 to 7 slices)"),
    ("a-profile-of-two-gpus", 2, "1g.5gb", 143, "asks for MIG profile 1g.5gb of 2 GPUs; a profile is of one GPU"),
    ("milli-not-the-slices-share", 1, "1g.5gb", 500,
     "asks for MIG profile 1g.5gb with 500 milli-GPU; it uses 143"),
]  # fmt: skip


@pytest.mark.parametrize("gpus,profile,milli,reason", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_scheduler_refuses_profiles_it_cannot_serve(gpus: int, profile: str, milli: int, reason: str) -> None:
    spec = JobSpec("j", 0.0, 1.0, gpus, "x", gpu_profile=profile, gpu_milli=milli)
    assert share_problem(spec) == reason
    decision = Scheduler(build_cluster({"l0": [4]})).submit(spec, 0.0)
    assert [r.reason for r in decision.rejects] == [reason]


# (id, the job's model, its profile, the reason it is refused or None)
DECLARED = [
    ("declared", "a100", "3g.20gb", None),
    ("not-of-the-model", "a100", "1g.10gb", "asks for MIG profile 1g.10gb of GPU model 'a100', which declares 1g.5gb, 3g.20gb, 7g.40gb"),
    ("a-model-without-profiles", "v100", "1g.5gb", "asks for MIG profile 1g.5gb of GPU model 'v100', which declares none"),
    ("a-whole-gpu-profile-too", "v100", "7g.40gb", "asks for MIG profile 7g.40gb of GPU model 'v100', which declares none"),
]  # fmt: skip


@pytest.mark.parametrize("model,profile,reason", [c[1:] for c in DECLARED], ids=[c[0] for c in DECLARED])
def test_a_cluster_declaring_profiles_refuses_others(model: str, profile: str, reason: str | None) -> None:
    cluster = build_cluster({"l0": [1, 1]})
    nodes = tuple(replace(n, model=m) for n, m in zip(cluster.topology.nodes, ("a100", "v100")))
    profiles = {"a100": ("1g.5gb", "3g.20gb", "7g.40gb")}
    cluster = replace(cluster, topology=replace(cluster.topology, nodes=nodes, profiles=profiles))
    spec = replace(_job("j", profile), model=model)
    decision = Scheduler(cluster).submit(spec, 0.0)
    assert [r.reason for r in decision.rejects] == ([] if reason is None else [reason])


def test_a_7g_profile_is_a_whole_gpu() -> None:
    sched = Scheduler(build_cluster({"l0": [1]}))
    sched.submit(_job("a", "7g.40gb"), 0.0)
    assert [s.job_id for s in sched.run_cycle(0.0).starts] == ["a"]
    assert sched.partitions["p"].shares is None


def test_seven_1g_jobs_run_together_on_one_gpu_in_the_scheduler() -> None:
    sched = Scheduler(build_cluster({"l0": [1]}))
    for i in range(8):
        sched.submit(_job(f"j{i}", "1g.5gb"), 0.0)
    assert [s.job_id for s in sched.run_cycle(0.0).starts] == [f"j{i}" for i in range(7)]


# --- invariants -------------------------------------------------------------------------------------

ASKS = st.sampled_from(["1g.5gb", "2g.10gb", "3g.20gb", "4g.20gb", 100, 500, 900])
OPS = st.lists(st.tuples(st.booleans(), ASKS, st.integers(0, 50)), max_size=60)


def _consistent(shares: Shares) -> None:
    ledger = shares.ledger
    assert ledger.held_gpus == shares.open_gpus and ledger.free_gpus + ledger.held_gpus == ledger.total_gpus
    assert all(0 < used <= 7 for used in shares.slices_used().values())
    assert all(0 < used <= 1000 for used in shares.used().values())
    held = [(node, slot, amount) for node, slot, amount in shares.of_job.values() if (node, slot) in shares.mig]
    assert shares.used_slices == sum(amount for _, _, amount in held)


@settings(max_examples=150, deadline=None)
@given(OPS)
def test_no_gpu_is_ever_over_7_slices_and_every_slice_comes_back(ops: list[tuple[bool, str | int, int]]) -> None:
    ledger = build_ledger({"l0": [2, 1], "l1": [3]})
    shares = Shares(ledger)
    live: list[str] = []
    for n, (add, ask, pick) in enumerate(ops):
        if add or not live:
            spec = _job(f"j{n}", ask)
            slots = shares.place(Consolidate(), spec, 0.0, None)
            if slots is not None:
                shares.take(spec.job_id, slots[0][0], spec.gpu_milli, float(n), spec.gpu_profile)
                live.append(spec.job_id)
        else:
            shares.give_back(live.pop(pick % len(live)), float(n))
        _consistent(shares)
    for job_id in live:
        shares.give_back(job_id, 100.0)
    assert (ledger.free_gpus, shares.open_gpus, shares.used_slices, shares.mig, shares.of_job) == (6, 0, 0, set(), {})


JOBS = st.lists(st.tuples(st.integers(0, 20), st.integers(1, 30), ASKS), min_size=1, max_size=40)


@settings(max_examples=40, deadline=None)
@given(JOBS)
def test_a_replay_of_profiles_ends_with_every_gpu_free(rows: list[tuple[int, int, str | int]]) -> None:
    specs = [_job(f"j{i}", ask) for i, (_, _, ask) in enumerate(rows)]
    extra = [{"gpu_milli": s.gpu_milli, "gpu_profile": s.gpu_profile} for s in specs]
    jobs = build_jobs([(f"j{i}", s, d, 1, e) for i, ((s, d, _), e) in enumerate(zip(rows, extra))])
    sim = Simulator(build_cluster({"l0": [2, 1]}, PolicySpec(queue="fifo")))
    outcome = sim.run(jobs)
    part = sim.scheduler.partitions["p"]
    assert len(outcome.finished) == len(jobs)
    assert part.ledger.free_gpus == 3 and part.shares is not None and part.shares.open_gpus == 0
    expected = sum(s.gpu_milli / 1000 * s.duration for s in jobs)
    assert part.shares.used_area == pytest.approx(expected)
