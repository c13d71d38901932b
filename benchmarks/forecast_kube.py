"""The operator's `status.forecast` against the starts that happened, on a real API server + KWOK.

Issue 15 item 4, its Kubernetes half. It starts its own control plane (`kube_scale.control_plane`:
etcd, kube-apiserver, kube-scheduler, KWOK) with `--nodes` KWOK nodes x 8 GPUs, the CRDs and one
partition (`kube_scale.cluster_objects`: fifo with backfill, consolidate), and the operator
(Kubernetes backend, `GPUTWIN_FORECAST_SECONDS` `--period`, `GPUTWIN_FORECAST_SAMPLES`
`--samples`). `--jobs` consecutive jobs of the trace excerpt of `forecast_accuracy.excerpt` (philly_mix1
from row `--offset`, compressed `--compress`x, run times in [3, `--max-seconds`] s) are created as
GPUJobs at their arrivals, and KWOK ends each pod after its `durationSeconds`. At `--moments`
instants spread over the expected makespan, every Queued job's `status.forecast.startTime.p50`
and `computedAt` are read. Once every job has Succeeded, its `status.startTime` is the actual start.
Per (moment, queued job): |p50 - actual start| in seconds, and relative to the actual wait from
`computedAt`. `--json`: the table to stderr, last line of stdout `{"kube": {...}}`.

Before the comparison (issue 15 item 5), on the same control plane and operator, the operator's
own start latency is measured (`calibrate_room_latency`, as `slurm_live.calibrate_room_latency`
does for SLURM): a wave of whole-node (8-GPU) GPUJobs of 2 s fills every node, a second wave each
waits for one; per job of the second wave, from the watch event of its node's last pod Succeeded
(room appears, as the API server says it) to the watch event binding its pod there; the mean. The
operator is then restarted with `GPUTWIN_FORECAST_START_LATENCY` set to it, so its forecasts start
each job that much after room appears (measured, never fitted; `--start-latency S` applies S
instead, 0: not modelled, for the comparison without it).

    python benchmarks/forecast_kube.py --json                                   # 120 jobs, 4 nodes
    python benchmarks/forecast_kube.py --jobs 30 --max-seconds 20 --moments 2 --json   # smoke
    python benchmarks/forecast_kube.py --start-latency 0 --json                 # latency measured, not applied
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from forecast_accuracy import TRACE, Job, excerpt, quantile

from kube_scale_operator import Operator, cluster_objects, operator_kubeconfig
from kube_scale_plane import GPUS_PER_NODE, ROOT, RUN_LABEL, TASK_TYPE, control_plane, create_nodes, node_name
from kube_scale_watch import Tracker

from gputwin.api.status import epoch_seconds

NS = "fcast"
GPUJOBS = f"/apis/gputwin.io/v1alpha1/namespaces/{NS}/gpujobs"
Seen = list[tuple[str, float, float]]  # (job name, computedAt, predicted p50 start) per moment and job


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/forecast_kube.py", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=120)
    parser.add_argument("--nodes", type=int, default=4, help="KWOK nodes of 8 GPUs (default 4)")
    parser.add_argument("--compress", type=float, default=30.0)
    parser.add_argument("--offset", type=int, default=29000)
    parser.add_argument("--max-seconds", type=int, default=60)
    parser.add_argument("--moments", type=int, default=4)
    parser.add_argument("--period", type=float, default=2.0, help="the operator's forecast period, s")
    parser.add_argument("--samples", type=int, default=16)
    parser.add_argument("--trace", type=Path, default=TRACE)
    parser.add_argument("--start-latency", type=float, default=None, metavar="S",
                        help="apply S seconds instead of the measured start latency (0: not modelled)")  # fmt: skip
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.nodes < 1 or args.moments < 1 or args.period <= 0 or args.max_seconds < 3:
        parser.error("--jobs, --nodes, --moments >= 1; --period > 0; --max-seconds >= 3")
    if args.start_latency is not None and not 0 <= args.start_latency <= 3600:
        parser.error("--start-latency: seconds in [0, 3600]")
    return args


def gpujob(i: int, job: Job) -> dict[str, Any]:
    spec = {"taskType": TASK_TYPE, "gpus": job.gpus, "durationSeconds": job.seconds, "user": job.name.split("-")[0],
            "jobName": job.name}  # fmt: skip
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": f"j{i:04d}"}, "spec": spec}


def submit_all(kube: Any, jobs: Sequence[Job], t0: float) -> None:
    for i, job in enumerate(jobs):
        delay = t0 + job.arrival - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the trace's arrival process
        kube.create(GPUJOBS, gpujob(i, job))


def read_forecasts(kube: Any) -> Seen:
    seen = []
    for item in kube.request("GET", GPUJOBS)["items"]:
        status = item.get("status") or {}
        got = status.get("forecast") or {}
        p50 = (got.get("startTime") or {}).get("p50")
        if status.get("phase") == "Queued" and p50 and got.get("computedAt"):
            seen.append((item["metadata"]["name"], epoch_seconds(got["computedAt"]), epoch_seconds(p50)))
    return seen


def wait_all_done(kube: Any, count: int, timeout: float) -> dict[str, float]:
    """Each job's actual start, once all `count` have Succeeded."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        items = kube.request("GET", GPUJOBS)["items"]
        done = {i["metadata"]["name"]: i["status"] for i in items if (i.get("status") or {}).get("phase") == "Succeeded"}
        if len(done) == count:
            return {name: epoch_seconds(s["startTime"]) for name, s in done.items()}
        time.sleep(2)  # polling the outcome, not a wait for a fixed time
    raise SystemExit(f"error: not every job succeeded within {timeout:.0f} s")


