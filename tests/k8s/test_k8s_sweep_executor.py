"""The kubernetes sweep executor on the real API server and Job controller, with a mock kubelet.

What is real: kube-apiserver, etcd, kube-controller-manager's Job controller (Indexed
completions, per-index backoff, pod finalizers), the executor's Job and its polling. What cannot
run here is a kubelet with a container runtime (no Docker engine), so `MockKubelet` stands in for
it: for each pod the Job controller creates, it runs the pod's command in a local process — the
hostPath volume is the sweep folder itself, JOB_COMPLETION_INDEX comes from the pod's
annotation, as a kubelet would set it — and writes the outcome into the pod's status.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config

from gputwin.adapters.sweeps import SweepError, run_sweep, write_plan
from gputwin.adapters.kube.sweeps import MOUNT, KubernetesExecutor, job_manifest
from gputwin.adapters.sweeps.local import LocalExecutor
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.core.model import Candidate

Kubectl = Any  # conftest.Kubectl
INDEX = "batch.kubernetes.io/job-completion-index"
CANDIDATES = (Candidate("fifo", "consolidate"), Candidate("sjf", "first-fit"), Candidate("las", "consolidate"))


class MockKubelet(threading.Thread):
    """Runs the sweep pods of one namespace locally and reports them Succeeded or Failed."""

    def __init__(self, kube: Path, namespace: str) -> None:
        super().__init__(daemon=True)
        self.core = client.CoreV1Api(config.new_client_from_config(str(kube)))
        self.namespace, self.ran = namespace, list[str]()
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            for pod in self.core.list_namespaced_pod(self.namespace).items:
                if pod.status.phase == "Pending" and pod.metadata.name not in self.ran:
                    self.ran.append(pod.metadata.name)
                    self._run_pod(pod)

    def _run_pod(self, pod: client.V1Pod) -> None:
        container, volume = pod.spec.containers[0], pod.spec.volumes[0]
        host = volume.host_path.path
        argv = [sys.executable if a == "python" else a.replace(MOUNT, host) for a in container.command]
        env = {**os.environ, "JOB_COMPLETION_INDEX": pod.metadata.annotations[INDEX]}
        code = subprocess.run(argv, env=env, capture_output=True, timeout=300, check=False).returncode
        phase = "Succeeded" if code == 0 else "Failed"
        state = {"terminated": {"exitCode": code, "reason": "Completed" if code == 0 else "Error"}}
        self.core.patch_namespaced_pod_status(pod.metadata.name, self.namespace, {"status": {
            "phase": phase,
            "containerStatuses": [{"name": container.name, "image": container.image, "imageID": "",
                                   "ready": False, "restartCount": 0, "state": state}],
        }})  # fmt: skip


@pytest.fixture
def cluster(kube: Path, kubectl: Kubectl, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, MockKubelet]]:
    namespace = f"sweep-{uuid.uuid4().hex[:8]}"
    kubectl.run("create", "namespace", namespace)
    monkeypatch.setenv("KUBECONFIG", str(kube))
    kubelet = MockKubelet(kube, namespace)
    kubelet.start()
    try:
        yield namespace, kubelet
    finally:
        kubelet.halt.set()
        kubelet.join(10)
        kubectl.run("delete", "namespace", namespace, "--ignore-not-found", "--wait=false")


def sweep(folder: Path) -> Path:
    write_plan(folder, demo_trace_path(), "helios", demo_cluster_path(), candidates=CANDIDATES)
    return folder


def test_indexed_job_results_equal_local_ones(cluster: tuple[str, MockKubelet], kubectl: Kubectl,
                                              tmp_path: Path) -> None:  # fmt: skip
    namespace, kubelet = cluster
    done: list[int] = []
    executor = KubernetesExecutor(namespace=namespace, host_path=True, parallel=2, timeout=300)
    on_k8s = run_sweep(sweep(tmp_path / "k8s"), executor, done.append)
    here = run_sweep(sweep(tmp_path / "local"), LocalExecutor(1))
    assert sorted(done) == [0, 1, 2] and len(kubelet.ran) == 3
    for a, b in zip(on_k8s, here):
        assert (a.candidate, a.summary.avg_jct, a.jcts) == (b.candidate, b.summary.avg_jct, b.jcts)
    assert kubectl.json("get", "jobs", "-n", namespace)["items"] == []  # deleted once gathered


def test_failed_indexes_are_named(cluster: tuple[str, MockKubelet], tmp_path: Path) -> None:
    namespace, _ = cluster
    folder = sweep(tmp_path / "s")
    (folder / "inputs" / "trace" / demo_trace_path().name).write_text("not,a,trace\n")  # every task fails
    executor = KubernetesExecutor(namespace=namespace, host_path=True, timeout=300)
    with pytest.raises(SweepError, match=r"3 task\(s\) left no result"):
        run_sweep(folder, executor)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"image": "x;rm -rf /", "claim": "c"}, "not an image reference"),
     ({"image": "gputwin:dev", "claim": "Bad_Claim"}, "want a DNS label"),
     ({"image": "gputwin:dev"}, "exactly one of")],
    ids=["hostile-image", "bad-claim", "no-volume"],
)  # fmt: skip
def test_job_manifest_refuses_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(SweepError, match=message):
        job_manifest(3, parallel=0, **{"claim": None, "host_path": None, **kwargs})


def test_job_manifest_is_an_indexed_job(kubectl: Kubectl, tmp_path: Path) -> None:
    import json

    body = job_manifest(4, image="gputwin:dev", parallel=2, claim="sweeps", host_path=None)
    spec = body["spec"]
    assert (spec["completionMode"], spec["completions"], spec["parallelism"]) == ("Indexed", 4, 2)
    out = kubectl.run("create", "--dry-run=server", "-n", "default", "-o", "json", "-f", "-", input=json.dumps(body))
    assert json.loads(out.stdout)["spec"]["completionMode"] == "Indexed"  # the API server accepts it as is
