"""Quotas, borrowing, reclaim and GPU models enforced by the operator on a REAL API server + KWOK.

What runs: the control plane of `tests/k8s_control_plane.py`, four KWOK nodes made by
`scripts/k8s/fake-nodes.sh` (8 `nvidia.com/gpu` each: `lab-a100-0..1`, `lab-h100-0..1`), the CRDs,
the install manifests, `manifests/examples/tenancy-kube.yaml` applied as is (the README's example:
node groups of models a100 and h100, tenants vision (alice) and speech (carol) guaranteed 12 GPUs
each in cohort `lab`, `others` ("*") 8 GPUs outside it; fifo, consolidate, checkpoint 1 s), and the
operator with `GPUTWIN_BACKEND=kubernetes` and its own ServiceAccount's token, so what is shown is
what the operator does with pods: bound by it (`spec.nodeName`), deleted by it on reclaim.

Everything waits by polling GPUJob statuses and pods with a deadline, never by sleeping. Jobs run
300 s unless a test ends them (deleting the GPUJob); each test's namespace goes with its jobs, and
the next test waits until the partition is idle. Names (`lab-*`, task type `team`) are this
module's own, so other modules' partitions and nodes do not matter.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_operator_e2e import Api, Operator, api, dump, free_port, gpujob, installed, namespace, sa_kubeconfig
from test_operator_kube_backend import holding, pods_of

from polling import wait_for

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "manifests" / "examples" / "tenancy-kube.yaml"
A100, H100 = ["lab-a100-0", "lab-a100-1"], ["lab-h100-0", "lab-h100-1"]
MODEL = {**dict.fromkeys(A100, "a100"), **dict.fromkeys(H100, "h100")}
TOTAL = 32
TOLERATED = "nvidia.com/gpu,kwok.x-k8s.io/node"
SPEECH_WAITS = "waiting for 8 GPUs as tenant speech (guaranteed 12, cohort lab)"  # the Scheduled condition
Obj = dict[str, Any]

__all__ = ["api", "installed", "namespace", "sa_kubeconfig"]  # fixtures, imported to be used


@pytest.fixture(scope="module")
def cluster(crds: None, kube: Path, kubectl: Any) -> Iterator[None]:
    env = {**os.environ, "KUBECONFIG": str(kube)}
    for prefix in ("lab-a100", "lab-h100"):
        subprocess.run(["bash", str(ROOT / "scripts/k8s/fake-nodes.sh"), "2", "8", "--prefix", prefix],
                       env=env, check=True, capture_output=True, timeout=120)  # fmt: skip
    for leaf, nodes in (("lab-leaf0", A100), ("lab-leaf1", H100)):  # the topology's switch of each node
        kubectl.run("label", "node", *nodes, f"gputwin.io/switch={leaf}", "--overwrite")
    kubectl.run("apply", "-f", str(EXAMPLE))
    yield
    kubectl.run("delete", "-f", str(EXAMPLE), "--ignore-not-found", "--wait=false", check=False)
    kubectl.run("delete", "node", *A100, *H100, "--ignore-not-found", "--wait=false", check=False)


@pytest.fixture(scope="module")
def operator(cluster: None, sa_kubeconfig: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Operator]:
    work = tmp_path_factory.mktemp("tenancy-operator")
    env = {**os.environ, "KUBECONFIG": str(sa_kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
           "GPUTWIN_NAMESPACE": "", "GPUTWIN_TOLERATED_TAINTS": TOLERATED}  # fmt: skip
    running = Operator(env, work, work, free_port())
    running.env["GPUTWIN_HEALTH_PORT"] = str(running.port)
    running.start()
    yield running
    running.stop()


@pytest.fixture
def lab(operator: Operator, api: Api, namespace: str) -> Iterator[str]:
    """A namespace for one test, once lab-team is idle again (the last test's pods gone)."""
    wait_for("lab-team to be idle", lambda: api.status("gpupartitions", "lab-team").get("freeGPUs") == TOTAL, 60,
             on_timeout=operator.tail)  # fmt: skip
    yield namespace


def job(name: str, namespace: str, user: str, gpus: int, model: str = "", seconds: float = 300) -> Obj:
    body = gpujob(name, namespace, "team", gpus, seconds)
    body["spec"]["user"] = user
    if model:
        body["spec"]["gpuModel"] = model
    return body


def bound(api: Api, namespace: str, name: str) -> dict[str, int]:
    """GPUs per node of the job's pods that hold GPUs (bound, not ended, not being deleted)."""
    placed: dict[str, int] = {}
    for pod in pods_of(api, namespace, name):
        if holding(pod):
            limits = pod["spec"]["containers"][0]["resources"]["limits"]
            node = pod["spec"]["nodeName"]
            placed[node] = placed.get(node, 0) + int(limits["nvidia.com/gpu"])
    return placed


def running(api: Api, namespace: str, name: str, gpus: int) -> dict[str, int] | None:
    """The job's pods once it is Running with all its GPUs bound, else None."""
    placed = bound(api, namespace, name)
    phase = api.phases(namespace).get(name)
    return placed if phase == "Running" and sum(placed.values()) == gpus else None


def start(api: Api, kubectl: Any, operator: Operator, namespace: str, body: Obj) -> dict[str, int]:
    kubectl.run("apply", "-f", "-", input=dump(body))
    name, gpus = body["metadata"]["name"], body["spec"]["gpus"]
    return wait_for(f"{name} running on {gpus} GPUs", lambda: running(api, namespace, name, gpus), 30,
                    on_timeout=operator.tail)  # fmt: skip


def in_phase(api: Api, namespace: str, name: str, phase: str) -> Obj | None:
    """The GPUJob's status once it is in `phase` (for polling), else None."""
    status = api.status("gpujobs", name, namespace)
    return status if status.get("phase") == phase else None


def scheduled(api: Api, namespace: str, name: str) -> Obj:
    status = api.status("gpujobs", name, namespace)
    return next(c for c in status.get("conditions") or [] if c["type"] == "Scheduled")


def test_a_job_asking_for_a_gpu_model_binds_only_on_that_models_nodes(
    operator: Operator, api: Api, kubectl: Any, lab: str
) -> None:
    """consolidate without the filter would put `h` on lab-a100-0 (the first of equally free nodes)
    and `a` beside `h` (the best fit); `any` (16 GPUs, 12 a100 and 12 h100 free) must mix models."""
    h = start(api, kubectl, operator, lab, job("h", lab, "dave", 4, "h100"))
    assert set(h) <= set(H100), h
    a = start(api, kubectl, operator, lab, job("a", lab, "carol", 4, "a100"))
    assert set(a) <= set(A100), a
    # vision borrows 4 of speech's 8 idle GPUs for it
    either = start(api, kubectl, operator, lab, job("any", lab, "alice", 16))
    assert {MODEL[n] for n in either} == {"a100", "h100"}, either
    assert api.status("gpujobs", "h", lab)["nodes"] in H100


def idle_nodes(api: Api) -> list[str]:
    """The lab's nodes no pod holds GPUs on: a whole node is free for an 8-GPU job."""
    busy = {p["spec"]["nodeName"] for p in (api.core.api_client.sanitize_for_serialization(x)
            for x in api.core.list_pod_for_all_namespaces().items) if holding(p)}  # fmt: skip
    return sorted(set(MODEL) - busy)


def at_guarantees(api: Api, kubectl: Any, operator: Operator, lab: str) -> None:
    """vision and speech at their whole 12 GPUs (8 + 4 each, so consolidate leaves a node idle),
    speech's next 8-GPU job queued: a whole node is free (others' idle 8), the cohort has no idle quota."""
    for name, user, gpus in (("v1", "alice", 8), ("s1", "carol", 8), ("v1b", "alice", 4), ("s1b", "carol", 4)):
        start(api, kubectl, operator, lab, job(name, lab, user, gpus))
    kubectl.run("apply", "-f", "-", input=dump(job("s2", lab, "carol", 8)))
    wait_for("s2 queued", lambda: api.phases(lab).get("s2") == "Queued", 20, on_timeout=operator.tail)
    assert len(idle_nodes(api)) == 1 and api.status("gpupartitions", "lab-team")["freeGPUs"] == 8
    assert bound(api, lab, "s2") == {}


def test_a_tenant_over_its_quota_waits_borrows_when_idle_and_is_reclaimed_by_the_owner(
    operator: Operator, api: Api, kubectl: Any, lab: str
) -> None:
    at_guarantees(api, kubectl, operator, lab)  # (b) s2 waits with a whole node free
    assert scheduled(api, lab, "s2")["message"] == SPEECH_WAITS
    kubectl.run("delete", "gpujob", "v1", "v1b", "-n", lab)  # vision goes idle: speech may borrow its 12
    borrowed = wait_for("s2 running on borrowed GPUs", lambda: running(api, lab, "s2", 8), 30,
                        on_timeout=operator.tail)  # fmt: skip
    # (c) others take their own 8, then vision wants its guarantee back: 4 GPUs free, 8 borrowed.
    start(api, kubectl, operator, lab, job("o1", lab, "dave", 8))
    kubectl.run("apply", "-f", "-", input=dump(job("v2", lab, "alice", 12)))
    v2 = wait_for("v2 running after the reclaim", lambda: running(api, lab, "v2", 12), 30,
                  on_timeout=operator.tail)  # fmt: skip
    # The statuses are written in the background, each on its own: v2's Running may show before s2's Queued.
    status = wait_for("s2 queued again", lambda: in_phase(api, lab, "s2", "Queued"), 30, on_timeout=operator.tail)
    assert status["preemptions"] == 1, status
    condition = scheduled(api, lab, "s2")
    assert condition["reason"] == "Preempted" and "checkpoint and restore cost 1 s" in condition["message"]
    wait_for("s2's pods deleted", lambda: not pods_of(api, lab, "s2"), 30, on_timeout=operator.tail)
    assert set(borrowed) & set(v2), (borrowed, v2)  # v2 took GPUs s2 had held
    others = ("s1", "s1b", "o1", "v2")
    assert {n: api.phases(lab)[n] for n in others} == dict.fromkeys(others, "Running")
    # speech stays at its guarantee: s2 waits again while vision holds its own.
    assert api.phases(lab)["s2"] == "Queued" and api.status("gpupartitions", "lab-team")["freeGPUs"] == 0


def test_a_quota_edited_live_takes_effect_for_the_waiting_job(
    operator: Operator, api: Api, kubectl: Any, lab: str, restore_example: None
) -> None:
    """The operator reads quotas from the GPUPartition as it is now: speech's guarantee raised to 20
    (others' 8 moved to it) lets its waiting job start within its quota, on the idle node."""
    at_guarantees(api, kubectl, operator, lab)
    (idle,) = idle_nodes(api)
    quotas = api.get("gpupartitions", "lab-team")["spec"]["quotas"]
    moved = [{**q, "gpus": {"vision": 12, "speech": 20, "others": 0}[q["tenant"]]} for q in quotas]
    patch = json.dumps({"spec": {"quotas": moved}})
    kubectl.run("patch", "gpupartition", "lab-team", "--type=merge", "-p", patch)
    placed = wait_for("s2 running under the new quota", lambda: running(api, lab, "s2", 8), 30,
                      on_timeout=operator.tail)  # fmt: skip
    assert placed == {idle: 8}
    assert scheduled(api, lab, "s2")["reason"] == "Started"
    for name in ("v1", "v1b"):  # nothing reclaimed from vision
        assert api.status("gpujobs", name, lab)["preemptions"] == 0


@pytest.fixture
def restore_example(kubectl: Any, api: Api) -> Iterator[None]:
    yield
    kubectl.run("apply", "-f", str(EXAMPLE))
    generation = api.get("gpupartitions", "lab-team")["metadata"]["generation"]
    wait_for("lab-team's quotas restored", lambda: api.status("gpupartitions", "lab-team")
             .get("observedGeneration") == generation, 20)  # fmt: skip
