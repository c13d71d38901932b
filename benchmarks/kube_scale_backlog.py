"""Phase K of benchmarks/kube_scale.py (issue 17, item 6): scheduler throughput as kube-scheduler's
own scheduler_perf measures it, a backlog drained rather than a burst chased.

For each scheduler (kube-scheduler with its default client limits, kube-scheduler tuned to qps 1000 /
burst 2000, the gputwin operator) and each of `--repeat` rounds (interleaved, so drift in the shared
machine's load spreads over all three): `--backlog` one-GPU pods (for gputwin one-GPU GPUJobs, whose
pods it must create too, or with `--gputwin-backlog pods` pods with `schedulerName: gputwin`) are
created while no scheduler of theirs runs, with capacity ample (at most one pod per GPU, no run
time: KWOK keeps them Running); the watch must have seen every pod before the scheduler starts. Then
a fresh scheduler process starts and the drain rate is bound / (last binding - the moment the
process started: its start-up counts, as a restarted scheduler's would; bound / (last - first
binding), the rate without it, is reported beside). The same rate from the API server's own
clock (each pod's PodScheduled lastTransitionTime, whole seconds) is a cross-check; KWOK's CPU
seconds, the load average and how many pods went Running (not only bound) say whether KWOK or the
machine, rather than the scheduler, set the pace. Afterwards everything is deleted, one by one.
"""

from __future__ import annotations

import argparse
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from kube_scale_lib import Kube, proc_stats, request_counts
from kube_scale_operator import Operator, prepare_gputwin
from kube_scale_peers import TUNED, TunedScheduler
from kube_scale_plane import GPUS_PER_NODE, RUN_LABEL, TASK_TYPE, Job, Plane, log, pod_manifest
from kube_scale_watch import Tracker

SCHEDULERS = {"kube-scheduler": "d", "tuned kube-scheduler": "t", "gputwin": "g"}  # name -> phase letter
GPUJOBS = "/apis/gputwin.io/v1alpha1/namespaces/{ns}/gpujobs"


@dataclass(frozen=True)
class BacklogRun:
    scheduler: str
    round: int
    available: bool = True
    note: str = ""
    pods: int = 0
    bound: int = 0
    pods_per_s: float | None = None  # bound / (last binding - scheduler process started), the benchmark's watch
    pods_per_s_first_bind: float | None = None  # bound / (last binding - first binding): without start-up
    apiserver_pods_per_s: float | None = None  # the same as pods_per_s from the API server's timestamps
    startup_s: float | None = None  # process start -> ready (it may bind before its probe answers)
    first_bind_s: float | None = None  # process start -> first binding
    create_s: float | None = None  # creating the backlog (before the scheduler started)
    running: int = 0  # pods KWOK made Running
    running_lag_s: float | None = None  # last binding -> every bound pod Running (1 s polls)
    scheduler_cpu_s: float | None = None
    kwok_cpu_s: float | None = None  # during the drain
    load_before: str = ""
    load_after: str = ""
    overallocated_gpus: int = 0
    double_bound: int = 0
    ended: str = ""
    scheduler_requests: float | None = None  # the operator's (APF flow service-accounts) or kube-scheduler's
    requests: dict[str, float] | None = None  # every client's, by verb and resource, during the drain


def loadavg() -> str:
    return " ".join(Path("/proc/loadavg").read_text().split()[:3])


def kwok_pid(plane: Plane) -> int:
    pids = dict(line.split()[:2] for line in (plane.state / "pids").read_text().splitlines() if line.strip())
    return int(pids.get("kwok", 0))


