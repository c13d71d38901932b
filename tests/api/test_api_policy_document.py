"""`policy_document` is `policy_spec`'s inverse: convert(inverse(p)) == p for every queue, placement
and sizing a SchedulingPolicy can name, with knobs drawn by hypothesis; and the candidate conversion."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.api.convert import (
    candidate,
    candidate_model,
    candidate_patch,
    candidate_result,
    policy_document,
    policy_spec,
)
from gputwin.api.meta import API_VERSION
from gputwin.api.v1alpha1 import SchedulingPolicy
from gputwin.api.workloads import Candidate as CandidateModel
from gputwin.api.workloads import search_vocabulary
from gputwin.core.bounds import MAX_JOB_GPUS
from gputwin.core.model import Candidate, PolicySpec

VOCABULARY = search_vocabulary()
COMBINATIONS = list(itertools.product(VOCABULARY["queue"], VOCABULARY["placement"], VOCABULARY["sizing"]))
seconds = st.floats(0.0, 86_400.0, allow_nan=False).map(lambda v: round(v, 1))


def convert(spec: dict[str, object]) -> PolicySpec:
    doc = {"apiVersion": API_VERSION, "kind": "SchedulingPolicy", "metadata": {"name": "p"}, "spec": spec}
    return policy_spec(SchedulingPolicy.model_validate(doc))


@st.composite
def policies(draw: st.DrawFn, queue: str, placement: str, sizing: str) -> PolicySpec:
    params: dict[str, object] = {
        "max_wait": draw(seconds),
        "max_factor": draw(st.floats(1.0, 64.0, allow_nan=False)),
        "allowed_gpus": tuple(sorted(draw(st.sets(st.integers(1, MAX_JOB_GPUS), max_size=4)))),
    }
    if queue == "qssf" and draw(st.booleans()):
        params["qssf_prior"] = draw(st.floats(1.0, 86_400.0, allow_nan=False))
    if queue == "las" and draw(st.booleans()):
        params["las_thresholds"] = "3600,36000"
    if sizing == "history" and draw(st.booleans()):
        params["min_samples"] = draw(st.integers(1, 50))
    return PolicySpec(queue=queue, placement=placement, sizing=sizing, backfill=draw(st.booleans()),
                      checkpoint_seconds=draw(st.none() | seconds), params=params)  # fmt: skip


@pytest.mark.parametrize(("queue", "placement", "sizing"), COMBINATIONS, ids=["/".join(c) for c in COMBINATIONS])
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_policy_document_converts_back_to_the_policy(
    queue: str, placement: str, sizing: str, data: st.DataObject
) -> None:
    policy = data.draw(policies(queue, placement, sizing))
    assert convert(policy_document(policy)) == policy


def test_policy_document_of_the_default_resource_is_the_default_resource() -> None:
    default = convert({})
    assert convert(policy_document(default)) == default
    assert "preemption" not in policy_document(default) and policy_document(default)["params"] == {}


CANDIDATES = [
    (Candidate("sjf", "consolidate", "history", True), "sjf/consolidate/history+backfill"),
    (Candidate("fifo", "first-fit", "as-requested", False), "fifo/first-fit/as-requested"),
]


@pytest.mark.parametrize(("value", "name"), CANDIDATES, ids=[n for _, n in CANDIDATES])
def test_candidate_round_trips_through_the_api_model(value: Candidate, name: str) -> None:
    assert candidate(candidate_model(value)) == value and value.name == name


def test_candidate_left_unset_takes_the_models_defaults() -> None:
    model = candidate_model(Candidate("srtf", "random"))
    assert model == CandidateModel(queue="srtf", placement="random")
    assert candidate(model) == Candidate("srtf", "random", "as-requested", False)


@pytest.mark.parametrize(("value", "name"), CANDIDATES, ids=[n for _, n in CANDIDATES])
def test_candidate_patch_gives_a_policy_the_candidates_names_and_keeps_its_knobs(value: Candidate,
                                                                                 name: str) -> None:  # fmt: skip
    base = {"queue": {"policy": "fifo"}, "placement": {"policy": "topology-aware", "maxWaitSeconds": 42.0},
            "sizing": {"policy": "as-requested", "maxFactor": 3.0}}  # fmt: skip
    patch = candidate_patch(value)
    merged = {k: {**base[k], **patch[k]} for k in base}
    policy = convert(merged)
    assert (policy.queue, policy.placement, policy.sizing, policy.backfill) == (
        value.queue, value.placement, value.sizing, value.backfill)  # fmt: skip
    assert (policy.params["max_wait"], policy.params["max_factor"]) == (42.0, 3.0)


def test_candidate_result_keeps_the_wire_formats_metrics_only() -> None:
    scores = {"jobs": 3, "avg_jct": 1.0, "avg_queue": 0.5, "p50_jct": 1.0, "p99_jct": 2.0, "p99_queue": 1.0,
              "makespan": 9.0, "gpu_utilization": 0.7, "preemptions": 0}  # fmt: skip
    result = candidate_result("current", scores, trial=None)
    kept = {k: v for k, v in scores.items() if k not in ("gpu_utilization", "preemptions")}
    assert result.metrics.model_dump() == kept
