"""Hostile objects in the Kubernetes snapshot (`gputwin.adapters.kube.snapshot.build_snapshot`): each is
refused in one line naming the object and the field, or read as the operator reads it; never a traceback.
The objects are the unit test's (tests/adapters/kube/test_kube_snapshot.py), bent one field at a time."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "adapters" / "kube"))  # the unit test's objects
from test_kube_snapshot import JOBS, NODES, NOW, PODS, at, cluster, job, node, pod  # noqa: E402

from gputwin.adapters.kube.snapshot import KubeSnapshotError, build_snapshot  # noqa: E402

Obj = dict[str, Any]
RUNNING = job("r", "train", 8, "Running", 0, partition="train",
              allocation={"slots": [{"node": "n0", "gpus": 8}], "since": at(1), "runSeconds": 1})  # fmt: skip


def bent(obj: Obj, path: str, value: object) -> Obj:
    out = copy.deepcopy(obj)
    *parents, last = path.split(".")
    where = out
    for part in parents:
        where = where[part]
    where[last] = value
    return out


REFUSED = [
    pytest.param([bent(RUNNING, "status", [1, 2])], "GPUJob/ns/r: status: want an object", id="status-a-list"),
    pytest.param([bent(RUNNING, "status.allocation.slots", [{"node": "elsewhere", "gpus": 8}])],
                 "unknown node 'elsewhere'", id="allocation-on-an-unknown-node"),
    pytest.param([bent(RUNNING, "status.allocation", None)], "a running job holds at least one node",
                 id="running-without-allocation-or-pods"),
    pytest.param([bent(RUNNING, "status.submitTime", "yesterday")], "GPUJob/ns/r: status.submitTime",
                 id="submit-time-not-rfc3339"),
    pytest.param([bent(RUNNING, "spec.gpus", -3)], "GPUJob/ns/r: spec.gpus", id="negative-gpus"),
    pytest.param([bent(RUNNING, "status.phase", None)], "GPUJob/ns/r: status.phase", id="phase-null"),
]  # fmt: skip


@pytest.mark.parametrize(("jobs", "message"), REFUSED)
def test_refused_in_one_line(jobs: list[Obj], message: str) -> None:
    with pytest.raises(KubeSnapshotError) as caught:
        build_snapshot(cluster(), jobs, [], NODES, NOW)
    assert message in str(caught.value) and "\n" not in str(caught.value)


READ = [
    pytest.param([bent(RUNNING, "status", None)], [], ("ns/r",), id="status-null-is-pending"),
    pytest.param([], [bent(pod("p", 1), "spec.containers", [{"name": "c", "resources": {
        "requests": {"nvidia.com/gpu": "lots"}}}])], ("pod:ns/p",), id="gpu-request-not-a-number"),
    pytest.param([], [pod("stray", 2, "not-declared")], (), id="plain-pod-bound-outside-the-topology"),
    pytest.param([], [bent(pod("gone", 1), "metadata.deletionTimestamp", at(5))], (), id="pod-being-deleted"),
    pytest.param([], [bent(pod("done", 1, "n0"), "status.phase", "Succeeded")], (), id="pod-ended"),
]  # fmt: skip


@pytest.mark.parametrize(("jobs", "pods", "pending"), READ)
def test_odd_objects_read_as_the_operator_reads_them(jobs: list[Obj], pods: list[Obj],
                                                     pending: tuple[str, ...]) -> None:  # fmt: skip
    snap = build_snapshot(cluster(), jobs, pods, NODES, NOW)
    assert tuple(p.job_id for p in snap.pending) == pending
    assert all(r.job_id != "pod:ns/stray" for r in snap.running)


def test_nodes_of_every_odd_shape_are_out_of_service_not_errors() -> None:
    odd = [bent(node("n0"), "status.conditions", None), bent(node("n1"), "status.allocatable", {}),
           {"kind": "Node", "metadata": {"name": "n2"}}]  # fmt: skip
    snap = build_snapshot(cluster(), JOBS, PODS, odd, NOW)
    assert {o.node for o in snap.out_of_service} == {"n0", "n1", "n2", "n3"}  # n3: no Node at all
