"""The read-only views over raw API objects (gputwin.api.bodies): every accessor on a full object,
a minimal one and odd ones (no metadata, null parts), and that a view copies nothing and writes nothing."""

from __future__ import annotations

from typing import Any

import pytest

from gputwin.api.bodies import EMPTY, Body, Pod, key_of

FULL: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {
        "name": "job-a-0",
        "namespace": "team",
        "uid": "u-1",
        "generation": 3,
        "resourceVersion": "42",
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "deletionTimestamp": "2026-01-01T00:05:00Z",
        "labels": {"gputwin.io/attempt": "2"},
        "annotations": {"gputwin.io/job-id": "team/a"},
        "ownerReferences": [{"kind": "GPUJob", "name": "a", "uid": "j-1"}],
    },
    "spec": {"nodeName": "node-1", "schedulerName": "gputwin"},
    "status": {"phase": "Running"},
}
MINIMAL: dict[str, Any] = {"kind": "Node", "metadata": {"name": "node-1"}}
NO_METADATA: dict[str, Any] = {"kind": "Pod"}
NULLS: dict[str, Any] = {
    "kind": None,
    "metadata": {"name": None, "namespace": None, "labels": None, "annotations": None, "generation": None,
                 "deletionTimestamp": None, "ownerReferences": None},
    "spec": None,
    "status": None,
}
NULL_METADATA: dict[str, Any] = {"metadata": None}
ODD_TYPES: dict[str, Any] = {"metadata": {"name": 7, "generation": "3", "resourceVersion": 12}}

# accessor -> value on FULL, MINIMAL, NO_METADATA, NULLS, NULL_METADATA, ODD_TYPES
TABLE: list[tuple[str, tuple[Any, ...]]] = [
    ("kind", ("Pod", "Node", "Pod", "", "", "")),
    ("api_version", ("v1", "", "", "", "", "")),
    ("name", ("job-a-0", "node-1", "", "", "", "7")),
    ("namespace", ("team", "", "", "", "", "")),
    ("uid", ("u-1", "", "", "", "", "")),
    ("generation", (3, None, None, None, None, None)),
    ("resource_version", ("42", "", "", "", "", "12")),
    ("creation_timestamp", ("2026-01-01T00:00:00Z", "", "", "", "", "")),
    ("deletion_timestamp", ("2026-01-01T00:05:00Z", None, None, None, None, None)),
    ("deleting", (True, False, False, False, False, False)),
    ("labels", ({"gputwin.io/attempt": "2"}, {}, {}, {}, {}, {})),
    ("annotations", ({"gputwin.io/job-id": "team/a"}, {}, {}, {}, {}, {})),
    ("owner_references", (({"kind": "GPUJob", "name": "a", "uid": "j-1"},), (), (), (), (), ())),
    ("spec", ({"nodeName": "node-1", "schedulerName": "gputwin"}, {}, {}, {}, {}, {})),
    ("status", ({"phase": "Running"}, {}, {}, {}, {}, {})),
    ("node_name", ("node-1", "", "", "", "", "")),
    ("scheduler_name", ("gputwin", "", "", "", "", "")),
    ("phase", ("Running", "", "", "", "", "")),
]
OBJECTS = [("full", FULL), ("minimal", MINIMAL), ("no-metadata", NO_METADATA), ("nulls", NULLS),
           ("null-metadata", NULL_METADATA), ("odd-types", ODD_TYPES)]  # fmt: skip
CASES = [
    pytest.param(accessor, obj, values[i], id=f"{accessor}-{label}")
    for accessor, values in TABLE
    for i, (label, obj) in enumerate(OBJECTS)
]


@pytest.mark.parametrize(("accessor", "obj", "expected"), CASES)
def test_accessor_reads_the_field_or_a_plain_default(accessor: str, obj: dict[str, Any], expected: Any) -> None:
    assert getattr(Pod(obj), accessor) == expected


@pytest.mark.parametrize(
    ("obj", "expected"),
    [
        pytest.param(FULL, ("team", "job-a-0"), id="namespaced"),
        pytest.param(MINIMAL, ("", "node-1"), id="cluster-scoped"),
        pytest.param(NO_METADATA, ("", ""), id="no-metadata"),
        pytest.param(NULLS, ("", ""), id="nulls"),
        pytest.param(NULL_METADATA, ("", ""), id="null-metadata"),
    ],
)
def test_key_is_namespace_and_name_as_view_and_as_function(obj: dict[str, Any], expected: tuple[str, str]) -> None:
    assert Body(obj).key() == expected
    assert key_of(obj) == expected


def test_body_of_none_reads_as_an_empty_object() -> None:
    body = Body(None)
    assert (body.key(), body.labels, body.spec, body.generation) == (("", ""), {}, {}, None)


@pytest.mark.parametrize("accessor", ["metadata", "labels", "annotations", "spec", "status"])
def test_view_returns_the_objects_own_mapping_not_a_copy(accessor: str) -> None:
    part = getattr(Body(FULL), accessor)
    assert part is (FULL["metadata"] if accessor == "metadata" else
                    FULL[accessor] if accessor in ("spec", "status") else FULL["metadata"][accessor])  # fmt: skip


def test_view_sees_later_changes_of_the_dict() -> None:
    obj: dict[str, Any] = {"metadata": {"name": "a"}}
    body = Body(obj)
    obj["metadata"]["labels"] = {"x": "y"}
    assert body.labels == {"x": "y"}


@pytest.mark.parametrize("attribute", ["raw", "name", "labels", "other"])
def test_view_takes_no_attributes(attribute: str) -> None:
    body = Body(FULL)
    with pytest.raises(AttributeError):
        setattr(body, attribute, {})


def test_empty_default_cannot_be_written() -> None:
    with pytest.raises(TypeError):
        Body(MINIMAL).labels["x"] = "y"  # type: ignore[index]
    assert EMPTY == {}


def test_view_holds_only_the_dict() -> None:
    assert not hasattr(Pod(FULL), "__dict__")
