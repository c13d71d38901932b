"""The Kubernetes snapshot from raw objects (no API server): running jobs from their pods, queue order,
nodes out of service, plain Pods, and one-line refusals. The real API server + KWOK test is
tests/operator/test_operator_forecast.py."""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from snapshot_clusters import declared

from gputwin.adapters.kube.snapshot import KubeSnapshotError, build_snapshot, declared_cluster
from gputwin.twin.forecast import forecast

Obj = dict[str, Any]
T0 = 1_780_000_000.0  # 2026-05-28T20:26:40Z
NOW = T0 + 600.0

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "n[0-3]", gpusPerNode: 8}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: train}
spec: {topology: t, taskTypes: [train], nodes: "n[0-1]", policy: prio}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: infer}
spec: {topology: t, taskTypes: [infer], nodes: "n[2-3]"}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {name: prio}
spec: {queue: {policy: priority}, placement: {policy: first-fit}}
"""


def cluster() -> Any:
    return declared(CLUSTER)


def at(seconds: float) -> str:
    from gputwin.api.status import rfc3339

    return rfc3339(T0 + seconds)


def job(name: str, task: str, gpus: int, phase: str, submit: float, priority: int = 0, **status: Any) -> Obj:
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": at(submit)},
            "spec": {"taskType": task, "gpus": gpus, "priority": priority, "durationSeconds": 3600},
            "status": {"phase": phase, "submitTime": at(submit), **status}}  # fmt: skip


def pod(name: str, gpus: int, node: str = "", job_id: str = "", task: str = "infer") -> Obj:
    notes = {"gputwin.io/job-id": job_id} if job_id else {}
    spec: Obj = {"schedulerName": "gputwin", "containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": str(gpus)}}}]}  # fmt: skip
    if node:
        spec["nodeName"] = node
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "creationTimestamp": at(10),
            "annotations": notes, "labels": {"gputwin.io/task-type": task}},
            "spec": spec, "status": {"phase": "Running" if node else "Pending", "startTime": at(20)}}  # fmt: skip


def node(name: str, ready: bool = True, cordoned: bool = False) -> Obj:
    return {"kind": "Node", "metadata": {"name": name, "labels": {"gputwin.io/switch": "leaf0"}},
            "spec": {"unschedulable": True} if cordoned else {},
            "status": {"allocatable": {"nvidia.com/gpu": "8"},
                       "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}  # fmt: skip


ALLOC = {"slots": [{"node": "n0", "gpus": 8}], "since": at(100), "runSeconds": 3600}
JOBS = [
    job("run-pods", "train", 8, "Running", 0, partition="train", allocation=ALLOC),
    job("run-alloc", "train", 4, "Running", 5, partition="train",
        allocation={"slots": [{"node": "n1", "gpus": 4}], "since": at(200), "runSeconds": 60}),
    job("low", "train", 8, "Queued", 30, priority=1, partition="train"),
    job("high", "train", 8, "Queued", 40, priority=9, partition="train"),
    job("unrouted", "infer", 2, "Pending", 35),
    job("done", "train", 8, "Succeeded", 1, partition="train"),
]
PODS = [pod("rp-0", 4, "n1", "ns/run-pods", "train"), pod("rp-1", 4, "n1", "ns/run-pods", "train"),
        pod("plain-bound", 2, "n2"), pod("plain-waiting", 1)]  # fmt: skip
NODES = [node("n0"), node("n1"), node("n2", cordoned=True), node("n3", ready=False)]


def test_snapshot_of_gpujobs_pods_and_nodes() -> None:
    snap = build_snapshot(cluster(), JOBS, PODS, NODES, NOW)
    running = {r.job_id: r for r in snap.running}
    assert running["ns/run-pods"].slots == (("n1", 8),)  # its pods say n1, not the allocation's n0
    assert running["ns/run-pods"].start == T0 + 100 and running["ns/run-pods"].estimate == 3600
    assert running["ns/run-alloc"].slots == (("n1", 4),)  # no pods: the allocation
    assert running["pod:ns/plain-bound"].slots == (("n2", 2),) and running["pod:ns/plain-bound"].start == T0 + 20
    # train ranks by priority (its policy), infer in submit order; Succeeded jobs are not there
    assert [(p.job_id, p.partition) for p in snap.pending] == [
        ("pod:ns/plain-waiting", "infer"), ("ns/unrouted", "infer"), ("ns/high", "train"), ("ns/low", "train")]
    assert {(o.node, o.state) for o in snap.out_of_service} == {("n2", "cordoned (spec.unschedulable)"),
                                                                  ("n3", "NotReady")}  # fmt: skip


def test_a_forecast_runs_on_the_kube_snapshot() -> None:
    snap = build_snapshot(cluster(), JOBS, PODS, NODES, NOW)
    result = forecast(cluster(), snap, samples=4, horizon=86400.0)
    by_id = {j.job_id: j for j in result.jobs}
    # n2 and n3 are out: nothing of infer starts within the horizon but after plain-bound... n2 cordoned
    assert by_id["ns/unrouted"].start_p50 is None
    assert by_id["ns/high"].start_p50 is not None and by_id["ns/low"].start_p50 is not None
    assert by_id["ns/high"].start_p50 <= by_id["ns/low"].start_p50


@pytest.mark.parametrize(("objs", "message"), [
    ([job("bad", "train", 8, "Sideways", 0)], "GPUJob/ns/bad: status.phase"),
    ([job("over", "train", 8, "Running", 0, partition="train",
          allocation={"slots": [{"node": "n0", "gpus": 9}], "since": at(1), "runSeconds": 1})],
     "snapshot: running[0].slots: 9 GPUs on n0, which has 8"),
], ids=["bad-phase", "more-gpus-than-the-node"])  # fmt: skip
def test_unusable_objects_are_refused_in_one_line(objs: list[Obj], message: str) -> None:
    with pytest.raises(KubeSnapshotError) as caught:
        build_snapshot(cluster(), objs, [], NODES, NOW)
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_no_partition_is_refused() -> None:
    docs = [d for d in yaml.safe_load_all(CLUSTER) if d["kind"] == "SwitchTopology"]
    with pytest.raises(KubeSnapshotError, match="GPUPartition: none is declared"):
        declared_cluster(docs, [], [])