def room_job(i: int, seconds: int) -> dict[str, Any]:
    """A whole-node GPUJob of `seconds` whose pods the watch of `calibrate_room_latency` sees."""
    labels = {RUN_LABEL: "1", "bench.gputwin.io/phase": "room", "bench.gputwin.io/job": str(i)}
    template = {"metadata": {"labels": labels},
                "spec": {"terminationGracePeriodSeconds": 0,
                         "containers": [{"name": "main", "image": "registry.k8s.io/pause:3.10"}]}}  # fmt: skip
    spec = {"taskType": TASK_TYPE, "gpus": GPUS_PER_NODE, "durationSeconds": seconds, "podTemplate": template}
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": f"room{i}"}, "spec": spec}


def calibrate_room_latency(kube: Any, nodes: int, seconds: int = 2) -> tuple[float, int]:
    """The operator's start latency after a pod's end made room: (mean seconds, jobs measured).

    Two waves of whole-node GPUJobs on `nodes` idle nodes (see the module docstring); each gap is
    the binding of a second-wave pod minus the end of the pod before it on that node, both as
    watch events arrive (the API server's own stamps are whole seconds). Measured, never fitted.
    """
    ns = f"{NS}-room"
    kube.create("/api/v1/namespaces", {"metadata": {"name": ns}})
    capacity = {node_name(i): GPUS_PER_NODE for i in range(nodes)}
    with Tracker.watching(kube, f"{RUN_LABEL}=1", capacity) as tracker:
        for i in range(2 * nodes):
            kube.create(f"/apis/gputwin.io/v1alpha1/namespaces/{ns}/gpujobs", room_job(i, seconds))
        deadline = time.monotonic() + 120 + 8 * seconds
        while tracker.bound_count("room") < 2 * nodes or tracker.running_count("room"):
            if time.monotonic() > deadline:
                raise SystemExit(f"error: the start-latency waves did not finish within {120 + 8 * seconds} s")
            time.sleep(0.2)  # polling the watch's copy
        gaps = room_gaps(tracker)
    return (max(0.0, sum(gaps) / len(gaps)) if gaps else 0.0), len(gaps)


def room_gaps(tracker: Tracker) -> list[float]:
    """Per bound pod of the waves whose node's room began at a pod's end seen by the watch (not at
    the start: the first wave), its binding minus that end."""
    with tracker.lock:
        return [p.bound - p.room for p in tracker.pods.values() if p.phase == "room" and p.bound is not None
                and p.room]  # fmt: skip


def ready_operator(plane: Any, kubeconfig: Path, latency: float) -> Operator:
    """The operator, started with its forecasts modelling `latency` seconds, once ready."""
    os.environ["GPUTWIN_FORECAST_START_LATENCY"] = f"{latency:.3f}"
    operator = Operator(plane, kubeconfig)
    operator.start()
    why = operator.wait_ready()
    if why:
        operator.stop()
        raise SystemExit(f"error: the operator is not available: {why}")
    return operator


def measure_latency(plane: Any, kubeconfig: Path, args: argparse.Namespace) -> tuple[float, int]:
    """The operator's start latency, measured with an operator of its own (stopped after)."""
    operator = ready_operator(plane, kubeconfig, 0.0)
    try:
        return calibrate_room_latency(plane.kube, args.nodes)
    finally:
        operator.stop()


