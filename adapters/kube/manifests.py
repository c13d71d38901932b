"""What a GPUJob's pods look like: names, labels and annotations, GPU requests, and the GPUs pods hold.

One pod per node of a placement, named `<job>-<attempt>-<i>` so a retry after a crash meets a 409
and adopts the same pod; `nvidia.com/gpu` requests = limits = that node's slot. The labels and
annotations say which run a pod belongs to (`JOB_ID`, `ATTEMPT_LABEL`) and what the scheduler
decided (`PARTITION_LABEL`, `SWITCHES`, `OVERHEAD`, `RUN_DURATION`, read by KWOK's stages).

A GPU share (`gpuFraction`, `JobSpec.gpu_milli` < 1000) runs as KAI scheduler and Run:ai run GPU
fractions: its pod asks for no `nvidia.com/gpu` and says what it shares in annotations
(`SHARE_MILLI`; `SHARE_GPU` and `SHARE_GPU_NAMESPACE`, the reservation pod; `SHARE_SLOT`), while
the GPU itself is held by ONE reservation pod per shared GPU (`reservation_pod`: `nvidia.com/gpu:
1`, label `RESERVATION_LABEL`), so the node's allocatable count is never passed
(`gputwin.adapters.kube.sharing`).

A MIG profile (`gpuProfile`) runs as the NVIDIA device plugin's "mixed" MIG strategy exposes it:
its pod requests one `nvidia.com/mig-<profile>` (`mig_resource`, e.g. `nvidia.com/mig-1g.10gb`) and
no `nvidia.com/gpu`, and says which profile and which of the scheduler's MIG-partitioned GPUs it
counts on in annotations (`MIG_PROFILE`, `SHARE_SLOT`). Mixed, not "single": single advertises MIG
devices as plain `nvidia.com/gpu` and needs every GPU of a node split alike, so a node could not
host whole-GPU jobs beside profiles, nor 1g and 3g slices side by side as the core packs them. No
reservation pod: the device plugin hands out and counts the MIG device itself.
"""

from __future__ import annotations

import copy
import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass

from gputwin.api.bodies import Body, Obj, Pod


JOB_LABEL = "gputwin.io/job"  # the GPUJob's name (hashed if it is no valid label value)
JOB_ID = "gputwin.io/job-id"  # annotation: namespace/name, the exact id
ATTEMPT_LABEL = "gputwin.io/attempt"
PARTITION_LABEL = "gputwin.io/partition"
SWITCHES = "gputwin.io/switches"
OVERHEAD = "gputwin.io/comm-overhead"
RUN_DURATION = "gputwin.io/run-duration"  # read by KWOK's gputwin-pod-complete stage
RESERVATION_LABEL = "gputwin.io/gpu-reservation"  # on a reservation pod: the shared GPU's slot on its node
SHARE_MILLI = "gputwin.io/gpu-fraction-milli"  # on a share's pod: its milli-GPU (KAI: gpu-fraction)
SHARE_GPU = "gputwin.io/gpu-reservation"  # on a share's pod: the reservation pod holding its GPU
SHARE_GPU_NAMESPACE = "gputwin.io/gpu-reservation-namespace"  # ... and its namespace (the GPU's opener's)
SHARE_SLOT = "gputwin.io/gpu-slot"  # on a share's pod: the shared GPU's slot on the node, when placed
MIG_PROFILE = "gputwin.io/mig-profile"  # on a MIG job's pod: its profile (its resource names it too)
SCHEDULER = "gputwin"
GPU = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"  # + profile: the device plugin's mixed-strategy resource
# What `mig_resource` accepts: NVIDIA's profile names that are also a valid resource name's tail.
# `+me` profiles (1g.10gb+me) are left out: the API server refuses `+` in a pod's resource name.
_MIG_RESOURCE = re.compile(r"[1-7]g\.[1-9][0-9]{0,3}gb")
DEFAULT_IMAGE = "registry.k8s.io/pause:3.10"
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


def short_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a stable shortened form."""
    return text if _LABEL_VALUE.match(text) else f"{text[:40].strip('-_.')}-{short_hash(text)}".lstrip("-_.")


def pod_name(job: str, attempt: int, index: int) -> str:
    """`<job>-<attempt>-<i>`, shortened with a hash when it would pass the 253-character limit."""
    suffix = f"-{attempt}-{index}"
    if len(job) + len(suffix) <= 253:
        return f"{job}{suffix}"
    return f"{job[:200].rstrip('-.')}-{short_hash(job)}{suffix}"


@dataclass(frozen=True, slots=True)
class ShareOf:
    """A share's place: `milli` of the GPU that reservation pod `reservation` holds (slot `slot`
    of its node, as the scheduler's `Shares` numbers it), in `namespace` ("": the share's own)."""

    milli: int
    reservation: str
    slot: int
    namespace: str = ""


@dataclass(frozen=True, slots=True)
class MigOf:
    """A MIG job's slice: `profile`, on the scheduler's MIG-partitioned GPU `slot` of its node
    (-1: a whole-GPU profile, 7g, which takes a GPU of its own)."""

    profile: str
    slot: int = -1


class NoMigResource(ValueError):
    """A profile no pod can request under the mixed strategy's name (the message says why)."""