def backlog_gpujob(index: int, phase: str) -> dict[str, Any]:
    labels = {RUN_LABEL: "1", "bench.gputwin.io/phase": phase, "bench.gputwin.io/job": str(index),
              "gputwin.io/task-type": TASK_TYPE}  # fmt: skip
    return {
        "apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": f"job-{index:05d}"},
        "spec": {"taskType": TASK_TYPE, "gpus": 1,
                 "podTemplate": {"metadata": {"labels": labels},
                                 "spec": {"terminationGracePeriodSeconds": 0,
                                          "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}},
    }  # fmt: skip


def backlog_pod(index: int, phase: str, scheduler: str) -> dict[str, Any]:
    """The burst's pod of one GPU without a run time (KWOK keeps it Running)."""
    body = pod_manifest(Job(index, 1, 0), phase, scheduler)
    del body["metadata"]["annotations"]
    return body


def create_backlog(kube: Kube, phase: str, count: int, scheduler: str, gpujobs: bool = True) -> float:
    """The backlog's objects over 8 connections; for gputwin GPUJobs, or (`gpujobs=False`) pods with
    `schedulerName: gputwin`, the same work as kube-scheduler's: bind only, no pod to create."""
    namespace = f"bench-{phase}"
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    if scheduler == "gputwin" and gpujobs:
        path, bodies = GPUJOBS.format(ns=namespace), [backlog_gpujob(i, phase) for i in range(count)]
    else:
        name = {"tuned kube-scheduler": TUNED, "gputwin": "gputwin"}.get(scheduler, "backlog-scheduler")
        path, bodies = f"/api/v1/namespaces/{namespace}/pods", [backlog_pod(i, phase, name) for i in range(count)]
    t0 = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda body: kube.create(path, body), bodies))
    return time.monotonic() - t0


def wait_drained(tracker: Tracker, phase: str, total: int, stall: float, timeout: float, since: float) -> str:
    while True:
        time.sleep(0.1)
        bound, last, now = tracker.bound_count(phase), tracker.last_bind(phase), time.monotonic()
        if bound >= total:
            return "all bound"
        if now - (last or since) > stall:
            return f"stalled: nothing bound for {stall:g} s"
        if now - since > timeout:
            return f"timeout after {timeout:g} s"


def first_bind(tracker: Tracker, phase: str) -> float | None:
    with tracker.lock:
        times = [p.bound for p in tracker.pods.values() if p.phase == phase and p.bound is not None]
    return min(times) if times else None


def list_pods(kube: Kube, phase: str) -> list[dict[str, Any]]:
    return list(kube.request("GET", f"/api/v1/namespaces/bench-{phase}/pods")["items"])


def server_bind_times(pods: list[dict[str, Any]]) -> list[float]:
    """Each bound pod's PodScheduled lastTransitionTime (or its creation, when it was made bound)."""
    out = []
    for pod in pods:
        if not pod.get("spec", {}).get("nodeName"):
            continue
        conditions = {c["type"]: c for c in pod.get("status", {}).get("conditions", [])}
        stamp = conditions.get("PodScheduled", {}).get("lastTransitionTime") or pod["metadata"]["creationTimestamp"]
        out.append(datetime.fromisoformat(stamp).timestamp())
    return out


def wait_running(kube: Kube, phase: str, bound: int, timeout: float = 120) -> tuple[int, float | None, list[Any]]:
    """Poll (after the drain, so it costs the scheduler nothing) until every bound pod is Running."""
    t0 = time.monotonic()
    while True:
        pods = list_pods(kube, phase)
        running = sum(1 for p in pods if p.get("status", {}).get("phase") == "Running")
        if running >= bound or time.monotonic() - t0 > timeout:
            return running, (time.monotonic() - t0 if running >= bound else None), pods
        time.sleep(1)


def clear(kube: Kube, tracker: Tracker, phase: str, gpujobs: bool) -> None:
    """Delete the round's GPUJobs (the operator is stopped) and pods, one by one; wait for the GPUs."""
    namespace = f"bench-{phase}"
    paths = []
    if gpujobs:
        jobs = kube.request("GET", GPUJOBS.format(ns=namespace))["items"]
        paths += [f"{GPUJOBS.format(ns=namespace)}/{j['metadata']['name']}" for j in jobs]
    paths += [f"/api/v1/namespaces/{namespace}/pods/{p['metadata']['name']}?gracePeriodSeconds=0"
              for p in list_pods(kube, phase)]  # fmt: skip
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(kube.delete, paths))
    deadline = time.monotonic() + 300
    while tracker.running_count(phase) and time.monotonic() < deadline:
        time.sleep(0.5)


