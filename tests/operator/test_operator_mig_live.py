"""MIG profiles deployed by the operator on a REAL API server + KWOK, as the NVIDIA device plugin's
"mixed" MIG strategy exposes them (`nvidia.com/mig-<profile>` extended resources).

What runs: the control plane of `tests/k8s_control_plane.py`, one KWOK node `mig-0` with 2
`nvidia.com/gpu` (`scripts/k8s/fake-nodes.sh`) that also advertises `nvidia.com/mig-1g.10gb: 14`
and `nvidia.com/mig-3g.40gb: 4` (what the device plugin would advertise for its 2 GPUs split into
either; the core repartitions a GPU when it opens one for profiles, docs/tenancy.md), a topology
of model h100 declaring those profiles, a partition (`mig-team`, task type `mig`: fifo,
consolidate) and policy of this module's own, and the operator with `GPUTWIN_BACKEND=kubernetes`
and its ServiceAccount's token. Seven `1g.10gb` GPUJobs and one whole-GPU job fill the node: the
seven run on ONE GPU of the core's (one `gputwin.io/gpu-slot`), each pod asking for
`nvidia.com/mig-1g.10gb: 1` and no `nvidia.com/gpu`; the whole job gets the other GPU. At every
poll the node's `nvidia.com/gpu` and `nvidia.com/mig-1g.10gb` requested by bound pods stay within
what it advertises. The snapshot the live twin forecasts from holds the seven as slices of one GPU.
A `1g.10gb+me` job fails (no pod can request that name), a `7g.80gb` job the node advertises no
slice for stays queued with the reason, neither ever has a pod.

Everything waits by polling, never by sleeping; the namespace goes with its jobs, and the module's
objects and node are deleted at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import config
from test_operator_e2e import Api, Operator, api, dump, free_port, gpujob, installed, namespace, sa_kubeconfig
from test_operator_kube_backend import gpus, holding, poke_and_wait_for_a_pass

from gputwin.adapters.kube.snapshot import read_snapshot
from gputwin.core.scheduler import Scheduler
from gputwin.twin.seed import Held
from polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODE, NODE_GPUS = "mig-0", 2
SLICES = {"nvidia.com/mig-1g.10gb": 14, "nvidia.com/mig-3g.40gb": 4}  # advertised beside nvidia.com/gpu
ONE_G = "nvidia.com/mig-1g.10gb"
TOLERATED = ("nvidia.com/gpu", "kwok.x-k8s.io/node")
Obj = dict[str, Any]

SETUP = f"""
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {{name: mig-topology}}
spec:
  switches: [{{name: mig-leaf0}}]
  nodeGroups: [{{switch: mig-leaf0, nodes: {NODE}, gpusPerNode: {NODE_GPUS}, model: h100}}]
  migProfiles: {{h100: [1g.10gb, 1g.10gb+me, 3g.40gb, 7g.80gb]}}
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: mig-policy}}
spec:
  queue: {{policy: fifo}}
  placement: {{policy: consolidate}}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {{name: mig-team}}
spec: {{topology: mig-topology, taskTypes: [mig], nodes: {NODE}, policy: mig-policy}}
"""

__all__ = ["api", "installed", "namespace", "sa_kubeconfig"]  # fixtures, imported to be used


@pytest.fixture(scope="module")
def cluster(crds: None, kube: Path, kubectl: Any) -> Iterator[None]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "1", str(NODE_GPUS), "--prefix", "mig"],
                   env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    slices = {k: str(v) for k, v in SLICES.items()}
    kubectl.run("patch", "node", NODE, "--subresource=status", "--type=merge",
                "-p", json.dumps({"status": {"capacity": slices, "allocatable": slices}}))  # fmt: skip
    kubectl.run("label", "node", NODE, "gputwin.io/switch=mig-leaf0", "--overwrite")
    kubectl.run("apply", "-f", "-", input=SETUP)
    yield
    kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=SETUP, check=False)
    kubectl.run("delete", "node", NODE, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(cluster: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    work = tmp_path_factory.mktemp("mig-operator")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
           "GPUTWIN_NAMESPACE": "", "GPUTWIN_TOLERATED_TAINTS": ",".join(TOLERATED)}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


def mig_job(name: str, namespace: str, profile: str, seconds: float) -> Obj:
    body = gpujob(name, namespace, "mig", 1, seconds)
    body["spec"] |= {"gpuModel": "h100", "gpuProfile": profile}
    return body


def requested(pod: Obj, resource: str) -> int:
    """`resource` the pod's containers request (requests = limits, as the API server demands of extended ones)."""
    total = 0
    for container in pod["spec"]["containers"]:
        resources = container.get("resources") or {}
        limit, request = (resources.get(k, {}).get(resource) for k in ("limits", "requests"))
        assert limit == request, container
        total += int(limit or 0)
    return total


