"""The honest peers of benchmarks/kube_scale.py (issue 17, item 5): a tuned kube-scheduler and gangs.

- `TunedScheduler`: a second kube-scheduler process from the same binary, started with a
  KubeSchedulerConfiguration whose clientConnection allows qps 1000 / burst 2000 (the default 50 /
  100 caps kube-scheduler near 50 bindings per second: what an operator of a 1,000-node cluster
  raises first). Its one profile is `schedulerName: tuned-scheduler`, so it places only its own
  phase's pods while the default scheduler keeps running beside it, as it does in the gputwin phase.
- Gangs: jobs of 2-8 pods of 8 GPUs (a whole node each) that must start together. For
  kube-scheduler they are plain pods (it has no gang notion and places them one by one); for
  gputwin one GPUJob of 8 x pods GPUs, which the operator places and binds all or none. The pods
  carry no run duration (KWOK keeps them Running), the jobs ask more GPUs than the cluster has, so
  once binding stops `gang_outcome` counts the jobs left partly placed and the GPUs they strand.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import urllib3
import yaml
from kube_scale_lib import Kube, free_port, stop_process
from kube_scale_watch import Tracker

TUNED = "tuned-scheduler"
TUNED_QPS, TUNED_BURST = 1000, 2000
GANG_SIZES = (2, 3, 4, 5, 6, 7, 8)  # pods per job
GANG_POD_GPUS = 8
GANG_LABEL = "bench.gputwin.io/gang"


# --- the tuned kube-scheduler ------------------------------------------------------------------------


def tuned_config(kubeconfig: Path, name: str = TUNED, tuned: bool = True) -> dict[str, Any]:
    """Its configuration; `tuned=False`: kube-scheduler's default client limits (qps 50 / burst 100)."""
    limits = {"qps": TUNED_QPS, "burst": TUNED_BURST} if tuned else {}
    return {
        "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "clientConnection": {"kubeconfig": str(kubeconfig), **limits},
        "leaderElection": {"leaderElect": False}, "enableProfiling": False,
        "profiles": [{"schedulerName": name}],
    }  # fmt: skip


class TunedScheduler:
    """kube-scheduler with raised client rate limits, as a subprocess of the benchmark."""

    def __init__(self, state: Path, bin_dir: Path, name: str = TUNED, tuned: bool = True) -> None:
        self.state, self.binary, self.name, self.tuned = state, bin_dir / "kube-scheduler", name, tuned
        self.config = state / f"{name}.yaml"
        self.log_path = state / "logs" / ("tuned-kube-scheduler.log" if name == TUNED else f"{name}.log")
        self.port = free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 120) -> str:
        """'' once its /healthz answers 200, else why not."""
        self.config.write_text(yaml.safe_dump(tuned_config(self.state / "kubeconfig", self.name, self.tuned)))
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(self.binary), f"--config={self.config}", "--bind-address=127.0.0.1",
                 f"--secure-port={self.port}"],
                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        pool = urllib3.PoolManager(cert_reqs="CERT_NONE")  # its serving certificate is self-signed
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # for that one health check
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                return f"tuned kube-scheduler exited ({self.proc.returncode}), see {self.log_path}"
            try:
                if pool.request("GET", f"https://127.0.0.1:{self.port}/healthz", retries=False,
                                timeout=2).status == 200:  # fmt: skip
                    return ""
            except urllib3.exceptions.HTTPError:
                pass
            time.sleep(0.2)
        return f"tuned kube-scheduler not healthy after {timeout:.0f} s, see {self.log_path}"

    def stop(self) -> None:
        stop_process(self.proc)
        self.proc = None


# --- gangs -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Gang:
    index: int
    pods: int

    @property
    def name(self) -> str:
        return f"gang-{self.index:05d}"

    @property
    def gpus(self) -> int:
        return self.pods * GANG_POD_GPUS


def default_gang_jobs(nodes: int) -> int:
    """Enough jobs to ask 1.5 x the cluster's GPUs (5 pods per job on average)."""
    return max(2, round(1.5 * nodes / 5))


def gang_workload(jobs: int, seed: int) -> list[Gang]:
    rng = random.Random(seed)
    return [Gang(i, rng.choice(GANG_SIZES)) for i in range(jobs)]


