"""MIG profiles in the Kubernetes snapshot (`gpuProfile` GPUJobs): each is its compute slices of one
MIG-partitioned GPU (`gpu_profile`, `gpu_milli` its slices' share), on the GPU its pod's
`gputwin.io/gpu-slot` annotation names, as the simulator holds it; before, each counted as a whole
GPU (seven 1g slices on a 2-GPU node were 7 GPUs: the twin could not hold them). Table-driven on raw
objects; the real API server + KWOK case is in tests/operator/test_operator_mig_live.py."""

from __future__ import annotations

from typing import Any

import pytest
from snapshot_clusters import declared

from gputwin.adapters.kube.snapshot import build_snapshot
from gputwin.core.scheduler import Scheduler
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import Held

Obj = dict[str, Any]
NOW = 1_780_000_600.0
SUBMIT = "2026-05-28T20:26:40Z"

CLUSTER = """
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {name: t}
spec:
  switches: [{name: leaf0}]
  nodeGroups: [{switch: leaf0, nodes: "n[0-0]", gpusPerNode: 2, model: h100}]
  migProfiles: {h100: [1g.10gb, 2g.20gb, 3g.40gb, 4g.40gb, 7g.80gb]}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: infer}
spec: {topology: t, taskTypes: [infer], nodes: "n[0-0]"}
"""


def cluster() -> Any:
    return declared(CLUSTER)


def job(name: str, ask: str, phase: str = "Running") -> Obj:
    """A GPUJob asking for `ask`: a MIG profile, `0.25` (a fraction) or `whole`."""
    status: Obj = {"phase": phase, "partition": "infer", "submitTime": SUBMIT}
    if phase == "Running":
        status["allocation"] = {"slots": [{"node": "n0", "gpus": 1}], "since": "2026-05-28T20:28:20Z",
                                "runSeconds": 600}  # fmt: skip
    spec: Obj = {"taskType": "infer", "gpus": 1, "durationSeconds": 3600}
    if ask == "0.25":
        spec["gpuFraction"] = 0.25
    elif ask != "whole":
        spec |= {"gpuModel": "h100", "gpuProfile": ask}
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
            "metadata": {"name": name, "namespace": "ns", "creationTimestamp": SUBMIT},
            "spec": spec, "status": status}  # fmt: skip


def mig_pod(name: str, profile: str, slot: int) -> Obj:
    """A MIG job's pod as `job_pod` makes it: one nvidia.com/mig-<profile>, its slot annotated."""
    notes = {"gputwin.io/job-id": f"ns/{name}", "gputwin.io/mig-profile": profile}
    if slot >= 0:
        notes["gputwin.io/gpu-slot"] = str(slot)
    limits = {f"nvidia.com/mig-{profile}": "1"}
    return {"kind": "Pod", "metadata": {"name": f"{name}-0", "namespace": "ns", "annotations": notes},
            "spec": {"schedulerName": "gputwin", "nodeName": "n0",
                     "containers": [{"name": "c", "resources": {"limits": limits, "requests": limits}}]},
            "status": {"phase": "Running"}}  # fmt: skip


def share_pod(name: str, reservation: str) -> Obj:
    notes = {"gputwin.io/job-id": f"ns/{name}", "gputwin.io/gpu-fraction-milli": "250",
             "gputwin.io/gpu-reservation": reservation, "gputwin.io/gpu-reservation-namespace": "ns"}  # fmt: skip
    return {"kind": "Pod", "metadata": {"name": f"{name}-0", "namespace": "ns", "annotations": notes},
            "spec": {"schedulerName": "gputwin", "nodeName": "n0", "containers": [{"name": "c"}]},
            "status": {"phase": "Running"}}  # fmt: skip


def reservation(name: str, slot: int) -> Obj:
    return {"kind": "Pod", "metadata": {"name": name, "namespace": "ns", "labels": {"gputwin.io/gpu-reservation": str(slot)}},
            "spec": {"schedulerName": "gputwin", "nodeName": "n0", "containers": [
                {"name": "reservation", "resources": {"requests": {"nvidia.com/gpu": "1"}}}]},
            "status": {"phase": "Running"}}  # fmt: skip


