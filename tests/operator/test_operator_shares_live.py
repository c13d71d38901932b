"""GPU shares deployed by the operator on a REAL API server + KWOK, as KAI scheduler deploys fractions.

What runs: the control plane of `tests/k8s_control_plane.py`, one KWOK node `share-0` with 2
`nvidia.com/gpu` (`scripts/k8s/fake-nodes.sh`), a topology, partition (`share-team`, task type
`share`: fifo, consolidate) and policy of this module's own, and the operator with
`GPUTWIN_BACKEND=kubernetes` and its ServiceAccount's token. Four GPUJobs of `gpuFraction: 0.25`
and one whole-GPU job fill the node: the shares must run on ONE GPU, held by one reservation pod
(`gputwin.io/gpu-reservation`, `nvidia.com/gpu: 1`), their own pods asking for no GPU; the whole job
gets the other GPU. At every poll the GPUs requested by pods bound to `share-0` stay <= 2.

Everything waits by polling, never by sleeping; the namespace goes with its jobs, and the module's
objects and node are deleted at the end.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_operator_e2e import Api, Operator, api, dump, free_port, gpujob, installed, namespace, sa_kubeconfig
from test_operator_kube_backend import gpus, holding, poke_and_wait_for_a_pass

from polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
NODE, NODE_GPUS = "share-0", 2
RESERVATION = "gputwin.io/gpu-reservation"
Obj = dict[str, Any]

SETUP = f"""
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {{name: share-topology}}
spec:
  switches: [{{name: share-leaf0}}]
  nodeGroups: [{{switch: share-leaf0, nodes: {NODE}, gpusPerNode: {NODE_GPUS}}}]
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata: {{name: share-policy}}
spec:
  queue: {{policy: fifo}}
  placement: {{policy: consolidate}}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {{name: share-team}}
spec: {{topology: share-topology, taskTypes: [share], nodes: {NODE}, policy: share-policy}}
"""

__all__ = ["api", "installed", "namespace", "sa_kubeconfig"]  # fixtures, imported to be used


@pytest.fixture(scope="module")
def cluster(crds: None, kube: Path, kubectl: Any) -> Iterator[None]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "1", str(NODE_GPUS), "--prefix", "share"],
                   env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    kubectl.run("label", "node", NODE, "gputwin.io/switch=share-leaf0", "--overwrite")
    kubectl.run("apply", "-f", "-", input=SETUP)
    yield
    kubectl.run("delete", "-f", "-", "--ignore-not-found", "--wait=false", input=SETUP, check=False)
    kubectl.run("delete", "node", NODE, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(cluster: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    work = tmp_path_factory.mktemp("shares-operator")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
           "GPUTWIN_NAMESPACE": "", "GPUTWIN_TOLERATED_TAINTS": "nvidia.com/gpu,kwok.x-k8s.io/node"}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


def share(name: str, namespace: str, seconds: float) -> Obj:
    body = gpujob(name, namespace, "share", 1, seconds)
    body["spec"]["gpuFraction"] = 0.25
    return body


class Node:
    """The pods bound to the node, read at every poll; a poll that sees the node's GPUs passed fails."""

    def __init__(self, api: Api) -> None:
        self.api = api

    def pods(self) -> list[Obj]:
        got = self.api.core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}").items
        held = [p for p in (self.api.core.api_client.sanitize_for_serialization(x) for x in got) if holding(p)]
        load = sum(gpus(p) for p in held)
        assert load <= NODE_GPUS, f"{NODE} over-committed: {load} GPUs requested by {[p['metadata']['name'] for p in held]}"
        return held

    def reservations(self) -> list[Obj]:
        return [p for p in self.pods() if RESERVATION in (p["metadata"].get("labels") or {})]

    def of_job(self, namespace: str, name: str) -> list[Obj]:
        return [p for p in self.pods() if (p["metadata"].get("labels") or {}).get("gputwin.io/job") == name
                and p["metadata"]["namespace"] == namespace]  # fmt: skip


def test_four_quarter_shares_run_on_one_reserved_gpu_beside_a_whole_gpu_job(
    operator: Operator, api: Api, kubectl: Any, namespace: str
) -> None:
    node = Node(api)
    wait_for("share-team ready", lambda: api.status("gpupartitions", "share-team").get("freeGPUs") == NODE_GPUS, 60,
             on_timeout=operator.tail)  # fmt: skip
    shares = [share(f"q{i}", namespace, 300) for i in range(4)]
    kubectl.run("apply", "-f", "-", input=dump(*shares, gpujob("whole", namespace, "share", 1, 300)))
    everyone = [f"q{i}" for i in range(4)] + ["whole"]

    def all_running() -> bool:
        phases = api.phases(namespace)
        return all(phases.get(n) == "Running" and node.of_job(namespace, n) for n in everyone)

    wait_for("4 shares and the whole job running", all_running, 60, on_timeout=operator.tail)
    (reservation,) = node.reservations()
    held_by = reservation["metadata"]["name"]
    assert gpus(reservation) == 1
    for name in everyone[:4]:
        (pod,) = node.of_job(namespace, name)
        annotations = pod["metadata"]["annotations"]
        assert gpus(pod) == 0 and annotations["gputwin.io/gpu-fraction-milli"] == "250", pod["metadata"]
        assert annotations["gputwin.io/gpu-reservation"] == held_by
    (whole,) = node.of_job(namespace, "whole")
    assert gpus(whole) == 1
    assert api.status("gpupartitions", "share-team")["freeGPUs"] == 0

    # The node is full: a fifth share waits (4 x 250 milli on one GPU, the other GPU whole).
    kubectl.run("apply", "-f", "-", input=dump(share("q4", namespace, 300)))
    wait_for("q4 queued", lambda: api.phases(namespace).get("q4") == "Queued", 30, on_timeout=operator.tail)
    assert not node.of_job(namespace, "q4")

    # The operator restarts: the shares are adopted where they run, nothing is made or deleted.
    uids = sorted(p["metadata"]["uid"] for p in node.pods())
    operator.stop()
    operator.start()
    poke_and_wait_for_a_pass(operator, kubectl, NODE)  # the restarted operator has adopted (and tidied)
    assert sorted(p["metadata"]["uid"] for p in node.pods()) == uids
    assert api.phases(namespace) == {**dict.fromkeys(everyone, "Running"), "q4": "Queued"}
    assert api.status("gpupartitions", "share-team")["freeGPUs"] == 0

    # The four shares leave: their GPU's reservation pod goes, and q4 opens a GPU of its own.
    kubectl.run("delete", "gpujob", *everyone[:4], "-n", namespace)
    wait_for("q4 running", lambda: api.phases(namespace).get("q4") == "Running" and node.of_job(namespace, "q4"),
             30, on_timeout=operator.tail)  # fmt: skip
    wait_for("the old reservation pod gone", lambda: held_by not in [p["metadata"]["name"] for p in node.reservations()],
             30, on_timeout=operator.tail)  # fmt: skip
    (opened,) = node.reservations()
    (pod,) = node.of_job(namespace, "q4")
    assert pod["metadata"]["annotations"]["gputwin.io/gpu-reservation"] == opened["metadata"]["name"]

    # The last share leaves: no reservation pod is left.
    kubectl.run("delete", "gpujob", "q4", "whole", "-n", namespace)
    wait_for("no reservation pod left", lambda: not node.reservations() and not node.pods(), 30,
             on_timeout=operator.tail)  # fmt: skip