def mig_resource(profile: str) -> str:
    """`nvidia.com/mig-<profile>`, the resource a pod of that MIG profile requests; NoMigResource
    unless `profile` is a plain NVIDIA profile name (checked again here, whatever checked it before:
    a custom resource's string never reaches a pod's resource names unchecked)."""
    if not (isinstance(profile, str) and _MIG_RESOURCE.fullmatch(profile)):
        raise NoMigResource(f"MIG profile {str(profile)[:40]!r} has no resource a pod can request: the "
                            f"device plugin's mixed strategy names it {MIG_PREFIX}<profile>, and a resource "
                            "name takes only profiles like 1g.10gb (no +me)")
    return MIG_PREFIX + profile


@dataclass(frozen=True, slots=True)
class PodPlan:
    """One pod of a job's run: where, with how many GPUs, and what to say about the placement."""

    namespace: str
    job: str  # the GPUJob's name
    attempt: int
    index: int
    node: str
    gpus: int
    partition: str
    switches: str  # the leaf switches the whole job spans, comma-separated
    overhead: float
    run_seconds: float | None  # simulated runs: how long KWOK keeps the pod Running
    share: ShareOf | None = None  # a GPU share: no nvidia.com/gpu of its own (`gpus` is ignored)
    mig: MigOf | None = None  # a MIG profile: one nvidia.com/mig-<profile>, no nvidia.com/gpu


def job_pod(plan: PodPlan, template: Obj | None, owner: Obj | None, tolerated: Sequence[str]) -> Obj:
    """The pod for `plan` from the job's PodTemplateSpec (a pause container if it has none).

    Ours, whatever the template says: name, namespace, owner, schedulerName, no nodeName (the
    Binding places it), and `nvidia.com/gpu` requests = limits on the first container (others get
    none: the GPUs of a node are the job's, counted once); a share's pod asks for none at all and
    carries `SHARE_MILLI`, `SHARE_GPU` and `SHARE_SLOT`; a MIG job's pod asks for one
    `mig_resource` instead (and no `nvidia.com/mig-*` the template names) and carries `MIG_PROFILE`
    and `SHARE_SLOT`. The template's labels and annotations are kept under ours. NoMigResource for a
    profile no pod can request.
    """
    mig = None if plan.mig is None else (mig_resource(plan.mig.profile), plan.mig)
    template = copy.deepcopy(template or {})
    given = Body(template)
    spec = template.get("spec") or {"containers": [{"name": "job", "image": DEFAULT_IMAGE}]}  # ours to change
    given_labels = {k: v for k, v in given.labels.items() if k != RESERVATION_LABEL}  # never a reservation
    labels = {**given_labels, JOB_LABEL: label_value(plan.job),
              ATTEMPT_LABEL: str(plan.attempt), PARTITION_LABEL: plan.partition}  # fmt: skip
    annotations = {**given.annotations, JOB_ID: f"{plan.namespace}/{plan.job}",
                   SWITCHES: plan.switches, OVERHEAD: f"{plan.overhead:.6g}"}  # fmt: skip
    if plan.run_seconds is not None:
        annotations[RUN_DURATION] = f"{max(plan.run_seconds, 0.0):.3f}s"
    if plan.share is not None:
        annotations.update({SHARE_MILLI: str(plan.share.milli), SHARE_GPU: plan.share.reservation,
                            SHARE_GPU_NAMESPACE: plan.share.namespace or plan.namespace,
                            SHARE_SLOT: str(plan.share.slot)})  # fmt: skip
    if mig is not None:
        annotations[MIG_PROFILE] = mig[1].profile
        if mig[1].slot >= 0:
            annotations[SHARE_SLOT] = str(mig[1].slot)
    metadata: Obj = {"name": pod_name(plan.job, plan.attempt, plan.index), "namespace": plan.namespace,
                     "labels": labels, "annotations": annotations}  # fmt: skip
    if owner is not None:
        job = Body(owner)
        metadata["ownerReferences"] = [{"apiVersion": job.api_version, "kind": job.kind, "name": job.name,
                                        "uid": job.uid, "controller": True,
                                        "blockOwnerDeletion": False}]  # fmt: skip
    spec.pop("nodeName", None)
    spec["schedulerName"] = SCHEDULER
    spec.setdefault("restartPolicy", "Never")  # a job runs to completion
    tolerations = list(spec.get("tolerations") or [])
    tolerations += [{"key": key, "operator": "Exists"} for key in tolerated]
    spec["tolerations"] = tolerations
    for i, container in enumerate(spec.get("containers") or []):
        resources = container.setdefault("resources", {})
        for kind in ("requests", "limits"):
            values = {k: v for k, v in dict(resources.get(kind) or {}).items()
                      if k != GPU and not str(k).startswith(MIG_PREFIX)}  # fmt: skip
            if i == 0 and mig is not None:
                values[mig[0]] = "1"
            elif i == 0 and plan.share is None:
                values[GPU] = str(plan.gpus)
            resources[kind] = values
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def reservation_name(node: str, slot: int, opener: str) -> str:
    """`gputwin-gpu-<node>-<slot>-<hash of the share that opened it>`: one name per opening, so a
    retry after a crash meets a 409 on it, and a GPU opened again in the same slot, while the old
    reservation is still being deleted, gets a pod of its own."""
    suffix = f"-{slot}-{short_hash(opener)[:8]}"
    head = f"gputwin-gpu-{node}"
    if len(head) + len(suffix) > 253:
        head = f"gputwin-gpu-{node[:180].rstrip('-.')}-{short_hash(node)}"
    return f"{head}{suffix}"