# job -> (profile, slot its pod names; -2: no pod), GPUs the twin holds on n0 (of 2)
CASES: dict[str, tuple[dict[str, tuple[str, int]], int]] = {
    "seven-1g-slices-on-one-gpu": ({f"s{i}": ("1g.10gb", 0) for i in range(7)}, 1),
    "3g-beside-4g-on-one-gpu": ({"a": ("3g.40gb", 0), "b": ("4g.40gb", 0)}, 1),
    "kept-apart-on-two-gpus": ({"a": ("1g.10gb", 0), "b": ("2g.20gb", 1)}, 2),
    "no-slot-annotation-the-twin-packs": ({"a": ("1g.10gb", -1), "b": ("1g.10gb", -1)}, 1),
    "no-pods-the-twin-packs": ({"a": ("2g.20gb", -2), "b": ("2g.20gb", -2)}, 1),
    "7g-is-a-whole-gpu": ({"a": ("7g.80gb", -1), "b": ("1g.10gb", 1)}, 2),
}


@pytest.mark.parametrize(("profiles", "held"), CASES.values(), ids=CASES.keys())
def test_running_mig_jobs_hold_their_slices_of_the_gpus_their_pods_name(
        profiles: dict[str, tuple[str, int]], held: int) -> None:  # fmt: skip
    pods = [mig_pod(name, profile, slot) for name, (profile, slot) in profiles.items() if slot >= -1]
    snap = build_snapshot(cluster(), [job(name, p) for name, (p, _) in profiles.items()], pods, None, NOW)
    got = {r.job_id[3:]: r for r in snap.running}
    for name, (profile, slot) in profiles.items():
        run = got[name]
        assert (run.gpu_profile, run.model, run.slots) == (profile, "h100", (("n0", 1),))
        assert run.share_gpu == (slot if slot >= 0 and profile != "7g.80gb" else -1)
        assert run.gpu_milli == {"1": 143, "2": 286, "3": 429, "4": 571, "7": 1000}[profile[0]]
    scheduler = Scheduler(cluster())
    seeded = Held(cluster(), snap, snap.running).seed(scheduler, [3600.0] * len(snap.running), [])
    assert not seeded.left_out
    assert 2 - scheduler.partitions["infer"].ledger.free_of(0) == held


def test_a_fraction_never_takes_the_index_of_a_mig_gpu() -> None:
    """The reservation pod's slot label says 0, as the MIG job's slot: two GPUs, not one merged."""
    jobs = [job("m", "1g.10gb"), job("f", "0.25")]
    pods = [mig_pod("m", "1g.10gb", 0), share_pod("f", "r0"), reservation("r0", 0)]
    snap = build_snapshot(cluster(), jobs, pods, None, NOW)
    gpu = {r.job_id: r.share_gpu for r in snap.running}
    assert gpu["ns/m"] == 0 and gpu["ns/f"] not in (-1, 0)
    scheduler = Scheduler(cluster())
    seeded = Held(cluster(), snap, snap.running).seed(scheduler, [3600.0] * 2, [])
    assert not seeded.left_out and scheduler.partitions["infer"].ledger.free_of(0) == 0


def test_a_waiting_mig_job_carries_its_profile_and_model() -> None:
    snap = build_snapshot(cluster(), [job("q", "2g.20gb", "Queued")], [], None, NOW)
    assert [(p.job_id, p.gpus, p.gpu_milli, p.gpu_profile, p.model) for p in snap.pending] == [
        ("ns/q", 1, 286, "2g.20gb", "h100")]


def test_the_forecast_starts_a_slice_at_once_beside_six_while_a_whole_gpu_job_waits() -> None:
    """GPU 0 holds six 1g slices, GPU 1 a whole-GPU job: a queued 1g fits the seventh slice now,
    a queued whole-GPU job waits for an end (as a whole GPU each, the six would not even fit)."""
    running = [job(f"s{i}", "1g.10gb") for i in range(6)] + [job("w", "whole")]
    pods = [mig_pod(f"s{i}", "1g.10gb", 0) for i in range(6)]
    queued = [job("q1g", "1g.10gb", "Queued"), job("qw", "whole", "Queued")]
    snap = build_snapshot(cluster(), running + queued, pods, None, NOW)
    result = forecast(cluster(), snap, samples=1, sigma=0.0, horizon=86400.0)
    assert not result.left_out
    start = {j.job_id: j.start_p50 for j in result.jobs}
    assert start["ns/q1g"] == pytest.approx(NOW)
    assert start["ns/qw"] is not None and start["ns/qw"] > NOW + 60