class Node:
    """The pods bound to the node, read at every poll; a poll that sees the node passed fails."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def pods(self) -> list[Obj]:
        got = self.api.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items
        held = [p for p in (self.api.core.api_client.sanitize_for_serialization(x) for x in got) if holding(p)]
        load = sum(gpus(p) for p in held)
        assert load <= NODE_GPUS, f"{NODE} over-committed: {load} GPUs requested by {[p['metadata']['name'] for p in held]}"
        for resource, advertised in SLICES.items():
            used = sum(requested(p, resource) for p in held)
            assert used <= advertised, f"{NODE} over-committed: {used} {resource}"
        return held

    def of_job(self, namespace: str, name: str) -> list[Obj]:
        return [p for p in self.pods() if (p["metadata"].get("labels") or {}).get("gputwin.io/job") == name
                and p["metadata"]["namespace"] == namespace]  # fmt: skip


def test_seven_1g_slices_run_on_one_gpu_beside_a_whole_gpu_job_and_the_twin_holds_them_so(
    operator: Operator, api: Api, kube: Path, kubectl: Any, namespace: str
) -> None:
    node = Node(api)
    wait_for("mig-team ready", lambda: api.status("gpupartitions", "mig-team").get("freeGPUs") == NODE_GPUS, 60,
             on_timeout=operator.tail)  # fmt: skip
    slices = [f"s{i}" for i in range(7)]
    everyone = [*slices, "whole"]
    kubectl.run("apply", "-f", "-", input=dump(*(mig_job(n, namespace, "1g.10gb", 300) for n in slices),
                                               gpujob("whole", namespace, "mig", 1, 300)))  # fmt: skip

    def all_running() -> bool:
        phases = api.phases(namespace)
        return all(phases.get(n) == "Running" and node.of_job(namespace, n) for n in everyone)

    wait_for("7 slices and the whole job running", all_running, 60, on_timeout=operator.tail)
    slots = set()
    for name in slices:
        (pod,) = node.of_job(namespace, name)
        notes = pod["metadata"]["annotations"]
        assert gpus(pod) == 0 and requested(pod, ONE_G) == 1, pod["spec"]["containers"]
        assert notes["gputwin.io/mig-profile"] == "1g.10gb" and "gputwin.io/gpu-reservation" not in notes
        slots.add(notes["gputwin.io/gpu-slot"])
    assert len(slots) == 1  # one MIG-partitioned GPU of the core's
    (whole,) = node.of_job(namespace, "whole")
    assert gpus(whole) == 1 and requested(whole, ONE_G) == 0
    assert not [p for p in node.pods() if "gputwin.io/gpu-reservation" in (p["metadata"].get("labels") or {})]
    assert api.status("gpupartitions", "mig-team")["freeGPUs"] == 0

    # The node is full: an eighth slice waits (7 of 7 slices on one GPU, the other GPU whole).
    kubectl.run("apply", "-f", "-", input=dump(mig_job("s7", namespace, "1g.10gb", 300)))
    wait_for("s7 queued", lambda: api.phases(namespace).get("s7") == "Queued", 30, on_timeout=operator.tail)
    assert not node.of_job(namespace, "s7")

    # The live twin's snapshot: seven slices of one GPU, s7 a waiting 1g slice; seeded, both GPUs held.
    client = config.new_client_from_config(config_file=str(kube))  # type: ignore[no-untyped-call]
    declared, snap = read_snapshot(client, namespace, TOLERATED)
    running = {r.job_id.split("/")[1]: r for r in snap.running}
    assert {(running[n].gpu_profile, running[n].gpu_milli, running[n].slots) for n in slices} == {
        ("1g.10gb", 143, ((NODE, 1),))}
    assert len({running[n].share_gpu for n in slices}) == 1 and running["whole"].gpu_profile == ""
    assert [(p.job_id.split("/")[1], p.gpu_profile, p.model) for p in snap.pending] == [("s7", "1g.10gb", "h100")]
    scheduler = Scheduler(declared)
    seeded = Held(declared, snap, snap.running).seed(scheduler, [300.0] * len(snap.running), [])
    assert not seeded.left_out and scheduler.partitions["mig-team"].ledger.free_gpus == 0

    # The operator restarts: the slices are adopted where they run, nothing is made or deleted.
    uids = sorted(p["metadata"]["uid"] for p in node.pods())
    operator.stop()
    operator.start()
    poke_and_wait_for_a_pass(operator, kubectl, NODE)
    assert sorted(p["metadata"]["uid"] for p in node.pods()) == uids
    assert api.phases(namespace) == {**dict.fromkeys(everyone, "Running"), "s7": "Queued"}

    # One slice leaves: s7 takes its place on the same GPU.
    kubectl.run("delete", "gpujob", "s0", "-n", namespace)
    wait_for("s7 running", lambda: api.phases(namespace).get("s7") == "Running" and node.of_job(namespace, "s7"),
             30, on_timeout=operator.tail)  # fmt: skip
    (pod,) = node.of_job(namespace, "s7")
    assert pod["metadata"]["annotations"]["gputwin.io/gpu-slot"] in slots and requested(pod, ONE_G) == 1

    kubectl.run("delete", "gpujob", "--all", "-n", namespace)
    wait_for("no pod left", lambda: not node.pods(), 30, on_timeout=operator.tail)


def test_profiles_no_pod_or_no_node_can_hold_never_bind(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    """1g.10gb+me: NVIDIA's name, the mixed strategy's nvidia.com/mig-1g.10gb+me, but the API server
    refuses `+` in a pod's resource name, so the job fails saying so. 7g.80gb: declared, but the node
    advertises no nvidia.com/mig-7g.80gb, so its pod is never made (a kubelet would refuse it): the
    start fails with the reason, the job stays queued."""
    wait_for("mig-team idle", lambda: api.status("gpupartitions", "mig-team").get("freeGPUs") == NODE_GPUS, 60,
             on_timeout=operator.tail)  # fmt: skip
    kubectl.run("apply", "-f", "-", input=dump(mig_job("me", namespace, "1g.10gb+me", 30),
                                               mig_job("seven", namespace, "7g.80gb", 30)))  # fmt: skip
    wait_for("me failed", lambda: api.phases(namespace).get("me") == "Failed", 30, on_timeout=operator.tail)
    status = api.status("gpujobs", "me", namespace)
    assert "+me" in json.dumps(status), status

    def refused() -> list[str]:
        got = api.core.list_namespaced_event(namespace, field_selector="involvedObject.name=seven")
        return [e.message or "" for e in got.items if e.reason == "FailedStart"]

    (message, *_) = wait_for("seven's start refused", refused, 30, on_timeout=operator.tail)
    assert f"node {NODE} advertises 0 nvidia.com/mig-7g.80gb" in message, message
    assert api.phases(namespace)["seven"] == "Queued"
    assert not Node(api).of_job(namespace, "me") and not Node(api).of_job(namespace, "seven")