def gang_pod_order(gangs: list[Gang], seed: int, shuffled: bool) -> list[tuple[Gang, int]]:
    """(job, pod index) in creation order: job after job, or (`shuffled`) all jobs submitted at once,
    their pods arriving interleaved as several job controllers would create them."""
    order = [(g, i) for g in gangs for i in range(g.pods)]
    if shuffled:
        random.Random(seed).shuffle(order)
    return order


def _labels(phase: str, gang: Gang, task_type: str, run_label: str) -> dict[str, str]:
    return {run_label: "1", "bench.gputwin.io/phase": phase, GANG_LABEL: gang.name,
            "gputwin.io/task-type": task_type}  # fmt: skip


def gang_pod_manifest(gang: Gang, index: int, phase: str, scheduler: str, task_type: str,
                      run_label: str) -> dict[str, Any]:  # fmt: skip
    """One pod of a gang for kube-scheduler; named like gputwin's GPUJob pods (`<job>-0-<i>`)."""
    gpus = {"nvidia.com/gpu": str(GANG_POD_GPUS)}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": f"{gang.name}-0-{index}", "labels": _labels(phase, gang, task_type, run_label),
                     "annotations": {"bench.gputwin.io/gang-pods": str(gang.pods)}},
        "spec": {
            "schedulerName": scheduler, "restartPolicy": "Never", "terminationGracePeriodSeconds": 0,
            "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
            "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10",
                            "resources": {"requests": gpus, "limits": gpus}}],
        },
    }  # fmt: skip


