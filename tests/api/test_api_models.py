"""The v1alpha1 models on their own: wire names, bounds, names, hostlists, schema descriptions."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from gputwin.api.meta import expand_hostlist
from gputwin.api.v1alpha1 import (
    KINDS,
    GPUPartition,
    SchedulingPolicy,
    SwitchTopology,
    TraceReplay,
)
from gputwin.api.workloads import MAX_SEARCH_TRIALS, search_vocabulary


def doc(kind: str, spec: dict[str, Any], name: str = "x") -> dict[str, Any]:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}


PARTITION = {"topology": "t", "taskTypes": ["a"], "nodes": "n1"}
REPLAY = {"trace": {"file": "a"}, "topology": "t"}


@pytest.mark.parametrize(
    ("text", "nodes"),
    [
        ("gpu[001-003]", ["gpu001", "gpu002", "gpu003"]),
        ("gpu[1-2,5],cpu7", ["gpu1", "gpu2", "gpu5", "cpu7"]),
        ("b[2-1]x", None),
        ("rack[1-2]-n[1-2]", ["rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"]),
        ("z9,a1", ["z9", "a1"]),  # declaration order, not sorted
        ("gpu[01-", None),
        ("gpu[a-c]", None),
        ("gpu[1-2],gpu2", None),  # a node twice
        ("", None),
        ("gpu[1-999999]", None),  # the library refuses huge ranges
    ],
)
def test_hostlist_expansion(text: str, nodes: list[str] | None) -> None:
    if nodes is None:
        with pytest.raises(ValueError):
            expand_hostlist(text)
    else:
        assert expand_hostlist(text) == nodes


@pytest.mark.parametrize(
    ("name", "ok"),
    [
        ("train", True),
        ("a", True),
        ("6214e9", True),
        ("gpu.pool-1", True),
        ("x" * 253, True),
        ("x" * 254, False),
        ("Train", False),
        ("-train", False),
        ("train-", False),
        ("train_a", False),
        ("a..b", False),
        ("", False),
    ],
)
def test_metadata_name_is_dns1123_subdomain(name: str, ok: bool) -> None:
    data = doc("SchedulingPolicy", {}, name=name)
    if ok:
        assert SchedulingPolicy.model_validate(data).metadata.name == name
    else:
        with pytest.raises(ValidationError) as caught:
            SchedulingPolicy.model_validate(data)
        assert [e["loc"] for e in caught.value.errors()] == [("metadata", "name")]


@pytest.mark.parametrize(
    ("model", "spec", "loc"),
    [
        (SchedulingPolicy, {"queue": {"polcy": "sjf"}}, ("spec", "queue", "polcy")),
        (SchedulingPolicy, {"sizing": {"allowedGpus": [1]}}, ("spec", "sizing", "allowedGpus")),
        (SchedulingPolicy, {"sizing": {"allowedGPUs": [0]}}, ("spec", "sizing", "allowedGPUs", 0)),
        (SchedulingPolicy, {"sizing": {"maxFactor": 0.5}}, ("spec", "sizing", "maxFactor")),
        (
            SchedulingPolicy,
            {"preemption": {"checkpointSeconds": -1}},
            ("spec", "preemption", "checkpointSeconds"),
        ),
        (SchedulingPolicy, {"queue": {"backfill": "yes"}}, ("spec", "queue", "backfill")),
        (GPUPartition, {**PARTITION, "maxGPUsPerJob": -1}, ("spec", "maxGPUsPerJob")),
        (GPUPartition, {**PARTITION, "priorityTier": 70000}, ("spec", "priorityTier")),
        (GPUPartition, {**PARTITION, "taskTypes": [""]}, ("spec", "taskTypes", 0)),
        (GPUPartition, {"topology": "t", "taskTypes": ["a"]}, ("spec",)),
        (
            SwitchTopology,
            {"switches": [], "nodeGroups": [{"switch": "s", "nodes": "n1"}]},
            ("spec", "switches"),
        ),
        (
            SwitchTopology,
            {
                "switches": [{"name": "s"}],
                "nodeGroups": [{"switch": "s", "nodes": "n1"}],
                "commOverhead": {"perTier": -0.1},
            },
            ("spec", "commOverhead", "perTier"),
        ),
        (
            SwitchTopology,
            {
                "switches": [{"name": "s"}],
                "nodeGroups": [{"switch": "s", "nodes": "n1"}],
                "commOverhead": {"perTier": float("nan")},
            },
            ("spec", "commOverhead", "perTier"),
        ),
        (
            TraceReplay,
            {"trace": {"file": "a", "sacct": {"start": "now-1day"}}, "topology": "t"},
            ("spec", "trace"),
        ),
        (TraceReplay, {"trace": {"file": "a"}, "topology": "t", "objective": "speed"}, ("spec", "objective")),
        (TraceReplay, {**REPLAY, "search": {"budget": 0}}, ("spec", "search", "budget")),
        (TraceReplay, {**REPLAY, "search": {"budget": 101}}, ("spec", "search", "budget")),
        (TraceReplay, {**REPLAY, "search": {"budget": "20"}}, ("spec", "search", "budget")),
        (TraceReplay, {**REPLAY, "search": {"seed": -1}}, ("spec", "search", "seed")),
        (TraceReplay, {**REPLAY, "search": {"trials": 5}}, ("spec", "search", "trials")),
        (TraceReplay, {**REPLAY, "search": {"space": ["sjf"]}}, ("spec", "search", "space")),
    ],
)
def test_invalid_specs_point_at_the_field(
    model: type[BaseModel], spec: dict[str, Any], loc: tuple[Any, ...]
) -> None:
    with pytest.raises(ValidationError) as caught:
        model.model_validate(doc(model.__name__, spec))
    assert [e["loc"] for e in caught.value.errors()] == [loc]


def test_defaults_and_snake_case_construction() -> None:
    policy = SchedulingPolicy.model_validate(doc("SchedulingPolicy", {}))
    assert (policy.spec.queue.policy, policy.spec.placement.policy, policy.spec.sizing.policy) == (
        "fifo",
        "first-fit",
        "as-requested",
    )
    assert (policy.spec.placement.max_wait_seconds, policy.spec.sizing.max_factor) == (300.0, 2.0)
    by_name = GPUPartition.model_validate(doc("GPUPartition", {**PARTITION, "max_gpus_per_job": 4}))
    assert by_name.spec.max_gpus_per_job == 4
    dumped = by_name.model_dump(by_alias=True, exclude_none=True)
    assert dumped["apiVersion"] == "gputwin.io/v1alpha1" and dumped["spec"]["maxGPUsPerJob"] == 4


def test_server_filled_metadata_is_ignored() -> None:
    data = doc("SchedulingPolicy", {})
    data["metadata"] |= {"uid": "123", "resourceVersion": "7", "labels": {"team": "a"}}
    assert SchedulingPolicy.model_validate(data).metadata.labels == {"team": "a"}


def test_params_keep_their_scalar_types() -> None:
    params = {"qssf_prior": "900", "min_samples": 2, "las_thresholds": 0.5}
    policy = SchedulingPolicy.model_validate(doc("SchedulingPolicy", {"params": params}))
    assert policy.spec.params == params
    assert [type(v) for v in policy.spec.params.values()] == [str, int, float]


def _undescribed(schema: dict[str, Any]) -> list[str]:
    missing = []
    for where in [schema, *schema.get("$defs", {}).values()]:
        for prop, body in where.get("properties", {}).items():
            if "description" not in body:
                missing.append(f"{where.get('title')}.{prop}")
    return missing


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_field_is_described_for_the_crd_schema(kind: str) -> None:
    schema = KINDS[kind].model_json_schema(by_alias=True)
    assert _undescribed(schema) == []
    assert schema["additionalProperties"] is False


@pytest.mark.parametrize(
    ("spec", "budget", "seed", "space", "candidates"),
    [
        ({**REPLAY, "search": {}}, 20, 0, None, 0),  # the defaults
        ({**REPLAY, "search": {"budget": 100, "seed": 7}}, 100, 7, None, 0),  # the maximum budget
        # Together with candidates; the space is kept as written, for gputwin.sim.space to check.
        ({**REPLAY, "candidates": [{"queue": "sjf"}],
          "search": {"space": {"queue": ["sjf", "qssf"], "max_wait": {"low": 0, "high": 900}}}},
         20, 0, {"queue": ["sjf", "qssf"], "max_wait": {"low": 0, "high": 900}}, 1),
    ],
)  # fmt: skip
def test_a_replay_search_and_its_defaults(
    spec: dict[str, Any], budget: int, seed: int, space: Any, candidates: int
) -> None:
    replay = TraceReplay.model_validate(doc("TraceReplay", spec))
    assert replay.spec.search is not None
    assert (replay.spec.search.budget, replay.spec.search.seed, replay.spec.search.space) == (
        budget,
        seed,
        space,
    )
    assert len(replay.spec.candidates) == candidates
    assert TraceReplay.model_validate(doc("TraceReplay", REPLAY)).spec.search is None  # no search by default


def test_a_search_budget_above_the_maximum_names_the_bound() -> None:
    with pytest.raises(ValidationError) as caught:
        TraceReplay.model_validate(
            doc("TraceReplay", {**REPLAY, "search": {"budget": MAX_SEARCH_TRIALS + 1}})
        )
    (error,) = caught.value.errors()
    assert error["msg"] == f"Input should be less than or equal to {MAX_SEARCH_TRIALS}"


def test_the_search_vocabulary_is_what_a_schedulingpolicy_can_say() -> None:
    vocabulary = search_vocabulary()
    assert set(vocabulary) == {"queue", "placement", "sizing"}
    assert sorted(vocabulary["queue"]) == ["fifo", "las", "priority", "qssf", "sjf", "srtf"]
    assert sorted(vocabulary["placement"]) == ["consolidate", "first-fit", "random", "topology-aware"]
    for name in vocabulary["placement"]:
        policy = SchedulingPolicy.model_validate(doc("SchedulingPolicy", {"placement": {"policy": name}}))
        assert policy.spec.placement.policy == name
