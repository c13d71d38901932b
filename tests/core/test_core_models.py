"""GPU models (docs/tenancy.md): nodes carry a model, a job asks for one or for any, placement
filters by it for every placer, and a model's speed factor divides the run time (the slowest
model of a placement setting the pace); a job asking for what a partition lacks is refused."""

from __future__ import annotations

import dataclasses

import pytest
from cluster_builders import build_cluster, build_jobs, build_ledger

from gputwin.core.model import ClusterSpec, PolicySpec
from gputwin.core.placement import Consolidate, FirstFit, Placer, TopologyAware, place_on
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate


def _cluster(models: list[str], speeds: dict[str, float] | None = None, policy: PolicySpec = PolicySpec()
             ) -> ClusterSpec:  # fmt: skip
    """One leaf, one 8-GPU node per model given (n0, n1, ...)."""
    base = build_cluster({"l0": [8] * len(models)}, policy)
    nodes = tuple(dataclasses.replace(n, model=m) for n, m in zip(base.topology.nodes, models))
    return dataclasses.replace(base, topology=dataclasses.replace(base.topology, nodes=nodes, speeds=speeds or {}))


def _run(cluster: ClusterSpec, rows: list[tuple]) -> dict[str, tuple[float | None, float | None, tuple]]:
    jobs = build_jobs([(i, s, d, g, {"model": m}) for i, s, d, g, m in rows])
    return {j.job_id: (j.first_start, j.end, tuple(n for n, _ in j.slots)) for j in simulate(cluster, jobs).finished}


# (id, placement, node models, speeds, jobs (id, submit, duration, GPUs, model), job -> (start, end))
CASES = [
    ("asked-model-only", "first-fit", ["a100", "v100"], {}, [("v", 0, 10, 8, "v100"), ("a", 0, 10, 8, "a100")],
     {"v": (0, 10), "a": (0, 10)}),
    ("waits-for-its-model", "first-fit", ["a100", "v100"], {},
     [("a1", 0, 10, 8, "a100"), ("a2", 0, 10, 4, "a100")], {"a1": (0, 10), "a2": (10, 20)}),
    ("any-takes-any", "first-fit", ["a100", "v100"], {}, [("a1", 0, 10, 8, "a100"), ("x", 0, 10, 8, "")],
     {"a1": (0, 10), "x": (0, 10)}),
    ("consolidate-filters-too", "consolidate", ["a100", "v100"], {},
     [("v1", 0, 10, 2, "v100"), ("a1", 0, 10, 4, "a100")], {"v1": (0, 10), "a1": (0, 10)}),
    ("topology-aware-filters-too", "topology-aware", ["a100", "v100", "v100"], {},
     [("v1", 0, 10, 16, "v100"), ("a1", 0, 10, 8, "a100")], {"v1": (0, 10), "a1": (0, 10)}),
    ("speed-divides-run-time", "first-fit", ["a100", "v100"], {"a100": 2.0},
     [("a", 0, 100, 8, "a100"), ("v", 0, 100, 8, "v100")], {"a": (0, 50), "v": (0, 100)}),
    ("slowest-model-sets-the-pace", "first-fit", ["a100", "v100"], {"a100": 2.0, "v100": 0.5},
     [("x", 0, 100, 16, "")], {"x": (0, 200)}),
]  # fmt: skip


