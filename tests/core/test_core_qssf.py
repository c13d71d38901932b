"""QSSF's estimator settings: the per-partition prior (`qssf_prior`), how it is read from a policy's
params, and that it decides only for jobs the shared history knows nothing like."""

from __future__ import annotations

import dataclasses
import math

import pytest

from gputwin.core.history import DEFAULT_PRIOR, UNKNOWN, HistoryEstimator, or_prior
from gputwin.core.model import ClusterSpec, JobSpec, PolicySpec
from gputwin.core.policies import make_policy, qssf_prior
from gputwin.core.scheduler import Scheduler
from gputwin.sim.engine import simulate

ONE_NODE = {"l0": [8]}


@pytest.mark.parametrize(
    ("params", "prior"),
    [
        pytest.param({}, DEFAULT_PRIOR, id="unset-is-3600"),
        pytest.param({"qssf_prior": 900}, 900.0, id="int"),
        pytest.param({"qssf_prior": 1.5}, 1.5, id="float"),
        pytest.param({"qssf_prior": "900"}, 900.0, id="numeric-string"),
        pytest.param({"qssf_prior": 0}, 0.0, id="zero"),
        pytest.param({"las_thresholds": "10", "qssf_prior": 7}, 7.0, id="other-params-ignored"),
    ],
)
def test_qssf_prior_is_read_from_params(params: dict[str, object], prior: float) -> None:
    assert qssf_prior(params) == prior


@pytest.mark.parametrize("raw", [-1, "soon", True, math.nan, math.inf, None, [60]], ids=lambda r: repr(r))
def test_a_bad_qssf_prior_names_the_param(raw: object) -> None:
    with pytest.raises(ValueError, match=r"^qssf_prior: expected seconds \(a number >= 0\), got "):
        make_policy("qssf", {"qssf_prior": raw})


@pytest.mark.parametrize(
    ("predicted", "prior", "used"),
    [(UNKNOWN, 60.0, 60.0), (5.0, 60.0, 5.0), (0.0, 60.0, 0.0)],
)
def test_the_prior_stands_in_only_for_an_unknown_prediction(
    predicted: float, prior: float, used: float
) -> None:
    assert or_prior(predicted, prior) == used


def test_the_built_in_estimator_leaves_the_unknown_to_the_policy() -> None:
    assert math.isnan(HistoryEstimator().predict(JobSpec("u", 0, 1, 1, "x")))


# One 8-GPU node. F (2 GPUs, 5 s) and O (6 GPUs, 100 s) start at 0. A (5 GPUs) arrives at 1, when
# nothing has finished: its prediction is unknown, so its key is prior x 5. F finishes at 5 and
# teaches the history 5 s; B (5 GPUs) arrives at 6 and is predicted 5 s: key 25. A and B cannot run
# together, so when O ends at 100 the prior alone decides which goes first (ties: arrival order).
PRIOR_JOBS = [("F", 0, 5, 2), ("O", 0, 100, 6), ("A", 1, 10, 5), ("B", 6, 10, 5)]


@pytest.mark.parametrize(
    ("params", "first"),
    [
        pytest.param({}, "B", id="default-3600"),
        pytest.param({"qssf_prior": 3600}, "B", id="explicit-3600"),
        pytest.param({"qssf_prior": 6}, "B", id="6x5-behind-25"),
        pytest.param({"qssf_prior": 5}, "A", id="tie-keeps-arrival-order"),
        pytest.param({"qssf_prior": "4"}, "A", id="4x5-ahead-of-25"),
        pytest.param({"qssf_prior": 0}, "A", id="zero"),
    ],
)
def test_the_prior_ranks_unknown_jobs_against_learnt_ones(cluster, jobs, params, first) -> None:
    out = simulate(cluster(ONE_NODE, PolicySpec(queue="qssf", params=params)), jobs(PRIOR_JOBS))
    starts = {j.job_id: j.first_start for j in out.finished}
    second = "A" if first == "B" else "B"
    assert (starts[first], starts[second]) == (100, 110)


def _two_partitions(cluster, priors: dict[str, dict[str, object]]) -> ClusterSpec:
    spec = cluster({"l0": [8], "l1": [8]}, PolicySpec(queue="qssf"),
                   partitions=[("p1", [0], ["t1"]), ("p2", [1], ["t2"])])  # fmt: skip
    parts = tuple(
        dataclasses.replace(p, policy=dataclasses.replace(p.policy, params=priors[p.name]))
        for p in spec.partitions
    )
    return dataclasses.replace(spec, partitions=parts)


def test_each_partition_uses_its_own_prior(cluster, jobs) -> None:
    # The same jobs in both partitions; the history is shared, the prior is not.
    rows = [(f"{job_id}{n}", submit, duration, gpus, {"task_type": f"t{n}"})
            for n in (1, 2) for job_id, submit, duration, gpus in PRIOR_JOBS]  # fmt: skip
    spec = _two_partitions(cluster, {"p1": {"qssf_prior": 1}, "p2": {}})
    starts = {j.job_id: j.first_start for j in simulate(spec, jobs(rows)).finished}
    assert (starts["A1"], starts["B1"]) == (100, 110)  # prior 1: unknown A goes first
    assert (starts["B2"], starts["A2"]) == (100, 110)  # default 3600: learnt B goes first


def test_an_estimators_own_prior_overrides_the_partitions(cluster) -> None:
    spec = cluster(ONE_NODE, PolicySpec(queue="qssf", params={"qssf_prior": 3600}))
    sched = Scheduler(spec, estimator=HistoryEstimator(prior=2.0))
    sched.submit(JobSpec("U", 0, 10, 4, "x"), 0)
    (job,) = sched.partitions["p"].queued_jobs()
    assert sched.partitions["p"].policy.key(job, 0) == (8.0,)
