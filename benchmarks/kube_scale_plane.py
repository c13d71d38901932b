"""The control plane, KWOK nodes and burst pods of benchmarks/kube_scale.py.

`control_plane` starts scripts/k8s/start.sh --with-scheduler into a fresh temp dir and stops it
whatever happens; `create_nodes` makes the KWOK GPU nodes; `workload` / `create_pods` the burst.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kube_scale_lib import Kube

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts" / "k8s"
GPUS_PER_NODE = 8
LEAVES = 16
GPU_SIZES = (1, 2, 4, 8)
GPU_WEIGHTS = (0.5, 0.2, 0.2, 0.1)
RUN_LABEL = "bench.gputwin.io/run"
TASK_TYPE = "bench"


def log(message: str) -> None:
    print(f"[kube_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --- the control plane -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Plane:
    state: Path
    kube: Kube
    kubectl: Path
    scheduler_pid: int
    bin_dir: Path

    def kubectl_run(self, *args: str, stdin: str | None = None) -> str:
        env = {**os.environ, "KUBECONFIG": str(self.state / "kubeconfig"),
               "KUBECACHEDIR": str(self.state / "kubectl-cache")}  # fmt: skip
        done = subprocess.run([str(self.kubectl), *args], input=stdin, capture_output=True, text=True,
                              env=env, timeout=300, check=False)  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout


@contextmanager
def control_plane() -> Iterator[Plane]:
    """start.sh into a fresh temp dir; stop.sh whatever happens (also KeyboardInterrupt)."""
    state = Path(tempfile.mkdtemp(prefix="gputwin-kube-scale-"))
    log(f"starting the control plane in {state}")
    started = subprocess.run(["bash", str(SCRIPTS / "start.sh"), "--state", str(state), "--with-scheduler"],
                             capture_output=True, text=True, timeout=300, check=False)  # fmt: skip
    try:
        if started.returncode != 0:
            raise SystemExit(f"scripts/k8s/start.sh failed ({started.returncode}): {started.stderr[-2000:]}")
        env = dict(line.split("=", 1) for line in (state / "env").read_text().splitlines() if "=" in line
                   and not line.startswith("#"))  # fmt: skip
        pids = {line.split()[0]: int(line.split()[1]) for line in (state / "pids").read_text().splitlines()}
        yield Plane(state, Kube.from_kubeconfig(state / "kubeconfig"), Path(env["KUBECTL"]),
                    pids["kube-scheduler"], Path(env["K8S_BIN_DIR"]))  # fmt: skip
    finally:
        subprocess.run(["bash", str(SCRIPTS / "stop.sh"), "--state", str(state)], capture_output=True,
                       timeout=120, check=False)  # fmt: skip
        log(f"control plane stopped (logs kept in {state}/logs)")


# --- nodes and pods ---------------------------------------------------------------------------------


def node_name(i: int) -> str:
    return f"bench-node-{i}"


def leaf_of(i: int, nodes: int) -> int:
    return i * LEAVES // nodes  # 16 leaves of (almost) equal size, consecutive nodes


def node_manifest(i: int, nodes: int) -> dict[str, Any]:
    """A KWOK GPU node as scripts/k8s/fake-nodes.sh writes it, plus the partition label."""
    name = node_name(i)
    resources = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(GPUS_PER_NODE)}
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {
            "name": name,
            "annotations": {"node.alpha.kubernetes.io/ttl": "0", "kwok.x-k8s.io/node": "fake"},
            "labels": {"type": "kwok", "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
                       "kubernetes.io/hostname": name, "kubernetes.io/role": "agent",
                       "node-role.kubernetes.io/agent": "", "gputwin.io/fake-node": "true",
                       "gputwin.io/switch": f"leaf{leaf_of(i, nodes)}", "gputwin.io/partition": "bench"},
        },
        "spec": {"taints": [{"effect": "NoSchedule", "key": "kwok.x-k8s.io/node", "value": "fake"}]},
        "status": {"allocatable": resources, "capacity": resources},
    }  # fmt: skip


def create_nodes(kube: Kube, nodes: int) -> None:
    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: kube.create("/api/v1/nodes", node_manifest(i, nodes)), range(nodes)))
    deadline = time.monotonic() + 300
    while (ready := kube.ready_nodes()) < nodes:  # set-up, not measurement: a list is fine here
        if time.monotonic() > deadline:
            raise SystemExit(f"only {ready} of {nodes} KWOK nodes became Ready in 300 s")
        time.sleep(1)
    # The API server taints every new Node node.kubernetes.io/not-ready; KCM's node lifecycle controller
    # lifts it once the node is Ready. This plane runs no KCM (its controllers would load both phases),
    # so do the same here: only KWOK's own taint stays.
    taints = {"spec": {"taints": node_manifest(0, 1)["spec"]["taints"]}}
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: kube.merge_patch(f"/api/v1/nodes/{node_name(i)}", taints), range(nodes)))
    log(f"{nodes} KWOK nodes x {GPUS_PER_NODE} GPUs Ready in {time.monotonic() - t0:.1f} s")


@dataclass(frozen=True)
class Job:
    index: int
    gpus: int
    seconds: int


def workload(pods: int, seed: int, durations: tuple[int, int]) -> list[Job]:
    rng = random.Random(seed)
    sizes = rng.choices(GPU_SIZES, GPU_WEIGHTS, k=pods)
    return [Job(i, g, rng.randint(*durations)) for i, g in enumerate(sizes)]


def pod_manifest(job: Job, phase: str, scheduler: str) -> dict[str, Any]:
    gpus = {"nvidia.com/gpu": str(job.gpus)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "name": f"job-{job.index:05d}",
            "labels": {RUN_LABEL: "1", "bench.gputwin.io/phase": phase, "bench.gputwin.io/job": str(job.index),
                       "gputwin.io/task-type": TASK_TYPE},
            # run-duration: KWOK completes the pod; duration-seconds: what gputwin's policies may read.
            "annotations": {"gputwin.io/run-duration": f"{job.seconds}s",
                            "gputwin.io/duration-seconds": str(job.seconds)},
        },
        "spec": {
            "schedulerName": scheduler,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": gpus, "limits": gpus}}],
        },
    }  # fmt: skip


def create_pods(kube: Kube, namespace: str, jobs: list[Job], phase: str, scheduler: str) -> float:
    """The burst: every pod as fast as 8 connections allow; its duration in seconds."""
    t0 = time.monotonic()
    path = f"/api/v1/namespaces/{namespace}/pods"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda job: kube.create(path, pod_manifest(job, phase, scheduler)), jobs))
    return time.monotonic() - t0