def gang_gpujob(gang: Gang, phase: str, task_type: str, run_label: str) -> dict[str, Any]:
    """The same job for gputwin: one GPUJob of all its GPUs (no duration: its pods run until deleted)."""
    return {
        "apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": gang.name},
        "spec": {"taskType": task_type, "gpus": gang.gpus,
                 "podTemplate": {"metadata": {"labels": _labels(phase, gang, task_type, run_label)},
                                 "spec": {"terminationGracePeriodSeconds": 0,
                                          "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}},
    }  # fmt: skip


@dataclass(frozen=True)
class GangOutcome:
    jobs: int
    complete: int  # every GPU of the job bound
    partial: int  # some but not all
    waiting: int  # none bound
    stranded_gpus: int  # GPUs held by the bound pods of partial jobs
    bound_gpus: int


def gang_outcome(tracker: Tracker, phase: str, gangs: list[Gang]) -> GangOutcome:
    """What the phase's scheduler left once binding stopped (pods still holding GPUs, by job)."""
    held = tracker.gang_gpus(phase)
    complete = partial = stranded = 0
    for gang in gangs:
        got = held.get(gang.name, 0)
        if got >= gang.gpus:
            complete += 1
        elif got > 0:
            partial += 1
            stranded += got
    return GangOutcome(len(gangs), complete, partial, len(gangs) - complete - partial, stranded,
                       sum(held.values()))  # fmt: skip


# --- a gang phase ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GangResult:
    scheduler: str
    available: bool
    note: str = ""
    jobs: int = 0
    complete: int = 0
    partial: int = 0
    waiting: int = 0
    stranded_gpus: int = 0
    bound_gpus: int = 0
    bound_pods: int = 0
    create_s: float | None = None
    phase_s: float | None = None
    overallocated_gpus: int = 0
    double_bound: int = 0
    ended: str = ""


def log(message: str) -> None:
    print(f"[kube_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def create_all(kube: Kube, path: str, bodies: list[dict[str, Any]]) -> float:
    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:  # in order, 8 at a time: the order holds but for neighbours
        list(pool.map(lambda body: kube.create(path, body), bodies))
    return time.monotonic() - t0


def wait_settled(tracker: Tracker, phase: str, gpus: int, stall: float, timeout: float) -> str:
    """Until `gpus` GPUs are bound, nothing bound for `stall` s (the first binding may take up to
    60 s: a scheduler's first pass over its new jobs), or `timeout`; why it ended."""
    start = time.monotonic()
    while True:
        time.sleep(0.2)
        if sum(tracker.gang_gpus(phase).values()) >= gpus:
            return "all bound"
        now, last = time.monotonic(), tracker.last_bind(phase)
        if now - (last or start) > (stall if last else max(stall, 60.0)):
            return f"settled ({stall:g} s idle)"
        if now - start > timeout:
            return f"timeout after {timeout:g} s"


def run_gang_phase(kube: Kube, tracker: Tracker, gangs: list[Gang], phase: str, scheduler: str,
                   args: argparse.Namespace, task_type: str, run_label: str) -> GangResult:  # fmt: skip
    """Submit every gang (as pods, or for gputwin as GPUJobs), wait until binding stops, count."""
    namespace = f"bench-{phase}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    total = sum(g.gpus for g in gangs)
    log(f"gang phase {phase}: {len(gangs)} jobs, {sum(g.pods for g in gangs)} pods, {total} GPUs, {scheduler}")
    t0 = time.monotonic()
    if scheduler == "gputwin":
        path = f"/apis/gputwin.io/v1alpha1/namespaces/{namespace}/gpujobs"
        create_s = create_all(kube, path, [gang_gpujob(g, phase, task_type, run_label) for g in gangs])
    else:
        order = gang_pod_order(gangs, args.seed, args.gang_order == "shuffled")
        bodies = [gang_pod_manifest(g, i, phase, scheduler, task_type, run_label) for g, i in order]
        create_s = create_all(kube, f"/api/v1/namespaces/{namespace}/pods", bodies)
    ended = wait_settled(tracker, phase, total, args.gang_stall, args.timeout)
    phase_s = time.monotonic() - t0
    out = gang_outcome(tracker, phase, gangs)
    view = tracker.phase_view(phase)
    log(f"  {ended} after {phase_s:.1f} s: {out.complete} complete, {out.partial} partial "
        f"({out.stranded_gpus} GPUs stranded), {out.waiting} waiting")  # fmt: skip
    return GangResult(scheduler, True, jobs=out.jobs, complete=out.complete, partial=out.partial,
                      waiting=out.waiting, stranded_gpus=out.stranded_gpus, bound_gpus=out.bound_gpus,
                      bound_pods=len(view.latencies), create_s=round(create_s, 2), phase_s=round(phase_s, 2),
                      overallocated_gpus=tracker.overallocated_gpus(phase), double_bound=view.double_bound,
                      ended=ended)  # fmt: skip


def clear_gang_pods(kube: Kube, tracker: Tracker, phase: str, names: list[str], timeout: float = 300) -> None:
    """Delete the phase's pods (they never end by themselves) and wait until their GPUs are free.

    One DELETE per pod over 8 connections: a deletecollection of 1,500 pods outlasted the API
    server's request timeout on this machine under load (it closed the connection).
    """
    path = f"/api/v1/namespaces/bench-{phase}/pods"
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda name: kube.delete(f"{path}/{name}?gracePeriodSeconds=0"), names))
    deadline = time.monotonic() + timeout
    while (running := tracker.running_count(phase)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if running:
        log(f"gang phase {phase}: {running} pod(s) still hold GPUs after {timeout:g} s; going on anyway")


GANG_ROWS = (
    ("gang jobs", "jobs"),
    ("  started whole", "complete"),
    ("  partly placed", "partial"),
    ("  none placed", "waiting"),
    ("GPUs stranded by partial jobs", "stranded_gpus"),
    ("GPUs bound", "bound_gpus"),
    ("pods bound", "bound_pods"),
    ("submitting s", "create_s"),
    ("phase wall s", "phase_s"),
    ("overallocated GPUs", "overallocated_gpus"),
    ("double bound", "double_bound"),
    ("ended", "ended"),
)


def gang_table(results: dict[str, GangResult]) -> str:
    lines = [f"{'gangs of 2-8 pods x 8 GPUs':38}" + "".join(f"{n:>22}" for n in results)]
    for label, key in GANG_ROWS:
        cells = ["n/a" if not r.available else str(getattr(r, key)) for r in results.values()]
        lines.append(f"{label:38}" + "".join(f"{c[:22]:>22}" for c in cells))
    lines += [f"{n}: not run: {r.note}" for n, r in results.items() if not r.available]
    return "\n".join(lines)


def gang_summary(results: dict[str, GangResult]) -> dict[str, Any]:
    a, b = results.get("kube-scheduler"), results.get("gputwin")
    a = a if a is not None and a.available else None
    b = b if b is not None and b.available else None
    return {
        "gang_jobs": a.jobs if a else b.jobs if b else None,
        "gang_partial_jobs_kube_scheduler": a.partial if a else None,
        "gang_stranded_gpus_kube_scheduler": a.stranded_gpus if a else None,
        "gang_partial_jobs_gputwin": b.partial if b else None,
        "gang_stranded_gpus_gputwin": b.stranded_gpus if b else None,
        "gang_phases": {n: asdict(r) for n, r in results.items()},
    }