def run(args: argparse.Namespace, jobs: Sequence[Job]) -> tuple[list[Seen], dict[str, float], tuple[float, int]]:
    os.environ.update(GPUTWIN_FORECAST_SECONDS=str(args.period), GPUTWIN_FORECAST_SAMPLES=str(args.samples))
    with control_plane() as plane:
        create_nodes(plane.kube, args.nodes)
        plane.kubectl_run("apply", "-f", str(ROOT / "crds"))
        plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
        plane.kubectl_run("apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in cluster_objects(args.nodes)))
        plane.kube.create("/api/v1/namespaces", {"metadata": {"name": NS}})
        kubeconfig = operator_kubeconfig(plane)
        measured = measure_latency(plane, kubeconfig, args)
        applied = measured[0] if args.start_latency is None else args.start_latency
        print(f"operator start latency after room appears: {measured[0]:.3f} s (mean of {measured[1]} jobs); "
              f"forecasts model {applied:.3f} s", file=sys.stderr, flush=True)  # fmt: skip
        operator = ready_operator(plane, kubeconfig, applied)
        try:
            makespan = max(jobs[-1].arrival, sum(j.gpus * j.seconds for j in jobs) / (args.nodes * GPUS_PER_NODE))
            t0 = time.monotonic()
            submitter = threading.Thread(target=submit_all, args=(plane.kube, jobs, t0), daemon=True)
            submitter.start()
            moments = []
            for k in range(args.moments):
                delay = t0 + 5 + makespan * (k + 0.5) / (args.moments + 1) - time.monotonic()
                if delay > 0:
                    time.sleep(delay)  # the chosen instants
                moments.append(read_forecasts(plane.kube))
            submitter.join()
            return moments, wait_all_done(plane.kube, len(jobs), 300 + 4 * makespan), measured
        finally:
            operator.stop()


def summary(moments: list[Seen], actual: dict[str, float]) -> dict[str, Any]:
    pairs = [(abs(p50 - actual[name]), abs(p50 - actual[name]) / max(actual[name] - at, 1.0))
             for seen in moments for name, at, p50 in seen if name in actual]  # fmt: skip
    signed = [p50 - actual[name] for seen in moments for name, _, p50 in seen if name in actual]
    out: dict[str, Any] = {"compared": len(pairs), "queued_with_forecast_at_moments": [len(m) for m in moments],
                           "gputwin_median_signed_err_s": round(quantile(signed, 0.5), 2)}  # > 0: predicted late
    for q, tag in ((0.5, "median"), (0.9, "p90")):
        out[f"gputwin_{tag}_abs_err_s"] = round(quantile([a for a, _ in pairs], q), 2)
        out[f"gputwin_{tag}_rel_err"] = round(quantile([r for _, r in pairs], q), 3)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    jobs = excerpt(args.trace, args.offset, args.jobs, args.compress, args.max_seconds)
    load = open("/proc/loadavg").read().split()[0]
    began = time.monotonic()
    moments, actual, (measured, gaps) = run(args, jobs)
    applied = measured if args.start_latency is None else args.start_latency
    result = {"jobs": len(jobs), "nodes": args.nodes, "moments": args.moments, "samples": args.samples,
              "period_s": args.period, "load_at_start": float(load), "start_latency_s": round(applied, 3),
              "start_latency_measured_s": round(measured, 3), "start_latency_jobs": gaps,
              **summary(moments, actual), "wall_seconds": round(time.monotonic() - began, 1),
              "load_at_end": float(open("/proc/loadavg").read().split()[0])}  # fmt: skip
    out = sys.stderr if args.json else sys.stdout
    print(f"operator forecasts on KWOK: {len(jobs)} jobs on {args.nodes} x 8 GPUs, load {load}; queued with a "
          f"forecast at moments {result['queued_with_forecast_at_moments']}; compared {result['compared']}", file=out)
    print(f"start latency: measured {result['start_latency_measured_s']} s over {gaps} jobs, modelled "
          f"{result['start_latency_s']} s", file=out)  # fmt: skip
    print(f"median / p90 abs error: {result['gputwin_median_abs_err_s']} / {result['gputwin_p90_abs_err_s']} s; "
          f"relative to the wait {result['gputwin_median_rel_err']} / {result['gputwin_p90_rel_err']}; median signed "
          f"(predicted - actual) {result['gputwin_median_signed_err_s']} s", file=out)
    if args.json:
        print(json.dumps({"kube": result}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