def reservation_pod(namespace: str, name: str, slot: int, tolerated: Sequence[str]) -> Obj:
    """The pod that holds one shared GPU for its shares (KAI's "reservation pod"): a pause
    container with `nvidia.com/gpu: 1`, `schedulerName: gputwin` (so no other scheduler places it,
    and it is never counted as another scheduler's GPU), no owner (shares of many GPUJobs use it;
    the backend deletes it when its last share leaves)."""
    gpu = {GPU: "1"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {RESERVATION_LABEL: str(slot)}},
        "spec": {"schedulerName": SCHEDULER, "restartPolicy": "Never",
                 "tolerations": [{"key": key, "operator": "Exists"} for key in tolerated],
                 "containers": [{"name": "reservation", "image": DEFAULT_IMAGE,
                                 "resources": {"requests": dict(gpu), "limits": dict(gpu)}}]},
    }  # fmt: skip


def is_reservation(pod: Obj) -> bool:
    """A reservation pod (it holds a shared GPU; it is no job)."""
    return RESERVATION_LABEL in ((pod.get("metadata") or {}).get("labels") or {})


def gpus_of(pod: Obj, resource: str = "nvidia.com/gpu") -> int:
    """GPUs a pod asks for: the sum of its containers' limits (requests must equal them)."""
    total = 0
    for container in Pod(pod).spec.get("containers") or []:
        resources = container.get("resources") or {}
        value = (resources.get("limits") or {}).get(resource) or (resources.get("requests") or {}).get(
            resource
        )
        if value is not None:
            try:
                total += int(str(value))
            except ValueError:
                continue  # a quantity that is no whole number of GPUs: the API server refuses it anyway
    return total


def node_gpus(node: Obj, resource: str = "nvidia.com/gpu") -> int:
    """A Node's allocatable GPUs (0 if it advertises none or an unreadable quantity)."""
    value = (Body(node).status.get("allocatable") or {}).get(resource, "0")
    try:
        return int(str(value))
    except ValueError:
        return 0


def bound_gpus(pods: Sequence[Obj]) -> dict[str, int]:
    """GPUs per node held by bound pods that still run (not Succeeded/Failed, not being deleted)."""
    used: dict[str, int] = {}
    for pod in pods:
        view = Pod(pod)
        node = view.node_name
        if node and view.phase not in ("Succeeded", "Failed") and not view.deleting:
            used[node] = used.get(node, 0) + gpus_of(pod)
    return used


__all__ = [
    "ATTEMPT_LABEL",
    "DEFAULT_IMAGE",
    "GPU",
    "JOB_ID",
    "JOB_LABEL",
    "MIG_PREFIX",
    "MIG_PROFILE",
    "MigOf",
    "NoMigResource",
    "OVERHEAD",
    "PARTITION_LABEL",
    "RUN_DURATION",
    "SCHEDULER",
    "SWITCHES",
    "PodPlan",
    "RESERVATION_LABEL",
    "SHARE_GPU",
    "SHARE_GPU_NAMESPACE",
    "SHARE_MILLI",
    "SHARE_SLOT",
    "ShareOf",
    "bound_gpus",
    "gpus_of",
    "is_reservation",
    "job_pod",
    "label_value",
    "mig_resource",
    "node_gpus",
    "pod_name",
    "reservation_name",
    "reservation_pod",
    "short_hash",
]
