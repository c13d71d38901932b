"""The gputwin operator against the default kube-scheduler, on the same burst of GPU pods (issue 5).

One run, on a real control plane it starts itself (`scripts/k8s/start.sh --with-scheduler`: etcd,
kube-apiserver, kube-scheduler, KWOK; stopped at the end, also on Ctrl-C):

1. N KWOK nodes x 8 `nvidia.com/gpu` under 16 leaf switches (labels `gputwin.io/switch=leafK`,
   `gputwin.io/partition=bench`; the conventions of scripts/k8s/fake-nodes.sh, created here in
   parallel because kubectl apply needs ~0.2 s per node).
2. A burst of P pods (fixed seed): 1, 2, 4 or 8 GPUs (requests = limits), each annotated
   `gputwin.io/run-duration` so KWOK completes it and its GPUs free up.
3. Phase A: `schedulerName: default-scheduler` in namespace bench-a: kube-scheduler places them.
   Then every pod is deleted.
4. Phase B: the same pods with `schedulerName: gputwin` in bench-b, placed by `gputwin operator
   --all-namespaces` (GPUTWIN_BACKEND=kubernetes, a subprocess) over a SwitchTopology, GPUPartition
   and SchedulingPolicy that describe the same nodes. `--restart` kills it (SIGKILL) when half the
   pods are bound and starts a new one. When the operator cannot start (no such backend), phase B
   says so and reports nothing else.
5. Phase T (between A and B): the same pods in bench-t for a second kube-scheduler with its client
   rate limits raised (qps 1000 / burst 2000, kube_scale_peers.TunedScheduler), an honest peer.
6. Phase G: gangs (jobs of 2-8 pods x 8 GPUs that must start together, 1.5 x the cluster's GPUs):
   as plain pods for kube-scheduler (after T; deleted afterwards), as GPUJobs for gputwin (after
   B); once binding stops, the jobs left partly placed and the GPUs they strand
   (kube_scale_peers says more).

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
peak RSS of the scheduler process come from /proc (utime+stime, VmHWM).

    python benchmarks/kube_scale.py                          # 1,000 nodes, 10,000 pods
    python benchmarks/kube_scale.py --nodes 100 --pods 1000 --restart --json
    python benchmarks/kube_scale.py --phases a,b              # without the tuned peer and the gangs
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ is no package: its sibling module
from kube_scale_peers import (
    TUNED,
    GangResult,
    TunedScheduler,
    clear_gang_pods,
    default_gang_jobs,
    gang_summary,
    gang_table,
    gang_workload,
    run_gang_phase,
)
from kube_scale_lib import (
    Kube,
    ProcStats,
    Tracker,
    breakdown,
    free_port,
    percentile,
    proc_stats,
    read_trace,
    request_counts,
)

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts" / "k8s"
GPUS_PER_NODE = 8
LEAVES = 16
GPU_SIZES = (1, 2, 4, 8)
GPU_WEIGHTS = (0.5, 0.2, 0.2, 0.1)
RUN_LABEL = "bench.gputwin.io/run"
TASK_TYPE = "bench"
OPERATOR_NS, OPERATOR_SA = "gputwin-bench", "operator"


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
    parser.add_argument("--phases", default="a,t,b,g",
                        help="a comma list of a (kube-scheduler), t (kube-scheduler tuned: client qps 1000, "
                        "burst 2000), b (gputwin), g (gangs, with kube-scheduler if a, gputwin if b); "
                        "default a,t,b,g")  # fmt: skip
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
    parser.add_argument(
        "--timeout", type=float, default=1800, metavar="S", help="longest phase (default 1800)"
    )
    parser.add_argument("--json", action="store_true", help="stdout's last line is one JSON object")
    args = parser.parse_args(argv)
    try:
        low, high = (int(x) for x in args.durations.split("-"))
    except ValueError:
        parser.error(f"--durations {args.durations!r}: expected MIN-MAX in whole seconds, e.g. 5-30")
    if not 1 <= low <= high:
        parser.error(f"--durations {args.durations!r}: need 1 <= MIN <= MAX")
    phases = {p.strip() for p in args.phases.split(",")}
    if not phases or phases - {"a", "t", "b", "g"} or phases == {"g"}:
        parser.error(f"--phases {args.phases!r}: a comma list of a, t, b and g (g with a or b)")
    if args.nodes < 1 or args.pods < 1:
        parser.error("--nodes and --pods must be >= 1")
    if args.gang_jobs is not None and args.gang_jobs < 1:
        parser.error("--gang-jobs must be >= 1")
    args.durations, args.phases = (low, high), phases
    args.gang_jobs = args.gang_jobs or default_gang_jobs(args.nodes)
    args.stall = args.stall if args.stall is not None else high + 30.0
    return args


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


# --- the gputwin side ---------------------------------------------------------------------------------


def cluster_objects(nodes: int) -> list[dict[str, Any]]:
    """SwitchTopology, GPUPartition and SchedulingPolicy describing exactly the KWOK nodes."""
    groups: list[dict[str, Any]] = []
    for leaf in range(LEAVES):
        members = [i for i in range(nodes) if leaf_of(i, nodes) == leaf]
        if members:
            groups.append({"switch": f"leaf{leaf}", "nodes": f"bench-node-[{members[0]}-{members[-1]}]",
                           "gpusPerNode": GPUS_PER_NODE})  # fmt: skip
    leaves = sorted({g["switch"] for g in groups}, key=lambda s: int(s[4:]))
    meta = {"apiVersion": "gputwin.io/v1alpha1"}
    return [
        {**meta, "kind": "SwitchTopology", "metadata": {"name": "bench"},
         "spec": {"switches": [{"name": "spine"}, *({"name": s, "parent": "spine"} for s in leaves)],
                  "nodeGroups": groups}},
        {**meta, "kind": "SchedulingPolicy", "metadata": {"name": "bench-fifo"},
         "spec": {"queue": {"policy": "fifo", "backfill": True}, "placement": {"policy": "consolidate"}}},
        {**meta, "kind": "GPUPartition", "metadata": {"name": "bench"},
         "spec": {"topology": "bench", "taskTypes": [TASK_TYPE], "nodes": f"bench-node-[0-{nodes - 1}]",
                  "policy": "bench-fifo"}},
    ]  # fmt: skip


def operator_kubeconfig(plane: Plane) -> Path:
    """A kubeconfig with a ServiceAccount token (cluster-admin), so APF counts the operator apart."""
    kube = plane.kube
    kube.create("/api/v1/namespaces", {"metadata": {"name": OPERATOR_NS}})
    kube.create(f"/api/v1/namespaces/{OPERATOR_NS}/serviceaccounts", {"metadata": {"name": OPERATOR_SA}})
    kube.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", {
        "metadata": {"name": "gputwin-bench-operator"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "cluster-admin"},
        "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_SA, "namespace": OPERATOR_NS}],
    })  # fmt: skip
    answer = kube.create(f"/api/v1/namespaces/{OPERATOR_NS}/serviceaccounts/{OPERATOR_SA}/token",
                         {"spec": {"expirationSeconds": 86400}})  # fmt: skip
    path = plane.state / "operator-kubeconfig"
    path.write_text(kube.kubeconfig_text(answer["status"]["token"]))
    path.chmod(0o600)
    return path


def gputwin_command() -> list[str]:
    script = Path(sys.executable).with_name("gputwin")
    if script.is_file():
        return [str(script)]
    found = shutil.which("gputwin")
    return [found] if found else [sys.executable, "-c", "from gputwin.cli.main import main; main()"]


class Operator:
    """`gputwin operator` as a subprocess; CPU and peak RSS summed/maxed over its restarts."""

    def __init__(self, plane: Plane, kubeconfig: Path) -> None:
        self.plane, self.kubeconfig = plane, kubeconfig
        self.port = free_port()
        self.log_path = plane.state / "logs" / "gputwin-operator.log"
        self.trace_path = plane.state / "logs" / "gputwin-bind-trace.jsonl"  # both processes of a --restart
        self.proc: subprocess.Popen[bytes] | None = None
        self.cpu_s, self.rss_mb, self.restarts = 0.0, 0.0, 0
        self._last: ProcStats | None = None  # the running process's latest /proc reading

    def start(self) -> None:
        # The pods it makes or binds tolerate KWOK's taint, as the benchmark's own pods do.
        env = {**os.environ, "KUBECONFIG": str(self.kubeconfig), "GPUTWIN_BACKEND": "kubernetes",
               "GPUTWIN_HEALTH_PORT": str(self.port),
               "GPUTWIN_TOLERATED_TAINTS": "nvidia.com/gpu,kwok.x-k8s.io/node",
               "GPUTWIN_BIND_TRACE": str(self.trace_path)}  # fmt: skip
        with self.log_path.open("ab") as out:
            self.proc = subprocess.Popen([*gputwin_command(), "operator", "--all-namespaces"], env=env,
                                         stdout=out, stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip

    def wait_ready(self, timeout: float = 120) -> str:
        """'' once /readyz answers 200, else why not (the process's last words)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc is not None
            if self.proc.poll() is not None:
                return f"gputwin operator exited ({self.proc.returncode}): {self.last_words()}"
            if self.plane.kube.http_status(f"http://127.0.0.1:{self.port}/readyz") == 200:
                return ""
            time.sleep(0.2)
        return f"gputwin operator not ready after {timeout:.0f} s: {self.last_words()}"

    def last_words(self) -> str:
        lines = [ln for ln in self.log_path.read_text(errors="replace").splitlines() if ln.strip()]
        errors = [ln for ln in lines if "Error" in ln or "error" in ln]
        return (errors or lines or ["(no output)"])[-1].strip()[:400]

    def sample(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self._last = proc_stats(self.proc.pid)

    def _account(self) -> None:
        """Add the ended process's last reading (its /proc is gone once it has been reaped)."""
        if self._last is not None:
            self.cpu_s += self._last.cpu_s
            self.rss_mb = max(self.rss_mb, self._last.peak_rss_mb)
            self._last = None

    def start_counting(self) -> None:
        """CPU seconds count from now (not its start-up), like kube-scheduler's in phase A."""
        assert self.proc is not None
        self.cpu_s -= proc_stats(self.proc.pid).cpu_s

    def kill_and_restart(self) -> None:
        assert self.proc is not None
        self.sample()
        self.proc.kill()
        self.proc.wait()
        self._account()
        self.restarts += 1
        self.start()

    def stop(self) -> None:
        if self.proc is None:
            return
        self.sample()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._account()
        self.proc = None


# --- one phase -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseResult:
    scheduler: str
    available: bool
    note: str = ""
    pods: int = 0
    bound: int = 0
    pods_per_s: float | None = None
    p50_bind_s: float | None = None
    p99_bind_s: float | None = None
    p99_after_room_s: float | None = None  # binding - max(creation, since when its node had room for it)
    p99_after_freed_s: float | None = None  # the same, of the pods that waited for capacity to free
    waited: int = 0  # pods whose node's room came after their creation
    create_s: float | None = None
    phase_s: float | None = None
    api_requests_per_job: float | None = None
    scheduler_requests_per_job: float | None = None  # the operator's own (APF flow); None for kube-scheduler
    api_requests_top: dict[str, int] | None = None
    cpu_s: float | None = None
    peak_rss_mb: float | None = None
    peak_gpus_used: int = 0
    overallocated_gpus: int = 0  # every pod on the node counted (other schedulers' too)
    overallocated_own_gpus: int = 0  # this scheduler's pods alone
    double_bound: int = 0
    lost_jobs: int = 0
    unbound: int = 0
    restarts: int = 0
    ended: str = ""
    watch_error: str = ""  # the last error of the pod watch (it resumes from the last version seen)
    # Where the wait once its node had room went (gputwin only; kube_scale_lib.breakdown says what
    # each part is): p50 and p99 per part, and the pods the operator's bind trace covered.
    p99_scheduler_s: float | None = None  # loop + copy + pass + bind: the scheduler's own latency
    p99_scheduler_freed_s: float | None = None  # the same, of the pods that waited for capacity to free
    breakdown_p50_s: dict[str, float | None] | None = None
    breakdown_p99_s: dict[str, float | None] | None = None
    traced: int = 0
    passes: int = 0  # the operator's reconcile passes (snapshots in its trace), over a restart too


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
    return with_breakdown(result, tracker, phase, operator.trace_path) if operator else result


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
                gangs: dict[str, GangResult]) -> PhaseResult:  # fmt: skip
    """Phase B, then (with g) the gang phase through a fresh operator; `gangs` gets its result."""
    plane.kubectl_run("apply", "-f", str(ROOT / "crds"))
    plane.kubectl_run("wait", "--for=condition=Established", "--timeout=60s", "crd", "--all")
    plane.kubectl_run(
        "apply", "-f", "-", stdin="\n---\n".join(json.dumps(o) for o in cluster_objects(args.nodes))
    )
    operator = Operator(plane, operator_kubeconfig(plane))
    operator.start()
    try:
        why = operator.wait_ready()
        if why:
            log(f"phase B: the gputwin operator is not available: {why}")
            if "g" in args.phases:
                gangs["gputwin"] = GangResult("gputwin", False, note=why)
            return PhaseResult("gputwin", False, note=why)
        result = run_phase(plane, tracker, jobs, "b", args, operator)  # stops the operator at its end
        if "g" in args.phases:
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


# --- report --------------------------------------------------------------------------------------------

ROWS = (
    ("pods bound", "bound"),
    ("pods bound per second", "pods_per_s"),
    ("p50 creation->binding s", "p50_bind_s"),
    ("p99 creation->binding s", "p99_bind_s"),
    ("p99 once its node had room s", "p99_after_room_s"),
    ("  of it the scheduler's (p99) s", "p99_scheduler_s"),
    ("pods that waited for capacity", "waited"),
    ("p99 of those once capacity freed s", "p99_after_freed_s"),
    ("  of it the scheduler's (p99) s", "p99_scheduler_freed_s"),
    ("creating the burst s", "create_s"),
    ("phase wall s", "phase_s"),
    ("API requests per job (all clients)", "api_requests_per_job"),
    ("scheduler's own requests per job", "scheduler_requests_per_job"),
    ("scheduler CPU s", "cpu_s"),
    ("scheduler peak RSS MB", "peak_rss_mb"),
    ("peak GPUs in use", "peak_gpus_used"),
    ("overallocated GPUs", "overallocated_gpus"),
    ("  by its own pods alone", "overallocated_own_gpus"),
    ("double bound", "double_bound"),
    ("lost jobs", "lost_jobs"),
    ("restarts", "restarts"),
    ("ended", "ended"),
)


def table(results: dict[str, PhaseResult]) -> str:
    names = list(results)
    lines = [f"{'':38}" + "".join(f"{n:>22}" for n in names)]
    for label, key in ROWS:
        cells = []
        for n in names:
            r = results[n]
            cells.append(
                "n/a" if not r.available else "-" if getattr(r, key) is None else str(getattr(r, key))
            )
        lines.append(f"{label:38}" + "".join(f"{c[:22]:>22}" for c in cells))
    for n, r in results.items():
        if not r.available:
            lines.append(f"{n}: not run: {r.note}")
        elif r.breakdown_p50_s and r.breakdown_p99_s:
            parts = ", ".join(f"{p} {r.breakdown_p50_s[p]} / {r.breakdown_p99_s[p]}" for p in r.breakdown_p50_s)
            lines.append(f"{n}: once its node had room, p50 / p99 s ({r.traced} pods, {r.passes} passes): {parts}")
    return "\n".join(lines)


def summary(args: argparse.Namespace, results: dict[str, PhaseResult],
            gangs: dict[str, GangResult] | None = None) -> dict[str, Any]:  # fmt: skip
    a, b, t = results.get("kube-scheduler"), results.get("gputwin"), results.get("tuned kube-scheduler")
    ran: list[PhaseResult | GangResult] = [r for r in results.values() if r.available]
    ran += [g for g in (gangs or {}).values() if g.available]
    a_rate = a.pods_per_s if a and a.available else None
    b_rate = b.pods_per_s if b and b.available else None
    t_rate = t.pods_per_s if t and t.available else None
    return {
        "nodes": args.nodes, "gpus_per_node": GPUS_PER_NODE, "leaves": LEAVES, "pods": args.pods,
        "seed": args.seed, "durations_s": list(args.durations), "restart": args.restart,
        "kube_scheduler_pods_per_s": a_rate, "gputwin_pods_per_s": b_rate,
        "ratio": round(b_rate / a_rate, 3) if a_rate and b_rate else None,
        "tuned_kube_scheduler_pods_per_s": t_rate,
        "ratio_tuned": round(b_rate / t_rate, 3) if t_rate and b_rate else None,
        "tuned_kube_scheduler_p99_bind_s": t.p99_bind_s if t and t.available else None,
        "tuned_kube_scheduler_p99_after_room_s": t.p99_after_room_s if t and t.available else None,
        "p99_bind_s": b.p99_bind_s if b and b.available else None,
        "kube_scheduler_p99_bind_s": a.p99_bind_s if a and a.available else None,
        "p99_after_room_s": b.p99_after_room_s if b and b.available else None,
        "kube_scheduler_p99_after_room_s": a.p99_after_room_s if a and a.available else None,
        "p99_scheduler_latency_s": b.p99_scheduler_s if b and b.available else None,
        "p99_after_freed_s": b.p99_after_freed_s if b and b.available else None,
        "kube_scheduler_p99_after_freed_s": a.p99_after_freed_s if a and a.available else None,
        "p99_scheduler_latency_freed_s": b.p99_scheduler_freed_s if b and b.available else None,
        "breakdown_p99_s": b.breakdown_p99_s if b and b.available else None,
        "overallocated_gpus": sum(r.overallocated_gpus for r in ran),
        "lost_jobs": sum(r.lost_jobs for r in ran if isinstance(r, PhaseResult)),
        "double_bound": sum(r.double_bound for r in ran),
        "gputwin_available": bool(b and b.available), "gputwin_note": b.note if b else "not run (--phases)",
        "phases": {name: asdict(r) for name, r in results.items()},
        **gang_summary(gangs or {}),
    }  # fmt: skip


# --- main --------------------------------------------------------------------------------------------------


def run(args: argparse.Namespace) -> tuple[dict[str, PhaseResult], dict[str, GangResult]]:
    jobs = workload(args.pods, args.seed, args.durations)
    log(f"{args.pods} pods, {sum(j.gpus for j in jobs)} GPUs asked, on {args.nodes * GPUS_PER_NODE} GPUs")
    results: dict[str, PhaseResult] = {}
    gangs: dict[str, GangResult] = {}
    with control_plane() as plane:
        create_nodes(plane.kube, args.nodes)
        capacity = {node_name(i): GPUS_PER_NODE for i in range(args.nodes)}
        with Tracker.watching(plane.kube, f"{RUN_LABEL}=1", capacity) as tracker:
            if "a" in args.phases:
                results["kube-scheduler"] = run_phase(plane, tracker, jobs, "a", args, None)
                log(f"  kube-scheduler: {json.dumps(asdict(results['kube-scheduler']))}")
                drain_phase(tracker, "a", args)
            if "t" in args.phases:
                results["tuned kube-scheduler"] = run_tuned(plane, tracker, jobs, args)
                drain_phase(tracker, "t", args)
            if "g" in args.phases and "a" in args.phases:
                gangs["kube-scheduler"] = run_kube_gangs(plane, tracker, args)
            if "b" in args.phases:
                try:
                    results["gputwin"] = run_gputwin(plane, tracker, jobs, args, gangs)
                except Exception as exc:  # noqa: BLE001  (keep phase A's figures; the traceback is logged)
                    log(f"phase B failed: {traceback.format_exc()}")
                    results["gputwin"] = PhaseResult("gputwin", False, note=f"phase B failed: {exc!r}"[:400])
    return results, gangs


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM unwinds like Ctrl-C, so the control plane and the operator are stopped either way.
    signal.signal(signal.SIGTERM, lambda *_: (_ for _ in ()).throw(KeyboardInterrupt()))
    try:
        results, gangs = run(args)
    except KeyboardInterrupt:
        log("interrupted: everything this run started has been stopped")
        return 130
    out = summary(args, results, gangs)
    where = sys.stderr if args.json else sys.stdout
    print(table(results), file=where)
    for key, peer in (("ratio", "kube-scheduler"), ("ratio_tuned", "kube-scheduler tuned (qps 1000)")):
        if out[key] is not None:
            print(f"gputwin / {peer} pods bound per second: {out[key]}", file=where)
    if gangs:
        print(gang_table(gangs), file=where)
    if args.json:
        print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