class _Started:
    """One scheduler process of a round: start, readiness, pid, stop."""

    def __init__(self, plane: Plane, scheduler: str, kubeconfig: Path | None) -> None:
        self.operator = Operator(plane, kubeconfig) if kubeconfig else None
        tuned = scheduler == "tuned kube-scheduler"
        self.kube = None if kubeconfig else TunedScheduler(plane.state, plane.bin_dir,
                                                           TUNED if tuned else "backlog-scheduler", tuned)  # fmt: skip

    def start(self) -> str:
        """'' once started (kube-scheduler: healthy); the operator is not waited for: with a backlog of
        GPUJobs its /readyz answered only after ~110 s, when it had bound them all (2,000 here)."""
        if self.operator is not None:
            self.operator.start()
            return ""
        assert self.kube is not None
        return self.kube.start()

    def pid(self) -> int:
        proc = self.operator.proc if self.operator else self.kube.proc if self.kube else None
        return proc.pid if proc else 0

    def stop(self) -> None:
        (self.operator or self.kube).stop()  # type: ignore[union-attr]


def run_round(plane: Plane, tracker: Tracker, scheduler: str, rnd: int, args: argparse.Namespace,
              kubeconfig: Path | None) -> BacklogRun:  # fmt: skip
    phase, total = f"k{SCHEDULERS[scheduler]}{rnd}", args.backlog
    gpujobs = kubeconfig is not None and args.gputwin_backlog == "gpujobs"
    create_s = create_backlog(plane.kube, phase, total, scheduler, gpujobs)
    while not gpujobs and tracker.live_count(phase) < total:  # the watch has the whole backlog
        time.sleep(0.1)
    started, kwok, load0 = _Started(plane, scheduler, kubeconfig), kwok_pid(plane), loadavg()
    counts0 = request_counts(plane.kube)
    t_start, wall_start, kwok0 = time.monotonic(), time.time(), proc_stats(kwok).cpu_s
    why = started.start()
    ready = time.monotonic()
    try:
        if why:
            clear(plane.kube, tracker, phase, gpujobs)
            return BacklogRun(scheduler, rnd, False, note=why)
        ended = wait_drained(tracker, phase, total, args.stall, args.timeout, t_start)
        cpu = proc_stats(started.pid()).cpu_s
    finally:
        started.stop()
    kwok_cpu, load1 = proc_stats(kwok).cpu_s - kwok0, loadavg()
    requests = _delta(counts0, request_counts(plane.kube))
    bound, last, first = tracker.bound_count(phase), tracker.last_bind(phase), first_bind(tracker, phase)
    running, lag, pods = wait_running(plane.kube, phase, bound)
    stamps = server_bind_times(pods)
    view = tracker.phase_view(phase)
    result = BacklogRun(
        scheduler, rnd, pods=total, bound=bound, create_s=round(create_s, 2),
        pods_per_s=_rate(bound, last, t_start), pods_per_s_first_bind=_rate(bound, last, first),
        apiserver_pods_per_s=_rate(len(stamps), max(stamps, default=None), wall_start),
        startup_s=round(ready - t_start, 2) if kubeconfig is None else None, first_bind_s=round(first - t_start, 3) if first else None,
        running=running, running_lag_s=round(lag, 1) if lag is not None else None, scheduler_cpu_s=round(cpu, 2),
        kwok_cpu_s=round(kwok_cpu, 2), load_before=load0, load_after=load1,
        overallocated_gpus=tracker.overallocated_gpus(phase), double_bound=view.double_bound, ended=ended,
        scheduler_requests=requests.get("flow service-accounts") if kubeconfig else None,
        requests={k: v for k, v in requests.items() if k.startswith("request ")},
    )  # fmt: skip
    log(f"  backlog {scheduler} round {rnd}: {result.pods_per_s} pods/s ({ended}), {running} Running, "
        f"KWOK {result.kwok_cpu_s} CPU s, load {load0} -> {load1}")  # fmt: skip
    clear(plane.kube, tracker, phase, gpujobs)
    return result


def _delta(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in sorted(after.items()) if v - before.get(k, 0.0) > 0}


def _rate(count: int, last: float | None, since: float | None) -> float | None:
    return round(count / (last - since), 2) if count and last is not None and since is not None and last > since else None


