"""GPU shares in the Kubernetes snapshot (`gpuFraction` GPUJobs): each is its fraction of one GPU, on
the GPU of the reservation pod its pod names, so a node holding shares is neither over-counted (a
share as a whole GPU) nor under-counted (shares the operator kept on two GPUs packed onto one).
Table-driven on raw objects; the real API server + KWOK case is in tests/operator/test_operator_forecast.py."""

from __future__ import annotations

from typing import Any

import pytest
from snapshot_clusters import declared

from gputwin.adapters.kube.snapshot import build_snapshot
from gputwin.core.scheduler import Scheduler
from gputwin.twin.seed import Held

Obj = dict[str, Any]
NOW = 1_780_000_600.0

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "n[0-0]", gpusPerNode: 2}]
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: infer}
spec: {topology: t, taskTypes: [infer], nodes: "n[0-0]"}
"""


def cluster() -> Any:
    return declared(CLUSTER)


def share_job(name: str, phase: str = "Running") -> Obj:
    status: Obj = {"phase": phase, "partition": "infer", "submitTime": "2026-05-28T20:26:40Z"}
    if phase == "Running":
        status["allocation"] = {"slots": [{"node": "n0", "gpus": 1}], "since": "2026-05-28T20:28:20Z",
                                "runSeconds": 600}  # fmt: skip
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": "2026-05-28T20:26:40Z"},
            "spec": {"taskType": "infer", "gpus": 1, "gpuFraction": 0.25, "durationSeconds": 3600},
            "status": status}  # fmt: skip


def share_pod(job: str, reservation: str, slot: int) -> Obj:
    """The share's pod as `job_pod` makes it: no nvidia.com/gpu, the reservation it uses named."""
    notes = {"gputwin.io/job-id": f"ns/{job}", "gputwin.io/gpu-fraction-milli": "250",
             "gputwin.io/gpu-reservation": reservation, "gputwin.io/gpu-reservation-namespace": "ns",
             "gputwin.io/gpu-slot": str(slot)}  # fmt: skip
    return {"kind": "Pod", "metadata": {"name": f"{job}-0", "namespace": "ns", "annotations": notes},
            "spec": {"schedulerName": "gputwin", "nodeName": "n0", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}}  # fmt: skip


def reservation(name: str, slot: int) -> Obj:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"gputwin.io/gpu-reservation": str(slot)}},
            "spec": {"schedulerName": "gputwin", "nodeName": "n0", "containers": [
                {"name": "reservation", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"}}  # fmt: skip


# (share -> reservation it names), reservation pods (name, slot label), GPUs the twin holds on n0
CASES = {
    "four-quarters-on-one-gpu": ({"a": "r0", "b": "r0", "c": "r0", "d": "r0"}, [("r0", 0)], 1),
    "kept-apart-on-two-gpus": ({"a": "r0", "b": "r1"}, [("r0", 0), ("r1", 1)], 2),
    "slot-labels-collide": ({"a": "r0", "b": "r1"}, [("r0", 0), ("r1", 0)], 2),
    "reservation-pod-gone": ({"a": "r0", "b": "gone"}, [("r0", 0)], 2),
    "label-beyond-the-gpus": ({"a": "r5", "b": "gone", "c": "r5"}, [("r5", 5)], 2),
    "no-pods-the-twin-packs": ({"a": "", "b": ""}, [], 1),
}


@pytest.mark.parametrize(("named", "reservations", "held"), CASES.values(), ids=CASES.keys())
def test_running_shares_hold_the_gpus_their_reservation_pods_hold(
        named: dict[str, str], reservations: list[tuple[str, int]], held: int) -> None:  # fmt: skip
    pods = [share_pod(job, res, 0) for job, res in named.items() if res]
    pods += [reservation(name, slot) for name, slot in reservations]
    snap = build_snapshot(cluster(), [share_job(job) for job in named], pods, None, NOW)
    assert all(r.gpu_milli == 250 and r.slots == (("n0", 1),) for r in snap.running)
    gpu_of = {r.job_id[3:]: r.share_gpu for r in snap.running}
    for a in named:  # one GPU index per reservation pod named, distinct across them
        for b in named:
            if named[a] and named[b]:
                assert (gpu_of[a] == gpu_of[b]) == (named[a] == named[b]), (a, b, gpu_of)
    assert all(gpu_of[job] == -1 for job, res in named.items() if not res)
    scheduler = Scheduler(cluster())
    seeded = Held(cluster(), snap, snap.running).seed(scheduler, [3600.0] * len(snap.running), [])
    assert not seeded.left_out
    assert 2 - scheduler.partitions["infer"].ledger.free_of(0) == held


def test_a_waiting_share_is_its_fraction() -> None:
    snap = build_snapshot(cluster(), [share_job("q", "Queued")], [], None, NOW)
    assert [(p.job_id, p.gpus, p.gpu_milli) for p in snap.pending] == [("ns/q", 1, 250)]