@pytest.mark.parametrize("placement,models,speeds,rows,expected", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_jobs_run_on_their_model_at_its_speed(placement, models, speeds, rows, expected) -> None:
    done = _run(_cluster(models, speeds, PolicySpec(placement=placement)), rows)
    assert {k: done[k][:2] for k in expected} == expected
    for job_id, _, _, _, model in rows:
        if model:
            assert {models[n] for n in done[job_id][2]} == {model}


# EASY backfill (fifo, first-fit) when the head asks for a GPU model: its reservation counts that
# model's GPUs only. (id, node models, jobs (id, submit, duration, GPUs, model), job -> (start, end))
BACKFILL = [
    # The head waits for the h100 node (shadow 100); counted over every GPU, a1's end at 10 was
    # its shadow and b, ending at 52, could not go onto the idle a100 GPUs meanwhile.
    ("others-backfill-onto-other-models", ["a100", "h100"],
     [("h1", 0, 100, 8, "h100"), ("a1", 0, 10, 4, "a100"), ("H", 1, 10, 8, "h100"), ("b", 2, 50, 4, "")],
     {"H": (100, 110), "b": (2, 52)}),
    # Counted over every GPU, 4 a100 GPUs looked spare at the shadow (100), so the long 2-GPU
    # job L backfilled onto n1's free h100 GPUs and H, which needs both h100 nodes, waited for it.
    ("no-backfill-into-the-heads-model", ["h100", "h100", "a100"],
     [("r1", 0, 100, 8, "h100"), ("r2", 0, 100, 6, "h100"), ("r3", 0, 200, 4, "a100"), ("H", 1, 10, 16, "h100"),
      ("L", 2, 1000, 2, "")],
     {"H": (100, 110), "L": (100, 1100)}),
]  # fmt: skip


@pytest.mark.parametrize("models,rows,expected", [c[1:] for c in BACKFILL], ids=[c[0] for c in BACKFILL])
def test_backfill_reserves_the_heads_gpu_model(models, rows, expected) -> None:
    done = _run(_cluster(models, policy=PolicySpec(placement="first-fit", backfill=True)), rows)
    assert {k: done[k][:2] for k in expected} == expected


def test_a_preemptive_rerank_preempts_only_where_the_queued_job_can_run() -> None:
    # srtf, one a100 and one h100 node: the 5 s h100 job outranks both running jobs, but only the
    # h100 one (90 s left) holds GPUs it can use; counted as one pool, the a100 job (190 s left,
    # last in rank) was the victim, and the short job still could not start.
    cluster = _cluster(["a100", "h100"], policy=PolicySpec(queue="srtf", checkpoint_seconds=0.0))
    rows = [("a", 0, 200, 8, "a100"), ("h", 0, 100, 8, "h100"), ("short", 10, 5, 8, "h100")]
    jobs = build_jobs([(i, s, d, g, {"model": m}) for i, s, d, g, m in rows])
    done = {j.job_id: j for j in simulate(cluster, jobs).finished}
    assert (done["short"].first_start, done["short"].end) == (10, 15)
    assert (done["a"].preemptions, done["a"].end) == (0, 200)
    assert (done["h"].preemptions, done["h"].end) == (1, 105)


def test_a_preempted_job_keeps_its_work_in_speed_one_seconds() -> None:
    # srtf: the 100 s job starts on the 2x a100 node, runs 10 s (20 s of work) and is preempted
    # by a 5 s job; the 80 s of work left take 40 s there again.
    cluster = _cluster(["a100"], {"a100": 2.0}, PolicySpec(queue="srtf", checkpoint_seconds=0.0))
    done = _run(cluster, [("long", 0, 100, 8, "a100"), ("short", 10, 5, 8, "a100")])
    assert (done["short"][:2], done["long"][:2]) == ((10, 12.5), (0, 52.5))


REFUSED = [
    ("unknown-model", 1, "h100", "asks for GPU model 'h100'; partition 'p' has a100, v100"),
    ("more-than-the-model-has", 9, "a100", "asks for 9 GPUs of model 'a100'; partition 'p' has 8"),
]


@pytest.mark.parametrize("gpus,model,reason", [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_submit_refuses_a_model_the_partition_cannot_give(gpus, model, reason) -> None:
    sched = Scheduler(_cluster(["a100", "v100"]))
    (job,) = build_jobs([("j", 0, 1, gpus, {"model": model})])
    assert sched.submit(job, 0).rejects[0].reason == reason


def test_a_partition_without_models_ignores_the_model_asked_for() -> None:
    done = _run(_cluster(["", ""]), [("j", 0, 10, 16, "V100M32")])
    assert done["j"][:2] == (0, 10)


@pytest.mark.parametrize("placer", [Consolidate(), TopologyAware(), FirstFit()], ids=lambda p: p.name)
def test_a_job_of_one_model_may_need_more_of_its_nodes_than_the_partition_would(placer: Placer) -> None:
    # a100 nodes of 1 and 2 GPUs beside an 8-GPU h100: 3 a100 GPUs need both a100 nodes. Sized
    # against the whole partition, consolidate wanted one node (the h100 could hold 3) and waited forever.
    ledger = build_ledger({"l0": [1, 2, 8]})
    assert place_on(placer, ledger, 3, 0.0, frozenset({0, 1})) in (((1, 2), (0, 1)), ((0, 1), (1, 2)))
    assert ledger.min_nodes(3) == 1  # the whole partition's sizing is back after the call


def test_place_on_restores_the_nodes_out_of_service() -> None:
    ledger = build_ledger({"l0": [8, 8, 8]})
    ledger.set_out_of_service([2])
    assert place_on(FirstFit(), ledger, 4, 0.0, frozenset({1, 2})) == ((1, 4),)
    assert ledger.out_of_service() == (2,) and ledger.free_gpus == 16