def run_backlog(plane: Plane, tracker: Tracker, args: argparse.Namespace, schedulers: list[str]) -> list[BacklogRun]:
    """Every round of every scheduler in `schedulers`, interleaved."""
    log(f"phase K: a backlog of {args.backlog} one-GPU pods on {args.nodes * GPUS_PER_NODE} GPUs, "
        f"{args.repeat} rounds of {', '.join(schedulers)}")  # fmt: skip
    kubeconfig = prepare_gputwin(plane, args.nodes) if "gputwin" in schedulers else None
    runs: list[BacklogRun] = []
    for rnd in range(1, args.repeat + 1):
        for scheduler in schedulers:
            try:
                runs.append(run_round(plane, tracker, scheduler, rnd, args, kubeconfig if scheduler == "gputwin" else None))
            except Exception as exc:  # noqa: BLE001  (keep the other rounds' figures)
                runs.append(BacklogRun(scheduler, rnd, False, note=f"failed: {exc!r}"[:400]))
    return runs


def spread(values: list[float]) -> dict[str, float] | None:
    return {"min": min(values), "median": round(statistics.median(values), 2), "max": max(values)} if values else None


def backlog_summary(runs: list[BacklogRun]) -> dict[str, Any]:
    rates = {s: spread([r.pods_per_s for r in runs if r.scheduler == s and r.pods_per_s is not None])
             for s in dict.fromkeys(r.scheduler for r in runs)}  # fmt: skip
    median = {s: v["median"] for s, v in rates.items() if v}
    g = median.get("gputwin")
    ratio = {peer: round(g / median[peer], 3) if g and median.get(peer) else None
             for peer in ("kube-scheduler", "tuned kube-scheduler")}  # fmt: skip
    return {
        "backlog_pods": runs[0].pods if runs else None,
        "backlog_pods_per_s": rates,
        "backlog_apiserver_pods_per_s": {
            s: spread([r.apiserver_pods_per_s for r in runs if r.scheduler == s and r.apiserver_pods_per_s])
            for s in rates
        },
        "backlog_first_to_last_pods_per_s": {
            s: spread([r.pods_per_s_first_bind for r in runs if r.scheduler == s and r.pods_per_s_first_bind])
            for s in rates
        },
        "backlog_ratio": ratio["kube-scheduler"], "backlog_ratio_tuned": ratio["tuned kube-scheduler"],
        "backlog_all_running": all(r.running == r.bound for r in runs if r.available) if runs else None,
        "backlog_overallocated_gpus": sum(r.overallocated_gpus for r in runs),
        "backlog_double_bound": sum(r.double_bound for r in runs),
        "backlog_runs": [asdict(r) for r in runs],
    }  # fmt: skip


def backlog_table(runs: list[BacklogRun]) -> str:
    out = backlog_summary(runs)
    title = (f"backlog of {out['backlog_pods']} one-GPU pods, drained: pods/s from process start to last binding"
             f" (min / median / max of {max(r.round for r in runs)} rounds; API server's clock in brackets)")
    lines = [title]
    for s, v in out["backlog_pods_per_s"].items():
        api = out["backlog_apiserver_pods_per_s"].get(s)
        lines.append(f"  {s:24} " + (f"{v['min']} / {v['median']} / {v['max']}" if v else "n/a")
                     + (f"   [{api['min']} / {api['median']} / {api['max']}]" if api else ""))  # fmt: skip
    for r in runs:
        lines.append(f"  {r.scheduler} #{r.round}: " + (f"not run: {r.note}" if not r.available else
                     f"{r.bound}/{r.pods} bound, {r.running} Running, ready after {r.startup_s} s, first binding "
                     f"after {r.first_bind_s} s, first->last {r.pods_per_s_first_bind} pods/s, scheduler {r.scheduler_cpu_s} CPU s, KWOK {r.kwok_cpu_s} CPU s, "
                     f"load {r.load_before} -> {r.load_after}, {r.ended}"
                     + (f", its requests {r.scheduler_requests:.0f} ({r.scheduler_requests / r.pods:.2f} per pod)"
                        if r.scheduler_requests else "")
                     + (f"\n    requests (every client): " + ", ".join(f"{k[8:]} {v:.0f}" for k, v in (r.requests or {}).items())
                        if r.requests else "")))  # fmt: skip
    for key, peer in (("backlog_ratio", "kube-scheduler"), ("backlog_ratio_tuned", "tuned kube-scheduler")):
        if out[key] is not None:
            lines.append(f"gputwin / {peer} backlog pods per second (medians): {out[key]}")
    return "\n".join(lines)
