"""The gputwin operator against the default kube-scheduler, on the same burst of GPU pods (issue 5).

One run, on a real control plane it starts itself (`scripts/k8s/start.sh --with-scheduler`: etcd,
kube-apiserver, kube-scheduler, KWOK; stopped at the end, also on Ctrl-C):

1. N KWOK nodes x 8 `nvidia.com/gpu` under 16 leaf switches (labels `gputwin.io/switch=leafK`,
   `gputwin.io/partition=bench`; the conventions of scripts/k8s/fake-nodes.sh, created here in
   parallel because kubectl apply needs ~0.2 s per node).
2. A burst of P pods (fixed seed): 1, 2, 4 or 8 GPUs (requests = limits), each annotated
   `gputwin.io/run-duration` so KWOK completes it and its GPUs free up.
3. Phase A: `schedulerName: default-scheduler` in bench-a: kube-scheduler places them, then every pod is deleted.
4. Phase B: the same pods with `schedulerName: gputwin` in bench-b, placed by `gputwin operator
   --all-namespaces` (GPUTWIN_BACKEND=kubernetes, a subprocess) over a SwitchTopology, GPUPartition
   and SchedulingPolicy that describe the same nodes. `--restart` kills it (SIGKILL) when half the
   pods are bound and starts a new one. When the operator cannot start (no such backend), phase B
   says so and reports nothing else. Forecasts every `--forecast-period` s (default 10; deployed: 60).
   Phase F (just before B): the same in bench-f, forecasts off (issue 15: p99 unchanged with them on).
5. Phase T (between A and B): the same pods in bench-t for a second kube-scheduler with its client
   rate limits raised (qps 1000 / burst 2000, kube_scale_peers.TunedScheduler), an honest peer.
0. Phase K (first; kube_scale_backlog says more): a backlog of one-GPU pods (GPUJobs for gputwin)
   created before a fresh process of each scheduler starts, capacity ample, drained --repeat times
   per scheduler (interleaved): pods/s from ready to last binding, min / median / max, as
   kube-scheduler's scheduler_perf measures throughput (the burst's rate follows its creation and
   the capacity, not the scheduler). Everything is deleted before phase A.
6. Phase G: gangs (jobs of 2-8 pods x 8 GPUs that must start together, 1.5 x the cluster's GPUs):
   as plain pods for kube-scheduler (after T; deleted afterwards), as GPUJobs for gputwin (after
   B); once binding stops, the jobs left partly placed and the GPUs they strand (kube_scale_peers).

Everything is measured from ONE watch on the benchmark's pods (no list polling), timestamped on
arrival: creation -> binding latency (ADDED -> first event with spec.nodeName), pods bound per
second (bound / (last binding - first creation)), GPUs in use per node as pods bind and finish
(overallocated_gpus = sum over nodes of the peak excess over capacity; the watch is ordered, so a
binding is never seen before the completion that freed its GPUs), double_bound (a pod whose node
changed, or a job bound under two pod uids), lost_jobs (pods still unbound when nothing bound for
`--stall` s and a node has room for them). API requests: `apiserver_request_total` from the API
server's /metrics before and after each phase (every client, so creation and KWOK are in both),
and for the operator alone its own requests (it runs with a ServiceAccount token, so APF files
them under flow schema `service-accounts` while every other client is `exempt`). CPU seconds and
peak RSS of the scheduler process come from /proc (utime+stime, VmHWM); the operator's failed
reconcile passes (each rebuilds its state: pods it just placed may be made again) from its log.

    python benchmarks/kube_scale.py                          # 1,000 nodes, 10,000 pods
    python benchmarks/kube_scale.py --nodes 100 --pods 1000 --restart --json
    python benchmarks/kube_scale.py --phases a,b              # without the backlog, the tuned peer and the gangs
    python benchmarks/kube_scale.py --phases k --nodes 250 --backlog 2000 --json   # the backlog alone
    KUBE_SCALE_PYSPY=/tmp/spy python benchmarks/kube_scale.py --phases k --backlog-schedulers g --nodes 100 \
        --backlog 800 --repeat 1   # gputwin's backlog only, its operator under py-spy for 60 s (then killed)

Phase K also prints every client's API requests during each drain, by verb and resource, and the
operator's own (APF flow service-accounts) per pod.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import time
import traceback
from dataclasses import asdict, replace
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ is no package: its sibling modules
from kube_scale_backlog import SCHEDULERS, BacklogRun, backlog_summary, backlog_table, run_backlog
from kube_scale_lib import breakdown, percentile, proc_stats, read_trace, request_counts
from kube_scale_operator import Operator, prepare_gputwin
from kube_scale_peers import (
    TUNED,
    GangResult,
    TunedScheduler,
    clear_gang_pods,
    default_gang_jobs,
    gang_table,
    gang_workload,
    run_gang_phase,
)
from kube_scale_plane import (
    GPUS_PER_NODE,
    RUN_LABEL,
    TASK_TYPE,
    Job,
    Plane,
    control_plane,
    create_nodes,
    create_pods,
    log,
    node_name,
    workload,
)
from kube_scale_report import FORECASTS_OFF, PhaseResult, summary, table
from kube_scale_watch import Tracker

# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/kube_scale.py",
        description="Bind a burst of GPU pods on KWOK nodes with kube-scheduler, then with the gputwin "
        "operator, on a control plane this script starts and stops; print both side by side.",
    )
    parser.add_argument("--nodes", type=int, default=1000, help="KWOK nodes, 8 GPUs each (default 1000)")
    parser.add_argument("--pods", type=int, default=10_000, help="pods in the burst (default 10000)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the pods' GPUs and run times")
    parser.add_argument("--durations", default="5-30", metavar="MIN-MAX",
                        help="run time of each pod, whole seconds drawn uniformly (default 5-30)")  # fmt: skip
    parser.add_argument("--phases", default="k,a,t,f,b,g",
                        help="a comma list of k (a backlog drained by each scheduler, first), a (kube-scheduler), "
                        "t (kube-scheduler tuned: client qps 1000, burst 2000), f (gputwin, forecasts off), "
                        "b (gputwin), g (gangs, with kube-scheduler if a, gputwin if b); default k,a,t,f,b,g")  # fmt: skip
    parser.add_argument("--forecast-period", type=float, default=10.0, metavar="S",
                        help="phase B: the operator's GPUTWIN_FORECAST_SECONDS (default 10; 0: off)")  # fmt: skip
    parser.add_argument("--backlog", type=int, default=None, metavar="N",
                        help="phase K: one-GPU pods in the backlog, at most the cluster's GPUs "
                        "(default: --pods or the cluster's GPUs, the fewer)")  # fmt: skip
    parser.add_argument("--gputwin-backlog", choices=("gpujobs", "pods"), default="gpujobs",
                        help="phase K: gputwin's backlog as one-GPU GPUJobs (it creates and binds their pods; "
                        "default) or as pods with schedulerName gputwin (it binds them, like kube-scheduler)")  # fmt: skip
    parser.add_argument("--backlog-schedulers", default="all", metavar="LIST",
                        help="phase K: a comma list of d (kube-scheduler), t (tuned), g (gputwin); default all")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, metavar="R",
                        help="phase K: rounds per scheduler (default 3: min / median / max)")  # fmt: skip
    parser.add_argument("--gang-jobs", type=int, default=None, metavar="N",
                        help="gang jobs of 2-8 pods x 8 GPUs (default: 1.5 x the cluster's GPUs, ~0.3 per node)")  # fmt: skip
    parser.add_argument("--gang-order", choices=("shuffled", "grouped"), default="shuffled",
                        help="kube-scheduler's gang pods: all jobs submitted at once, their pods interleaved "
                        "(default), or job after job")  # fmt: skip
    parser.add_argument("--gang-stall", type=float, default=15.0, metavar="S",
                        help="a gang phase ends when nothing bound for S s (default 15)")  # fmt: skip
    parser.add_argument("--restart", action="store_true",
                        help="phase B: SIGKILL the operator when half the pods are bound, start another")  # fmt: skip
    parser.add_argument("--stall", type=float, default=None, metavar="S",
                        help="end a phase when nothing bound for S s (default: longest run time + 30)")  # fmt: skip
    parser.add_argument("--timeout", type=float, default=1800, metavar="S", help="longest phase (default 1800)")
    parser.add_argument("--json", action="store_true", help="stdout's last line is one JSON object")
    args = parser.parse_args(argv)
    try:
        low, high = (int(x) for x in args.durations.split("-"))
    except ValueError:
        parser.error(f"--durations {args.durations!r}: expected MIN-MAX in whole seconds, e.g. 5-30")
    if not 1 <= low <= high:
        parser.error(f"--durations {args.durations!r}: need 1 <= MIN <= MAX")
    phases = {p.strip() for p in args.phases.split(",")}
    if not phases or phases - {"k", "a", "t", "f", "b", "g"} or phases == {"g"}:
        parser.error(f"--phases {args.phases!r}: a comma list of k, a, t, f, b and g (g with a or b)")
    if args.nodes < 1 or args.pods < 1:
        parser.error("--nodes and --pods must be >= 1")
    if args.gang_jobs is not None and args.gang_jobs < 1:
        parser.error("--gang-jobs must be >= 1")
    args.backlog = args.backlog if args.backlog is not None else min(args.pods, args.nodes * GPUS_PER_NODE)
    if not 1 <= args.backlog <= args.nodes * GPUS_PER_NODE or args.repeat < 1:
        parser.error("--backlog must be 1 to the cluster's GPUs (capacity ample), --repeat >= 1")
    letters = {v: k for k, v in SCHEDULERS.items()}
    chosen = set(letters) if args.backlog_schedulers == "all" else {x.strip() for x in args.backlog_schedulers.split(",")}
    if not chosen or chosen - set(letters):
        parser.error(f"--backlog-schedulers {args.backlog_schedulers!r}: a comma list of d, t and g, or all")
    args.backlog_schedulers = [name for name, letter in SCHEDULERS.items() if letter in chosen]
    args.durations, args.phases = (low, high), phases
    args.gang_jobs = args.gang_jobs or default_gang_jobs(args.nodes)
    args.stall = args.stall if args.stall is not None else high + 30.0
    return args


# --- one phase -----------------------------------------------------------------------------------------


def wait_for_bindings(tracker: Tracker, phase: str, total: int, args: argparse.Namespace,
                      operator: Operator | None) -> str:  # fmt: skip
    """Until every pod is bound, nothing bound for --stall s, or --timeout; why it ended."""
    start = time.monotonic()
    restarted = False
    while True:
        time.sleep(0.2)
        bound, last = tracker.bound_count(phase), tracker.last_bind(phase)
        if bound >= total:
            return "all bound"
        if operator is not None:
            operator.sample()
            if args.restart and not restarted and bound >= total // 2:
                log(f"--restart: SIGKILL the operator at {bound}/{total} bound, starting a new one")
                operator.kill_and_restart()
                restarted = True
            elif operator.proc is not None and operator.proc.poll() is not None:
                return f"operator exited: {operator.last_words()}"
        now = time.monotonic()
        if now - (last or start) > args.stall:
            return f"stalled: nothing bound for {args.stall:g} s"
        if now - start > args.timeout:
            return f"timeout after {args.timeout:g} s"


def run_phase(plane: Plane, tracker: Tracker, jobs: list[Job], phase: str, args: argparse.Namespace,
              operator: Operator | None, tuned: TunedScheduler | None = None) -> PhaseResult:  # fmt: skip
    kube, namespace = plane.kube, f"bench-{phase}"
    scheduler = "gputwin" if operator else TUNED if tuned else "default-scheduler"
    pid = tuned.proc.pid if tuned and tuned.proc else plane.scheduler_pid
    kube.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
    before, cpu0 = request_counts(kube), proc_stats(pid)
    if operator is not None:
        rounds, failed = operator.forecast_rounds(), operator.failed_passes()
        operator.start_counting()
    log(f"phase {phase.upper()}: {len(jobs)} pods, schedulerName {scheduler}")
    t0 = time.monotonic()
    create_s = create_pods(kube, namespace, jobs, phase, scheduler)
    log(f"  created in {create_s:.1f} s ({len(jobs) / create_s:.0f} pods/s)")
    ended = wait_for_bindings(tracker, phase, len(jobs), args, operator)
    phase_s = time.monotonic() - t0
    after = request_counts(kube)
    if operator is not None:
        operator.stop()
        cpu, rss = operator.cpu_s, operator.rss_mb
    else:
        cpu1 = proc_stats(pid)
        cpu, rss = cpu1.cpu_s - cpu0.cpu_s, cpu1.peak_rss_mb
    log(f"  {ended} after {phase_s:.1f} s")
    result = summarize(tracker, phase, scheduler, len(jobs), before, after, create_s, phase_s, cpu, rss,
                       ended, operator.restarts if operator else 0)  # fmt: skip
    if operator is None:
        return result
    result = replace(result, forecast_rounds=operator.forecast_rounds() - rounds,
                     failed_passes=operator.failed_passes() - failed)  # fmt: skip
    return with_breakdown(result, tracker, phase, operator.trace_path)


def with_breakdown(result: PhaseResult, tracker: Tracker, phase: str, trace: Path) -> PhaseResult:
    """The phase's figures plus where each pod's wait once its node had room went."""
    found = read_trace(trace)
    ready = tracker.ready_and_bound(phase)
    parts = breakdown(ready, found)
    if not parts["scheduler"]:
        return result
    freed = breakdown(ready, found, waited_only=True)["scheduler"]
    return replace(result, p99_scheduler_s=_round(percentile(parts["scheduler"], 99)),
                   p99_scheduler_freed_s=_round(percentile(freed, 99)),
                   breakdown_p50_s={p: _round(percentile(v, 50)) for p, v in parts.items()},
                   breakdown_p99_s={p: _round(percentile(v, 99)) for p, v in parts.items()},
                   traced=len(parts["scheduler"]), passes=len(found.snaps))  # fmt: skip


def summarize(tracker: Tracker, phase: str, scheduler: str, total: int, before: dict[str, float],
              after: dict[str, float], create_s: float, phase_s: float, cpu: float, rss: float, ended: str,
              restarts: int) -> PhaseResult:  # fmt: skip
    seen = tracker.phase_view(phase)
    latencies = sorted(seen.latencies)
    after_room = sorted(seen.after_room)
    delta = {k: after.get(k, 0.0) - before.get(k, 0.0) for k in after}
    requests = sum(v for k, v in delta.items() if k.startswith("request "))
    top = dict(sorted(((k[8:], int(v)) for k, v in delta.items() if k.startswith("request ") and v > 0),
                      key=lambda kv: -kv[1])[:8])  # fmt: skip
    own = delta.get("flow service-accounts") if scheduler == "gputwin" else None
    span = (seen.last_bind - seen.first_added) if seen.last_bind is not None else None
    return PhaseResult(
        scheduler=scheduler, available=True, pods=total, bound=len(latencies),
        pods_per_s=round(len(latencies) / span, 2) if span else None,
        p50_bind_s=_round(percentile(latencies, 50)), p99_bind_s=_round(percentile(latencies, 99)),
        p99_after_room_s=_round(percentile(after_room, 99)),
        p99_after_freed_s=_round(percentile(sorted(seen.after_freed), 99)), waited=len(seen.after_freed), create_s=round(create_s, 2), phase_s=round(phase_s, 2),
        api_requests_per_job=round(requests / total, 2), api_requests_top=top,
        scheduler_requests_per_job=round(own / total, 2) if own is not None else None,
        cpu_s=round(cpu, 2), peak_rss_mb=round(rss, 1), peak_gpus_used=seen.peak_gpus_used,
        overallocated_gpus=tracker.overallocated_gpus(phase),
        overallocated_own_gpus=tracker.overallocated_gpus(phase, own=True), double_bound=seen.double_bound,
        lost_jobs=seen.lost, unbound=total - len(latencies), restarts=restarts, ended=ended,
        watch_error=tracker.error,
    )  # fmt: skip


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def drain_phase(tracker: Tracker, phase: str, args: argparse.Namespace) -> None:
    """Wait, through the watch, until every pod the phase bound has finished and freed its GPUs.

    The pods are not deleted: a Succeeded pod holds no GPUs for either scheduler, and deleting
    10,000 pods at once outlasts the API server's request timeout on this machine.
    """
    deadline = time.monotonic() + args.durations[1] + 600  # KWOK lags behind under load
    while (running := tracker.running_count(phase)) and time.monotonic() < deadline:
        time.sleep(0.5)
    if running:
        log(f"phase {phase.upper()}: {running} pod(s) still hold GPUs; the next phase starts anyway")


def run_gputwin(plane: Plane, tracker: Tracker, jobs: list[Job], args: argparse.Namespace,
                gangs: dict[str, GangResult], phase: str = "b") -> PhaseResult:  # fmt: skip
    """Phase B, then (with g) the gang phase through a fresh operator; `gangs` gets its result.
    Phase F: the same as B with forecasts off, no gangs."""
    operator = Operator(plane, prepare_gputwin(plane, args.nodes), 0.0 if phase == "f" else args.forecast_period)
    operator.start()
    gang = "g" in args.phases and phase == "b"
    try:
        why = operator.wait_ready()
        if why:
            log(f"phase {phase.upper()}: the gputwin operator is not available: {why}")
            if gang:
                gangs["gputwin"] = GangResult("gputwin", False, note=why)
            return PhaseResult("gputwin", False, note=why)
        result = run_phase(plane, tracker, jobs, phase, args, operator)  # stops the operator at its end
        if gang:
            drain_phase(tracker, "b", args)
            operator.start()  # its start-up is no part of the gang phase
            why = operator.wait_ready()
            gangs["gputwin"] = (GangResult("gputwin", False, note=why) if why else
                                run_gang_phase(plane.kube, tracker, gang_workload(args.gang_jobs, args.seed), "gb",
                                               "gputwin", args, TASK_TYPE, RUN_LABEL))  # fmt: skip
        return result
    finally:
        operator.stop()


def run_tuned(plane: Plane, tracker: Tracker, jobs: list[Job], args: argparse.Namespace) -> PhaseResult:
    tuned = TunedScheduler(plane.state, plane.bin_dir)
    try:
        why = tuned.start()
        if why:
            log(f"phase T: {why}")
            return PhaseResult(TUNED, False, note=why)
        return run_phase(plane, tracker, jobs, "t", args, None, tuned)
    finally:
        tuned.stop()


def run_kube_gangs(plane: Plane, tracker: Tracker, args: argparse.Namespace) -> GangResult:
    """The gangs with the default kube-scheduler; its pods are deleted afterwards (they never end)."""
    gangs = gang_workload(args.gang_jobs, args.seed)
    result = run_gang_phase(plane.kube, tracker, gangs, "ga", "default-scheduler", args, TASK_TYPE, RUN_LABEL)
    clear_gang_pods(plane.kube, tracker, "ga", [f"{g.name}-0-{i}" for g in gangs for i in range(g.pods)])
    return result


# --- main --------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> tuple[dict[str, PhaseResult], dict[str, GangResult], list[BacklogRun]]:
    jobs = workload(args.pods, args.seed, args.durations)
    log(f"{args.pods} pods, {sum(j.gpus for j in jobs)} GPUs asked, on {args.nodes * GPUS_PER_NODE} GPUs")
    results: dict[str, PhaseResult] = {}
    gangs: dict[str, GangResult] = {}
    backlog: list[BacklogRun] = []
    with control_plane() as plane:
        create_nodes(plane.kube, args.nodes)
        capacity = {node_name(i): GPUS_PER_NODE for i in range(args.nodes)}
        with Tracker.watching(plane.kube, f"{RUN_LABEL}=1", capacity) as tracker:
            if "k" in args.phases:
                backlog = run_backlog(plane, tracker, args, args.backlog_schedulers)
            if "a" in args.phases:
                results["kube-scheduler"] = run_phase(plane, tracker, jobs, "a", args, None)
                log(f"  kube-scheduler: {json.dumps(asdict(results['kube-scheduler']))}")
                drain_phase(tracker, "a", args)
            if "t" in args.phases:
                results["tuned kube-scheduler"] = run_tuned(plane, tracker, jobs, args)
                drain_phase(tracker, "t", args)
            if "g" in args.phases and "a" in args.phases:
                gangs["kube-scheduler"] = run_kube_gangs(plane, tracker, args)
            if "f" in args.phases:  # forecasts off, just before B (on): the machine's drift between them is least
                results[FORECASTS_OFF] = run_gputwin(plane, tracker, jobs, args, gangs, "f")
                drain_phase(tracker, "f", args)
            if "b" in args.phases:
                try:
                    results["gputwin"] = run_gputwin(plane, tracker, jobs, args, gangs)
                except Exception as exc:  # noqa: BLE001  (keep phase A's figures; the traceback is logged)
                    log(f"phase B failed: {traceback.format_exc()}")
                    results["gputwin"] = PhaseResult("gputwin", False, note=f"phase B failed: {exc!r}"[:400])
    return results, gangs, backlog


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the control plane and the operator are stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        results, gangs, backlog = run(args)
    except KeyboardInterrupt:
        log("interrupted: everything this run started has been stopped")
        return 130
    out = {**summary(args, results, gangs), **backlog_summary(backlog), "backlog_gputwin_kind": args.gputwin_backlog}
    where = sys.stderr if args.json else sys.stdout
    if results:
        print(table(results), file=where)
    for key, peer in (("ratio", "kube-scheduler"), ("ratio_tuned", "kube-scheduler tuned (qps 1000)")):
        if out[key] is not None:
            print(f"gputwin / {peer} pods bound per second: {out[key]}", file=where)
    if out["forecasts_p99_bind_ratio"] is not None:
        print(f"gputwin p99 creation->binding, forecasts on (every {args.forecast_period:g} s) / off: "
              f"{out['forecasts_on_p99_bind_s']} / {out['forecasts_off_p99_bind_s']} s = "
              f"{out['forecasts_p99_bind_ratio']}", file=where)  # fmt: skip
    if gangs:
        print(gang_table(gangs), file=where)
    if backlog:
        print(backlog_table(backlog), file=where)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
