"""Sim-to-real fidelity: the same short GPU-job trace on a real SLURM cluster and in the simulator.

For each policy (default: fifo, srtf, las):
1. a ClusterSpec is built from the live cluster (`gputwin.adapters.slurm.live`: nodes, GPUs, switch
   tree; the benchmark partition takes the first `--nodes` nodes) with that queue policy plus
   consolidate placement, rendered and applied to slurmctld (`gputwin.adapters.slurm.apply`);
2. a seeded trace of `--jobs` jobs (1/2/4/8 GPUs, `sleep 3..20` s, arrivals spread over `--span`
   seconds, so the partition saturates and jobs queue) is submitted at its arrival times with
   `sbatch --comment=task:bench --gres=gpu:N --job-name=sD --wrap 'sleep D'` (argument lists);
3. once sacct shows every job ended, its times are read: from slurmctld's log to the millisecond
   (`ctld_log`; sacct's whole seconds do not average out, see docs/slurm-test-cluster.md) and from
   sacct as a cross-check (`*_sacct` fields); the same jobs (GPUs, durations, the submit instants
   actually achieved) are replayed by `gputwin.sim.run.run` on the same ClusterSpec;
4. per policy: average JCT and queueing delay real vs simulated (`avg_jct_gap`, `avg_queue_gap`:
   (real - sim) / sim), start-order agreement (`rank_correlation`: Spearman's rho of the start
   times, tie-corrected; `kendall_tau_b` too), SLURM's own latency and launch overhead.

SLURM's per-job launch + teardown cost is measured first (`calibrate_startup`, 32 one-GPU jobs on
the idle partition) and added to every simulated run time: a documented, measured startup cost,
not fitted to the comparison (`--startup-cost` overrides it; `avg_jct_gap_no_startup` leaves it out).
`room_latency_s` (`calibrate_room_latency`) is SLURM's delay from an end that made room to the
next start, measured before the policies run and applied as the twin's forecasts apply
`Snapshot.start_latency_s` (gputwin.twin.forecast): a job holds its GPUs that long before its run
begins and starts that much later, so every start of a chain moves by it again. SLURM schedules a
batch job only on its next pass after the submission (the ~1 s background loop or the backfill
cycle, never in the submit RPC): `calibrated_latency_s`, measured by `calibrate_startup`, so the
replay puts each job in its queue that much after its submit (JCT still counts from the submit).
`--no-start-latency` leaves both out; `avg_jct_gap_no_latency` is the gap without either,
`avg_jct_gap_room_latency_only` the gap with the room latency alone.

srtf in SLURM: SLURM preempts across partition PriorityTiers only, so a one-partition srtf policy
becomes explicit priorities from the history estimate table (shortest first, filled here from the
trace's own job names `sD`, the oracle the simulator's srtf also uses) without in-partition
preemption; `preemptions_sim` shows how often the simulator preempted where SLURM could not.

The benchmark starts its own cluster (scripts/slurm/start.sh, 8 nodes x 8 GPUs, 2 leaves) unless
`--state DIR` names a running one; it stops what it started, and on a given cluster puts the
managed files back (plus `scontrol reconfigure`) at the end. With `--json` the table goes to
stderr and stdout's last line is one JSON object `{"results": [...], ...}`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scipy.stats import kendalltau, spearmanr
from slurm_live import (
    TASK,
    Timing,
    best_timings,
    calibrate_room_latency,
    cluster_state,
    managed_files_kept,
    read_env,
    start_after_end,
    wait_finished,
)

from gputwin.adapters.slurm.apply import apply
from gputwin.adapters.slurm.commands import run_command
from gputwin.adapters.slurm.live import live_topology
from gputwin.adapters.slurm.render import LuaTables, estimate_table, render
from gputwin.core.model import (
    ClusterSpec,
    JobSpec,
    PartitionSpec,
    PolicySpec,
)
from gputwin.core.plugins import known
from gputwin.sim.run import run as simulate

PARTITION = "bench"
GPU_CHOICES = (1, 2, 4, 8)
GPU_WEIGHTS = (3, 3, 2, 2)


@dataclass(frozen=True, slots=True)
class TraceJob:
    """One generated job: when it arrives (seconds after the start), its GPUs and sleep seconds."""

    index: int
    arrival: float
    gpus: int
    seconds: int

    @property
    def name(self) -> str:
        return f"s{self.seconds}"  # the estimate table's key: same sleep, same name


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/sim_to_real.py", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100, help="jobs in the trace (default 100)")
    parser.add_argument("--seed", type=int, default=7, help="trace seed (default 7)")
    parser.add_argument("--span", type=float, default=60.0, help="arrivals spread over this many seconds")
    parser.add_argument("--policies", default="fifo,srtf,las", help="queue policies, comma-separated")
    parser.add_argument("--nodes", type=int, default=8, help="nodes of the benchmark partition (default 8)")
    parser.add_argument(
        "--state", type=Path, help="state folder of a running cluster (scripts/slurm/start.sh)"
    )
    parser.add_argument("--startup-cost", default="auto", metavar="SECONDS|auto",
                        help="per-job launch cost added to simulated run times; auto (default) measures it "
                             "first with 32 one-GPU jobs; 0 leaves it out")  # fmt: skip
    parser.add_argument("--no-start-latency", dest="start_latency", action="store_false",
                        help="leave SLURM's measured latencies (room_latency_s, calibrated_latency_s) out of the replay")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.nodes < 1 or args.span < 0:
        parser.error("--jobs and --nodes must be >= 1, --span >= 0")
    unknown = [p for p in args.policies.split(",") if p.strip() not in known()["queue"]]
    if unknown:
        parser.error(
            f"--policies: unknown {', '.join(map(repr, unknown))}; known: {', '.join(known()['queue'])}"
        )
    if args.startup_cost != "auto":
        try:
            if not 0 <= float(args.startup_cost) < 60:
                raise ValueError
        except ValueError:
            parser.error("--startup-cost: want auto or seconds in [0, 60)")
    return args


# --- the trace ------------------------------------------------------------------------------------


def make_trace(jobs: int, seed: int, span: float) -> list[TraceJob]:
    """Seeded jobs sorted by arrival; arrivals on a 0.1 s grid so sbatch can keep up."""
    rng = random.Random(seed)
    arrivals = sorted(round(rng.uniform(0.0, span), 1) for _ in range(jobs))
    return [
        TraceJob(i, arrival, rng.choices(GPU_CHOICES, GPU_WEIGHTS)[0], rng.randint(3, 20))
        for i, arrival in enumerate(arrivals)
    ]


# --- the live cluster -----------------------------------------------------------------------------


def live_cluster(queue: str, nodes_used: int) -> ClusterSpec:
    """The live nodes, GPUs and switch tree; one partition on the first `nodes_used` nodes."""
    topology = live_topology()
    # checkpoint_seconds=0: a SchedulingPolicy without preemption.checkpointSeconds means "no cost"
    # (the API's documented default); the core's own default for None is the Helios 7-30 s cost.
    policy = PolicySpec(queue=queue, placement="consolidate", checkpoint_seconds=0.0)
    nodes = tuple(n.name for n in topology.nodes[:nodes_used])
    return ClusterSpec(topology, (PartitionSpec(PARTITION, nodes, (TASK,), policy, priority_tier=1),))


# --- one policy, for real -------------------------------------------------------------------------


def submit_all(trace: Sequence[TraceJob]) -> tuple[dict[str, TraceJob], dict[str, float]]:
    """sbatch every job at its arrival time; job id -> trace job, job id -> epoch submitted."""
    ids: dict[str, TraceJob] = {}
    submitted: dict[str, float] = {}
    t0 = time.monotonic()
    for job in trace:
        delay = t0 + job.arrival - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the trace's arrival process, not a wait for a condition
        now = time.time()
        out = run_command([
            "sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", f"--comment=task:{TASK}",
            f"--job-name={job.name}", f"--gres=gpu:{job.gpus}", "--wrap", f"sleep {job.seconds}",
        ])  # fmt: skip
        job_id = out.strip().split(";")[0]
        ids[job_id] = job
        submitted[job_id] = now
    return ids, submitted


# --- one policy, simulated ------------------------------------------------------------------------


def replay(cluster: ClusterSpec, ids: dict[str, TraceJob], submitted: dict[str, float], startup: float,
           latency: float = 0.0, queued_after: float = 0.0) -> tuple[dict[str, Timing], int]:  # fmt: skip
    """The same jobs, submitted at the instants really achieved, through the simulator.

    `startup`: the measured launch/teardown cost (see `calibrate_startup`) each job holds its
    GPUs for beyond its sleep; `latency`: SLURM's measured start latency, held before the run and
    added to the start (as the twin's forecasts model it); `queued_after`: SLURM's measured delay
    from a submission to the pass that first considers it. Documented inputs, never fitted here.
    """
    origin = min(submitted.values())
    specs = sorted(
        (JobSpec(job_id, submitted[job_id] - origin + queued_after, job.seconds + startup + latency, job.gpus, TASK,
                 user="root", name=job.name, seq=job.index) for job_id, job in ids.items()),
        key=lambda spec: (spec.submit, spec.seq),
    )  # fmt: skip
    _, outcome = simulate(cluster, specs)
    timings = {
        job.spec.job_id: Timing(job.spec.submit - queued_after, (job.first_start or 0.0) + latency, job.end or 0.0)
        for job in outcome.finished
    }
    return timings, sum(job.preemptions for job in outcome.finished)


# --- statistics -----------------------------------------------------------------------------------


Sims = tuple[dict[str, Timing], dict[str, Timing], dict[str, Timing], dict[str, Timing]]


def compare(policy: str, ids: dict[str, TraceJob], real: dict[str, Timing], sims: Sims,
            preempted: tuple[int, int]) -> dict[str, Any]:  # fmt: skip
    """Real vs simulated; `sims` = (with the measured startup cost and both latencies, without any,
    with the startup cost only, with the startup cost and the room latency only)."""
    sim, raw, no_latency, room_only = sims
    jobs = sorted(set(real) & set(sim), key=lambda j: ids[j].index)
    jct_raw = mean([raw[j].end - raw[j].submit for j in jobs])
    jct_no_latency = mean([no_latency[j].end - no_latency[j].submit for j in jobs])
    jct_room_only = mean([room_only[j].end - room_only[j].submit for j in jobs])
    jct_real, jct_sim = (
        mean([real[j].end - real[j].submit for j in jobs]),
        mean([sim[j].end - sim[j].submit for j in jobs]),
    )
    q_real, q_sim = (
        mean([real[j].start - real[j].submit for j in jobs]),
        mean([sim[j].start - sim[j].submit for j in jobs]),
    )
    origin_real = min(real[j].submit for j in jobs)
    real_starts, sim_starts = [real[j].start for j in jobs], [sim[j].start for j in jobs]
    return {
        "policy": policy,
        "jobs": len(jobs),
        "avg_jct_real_s": round(jct_real, 2),
        "avg_jct_sim_s": round(jct_sim, 2),
        "avg_jct_gap": round((jct_real - jct_sim) / jct_sim, 4),
        "avg_jct_gap_no_startup": round((jct_real - jct_raw) / jct_raw, 4),
        "avg_jct_gap_no_latency": round((jct_real - jct_no_latency) / jct_no_latency, 4),
        "avg_jct_gap_room_latency_only": round((jct_real - jct_room_only) / jct_room_only, 4),
        "avg_queue_real_s": round(q_real, 2),
        "avg_queue_sim_s": round(q_sim, 2),
        "avg_queue_gap": round((q_real - q_sim) / q_sim, 4) if q_sim else None,
        "avg_queue_gap_s": round(q_real - q_sim, 2),
        "rank_correlation": round(spearman(real_starts, sim_starts), 4),
        "kendall_tau_b": round(kendall_tau_b(real_starts, sim_starts), 4),
        "launch_overhead_s": round(mean([real[j].end - real[j].start - ids[j].seconds for j in jobs]), 3),
        "start_lag_s": round(mean([(real[j].start - origin_real) - sim[j].start for j in jobs]), 2),
        # Jobs the bare simulator starts on arrival: their real queueing delay is SLURM's own latency.
        "uncontended_start_latency_s": _rounded_mean([real[j].start - real[j].submit for j in jobs
                                                      if raw[j].start - raw[j].submit < 1e-9]),
        **start_after_end({j: real[j] for j in jobs}),
        "preemptions_real": preempted[0],
        "preemptions_sim": preempted[1],
        "unmatched": len(ids) - len(jobs),
    }  # fmt: skip


def spearman(x: Sequence[float], y: Sequence[float]) -> float:
    """Spearman's rho, tie-corrected (sacct times are whole seconds); nan when a side is constant."""
    return float(spearmanr(x, y).statistic)


def kendall_tau_b(x: Sequence[float], y: Sequence[float]) -> float:
    """Kendall's tau-b (ties in either side corrected); nan when a side is constant."""
    return float(kendalltau(x, y, variant="b").statistic)


def mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _rounded_mean(values: Sequence[float]) -> float | None:
    return round(sum(values) / len(values), 3) if values else None


# --- driver ---------------------------------------------------------------------------------------


def calibrate_startup(samples: int = 32, seconds: int = 2) -> tuple[float, float]:
    """SLURM's own per-job cost, measured on the idle partition before any comparison runs.

    `samples` one-GPU `sleep 2` jobs, submitted 0.137 s apart so they never queue and their
    start/end phases within a second differ: then the errors of sacct's whole-second stamps
    average out. Returns (scheduling latency: mean Start - Submit, launch and teardown: mean
    End - Start - 2). The launch cost is the startup cost the simulator adds to every job's run
    time (a job holds its GPUs that much longer than its work under SLURM); the latency is how
    long after its submission a job reaches the replay's queue. Nothing is fitted to the comparison.
    Times come from slurmctld's log (ms) when it is readable, else from sacct (whole seconds,
    biased: starts fall on scheduler passes, so their truncation errors do not average out).
    """
    calib = [TraceJob(-1 - i, round(i * 0.137, 3), 1, seconds) for i in range(samples)]  # never queue
    ids, _ = submit_all(calib)
    wait_finished(list(ids), timeout=120)
    timings, _, _, _ = best_timings(list(ids))
    if not timings:
        raise SystemExit("error: no calibration job ran (all were cancelled before they started)")
    latency = sum(t.start - t.submit for t in timings.values()) / len(timings)
    launch = sum(t.end - t.start - seconds for t in timings.values()) / len(timings)
    return max(0.0, latency), max(0.0, launch)


def apply_policy(policy: str, trace: Sequence[TraceJob], nodes: int) -> ClusterSpec:
    cluster = live_cluster(policy, nodes)
    # The estimate table from identical past runs (name sD -> D s): the oracle the simulator has.
    history = [
        JobSpec(str(j.index), 0.0, float(j.seconds), j.gpus, TASK, user="root", name=j.name) for j in trace
    ]
    apply(render(cluster, tables=LuaTables(estimates=estimate_table(history))))
    return cluster


def run_policy(cluster: ClusterSpec, trace: Sequence[TraceJob], nodes: int, startup: float,
               latencies: tuple[float, float]) -> dict[str, Any]:  # fmt: skip
    """One policy for real, then replayed; `latencies`: (room latency, submission latency)."""
    policy = cluster.partitions[0].policy.queue
    ids, submitted = submit_all(trace)
    try:
        work = sum(j.gpus * j.seconds for j in trace) / sum(n.gpus for n in cluster.topology.nodes[:nodes])
        wait_finished(list(ids), timeout=120 + 3 * (work + max(j.arrival for j in trace)))
    except BaseException:
        run_command(["scancel", *ids])
        raise
    real, sacct, preempted_real, source = best_timings(list(ids))
    if real is not sacct:  # the log's ms: replay from when slurmctld took each job, as the real JCT counts
        submitted = {job: real[job].submit for job in ids}  # (the client's clock is before sbatch ran)
    sim, preempted_sim = replay(cluster, ids, submitted, startup, *latencies)
    sims = (sim, replay(cluster, ids, submitted, 0.0)[0], replay(cluster, ids, submitted, startup)[0],
            replay(cluster, ids, submitted, startup, latencies[0])[0])
    result = compare(policy, ids, real, sims, (preempted_real, preempted_sim))
    # The same figures from sacct's whole seconds, as a cross-check of the log's times.
    check = compare(policy, ids, sacct, sims, (preempted_real, preempted_sim))
    cross = {f"{key}_sacct": check[key] for key in ("avg_jct_gap", "avg_queue_gap", "rank_correlation")}
    return {**result, **cross, "time_source": source}


def run_all(policies: Sequence[str], trace: Sequence[TraceJob], nodes: int, with_latency: bool,
            startup: str) -> tuple[list[dict[str, Any]], dict[str, float]]:  # fmt: skip
    """Every policy in turn; the startup cost is measured once, after the first apply."""
    results = []
    calibration: dict[str, float] = {} if startup == "auto" else {"startup_cost_s": float(startup)}
    for policy in policies:
        cluster = apply_policy(policy, trace, nodes)
        if not calibration:
            latency, launch = calibrate_startup()
            room, _ = calibrate_room_latency(nodes)
            calibration = {"calibrated_latency_s": round(latency, 3), "calibrated_launch_s": round(launch, 3),
                           "room_latency_s": round(room, 3), "startup_cost_s": round(launch, 3)}  # fmt: skip
        room = calibration.get("room_latency_s", 0.0)  # not measured (--startup-cost given): 0
        # The replay holds every start by `room` already: the submission adds only what is beyond it.
        latencies = (room, max(0.0, calibration.get("calibrated_latency_s", 0.0) - room))
        latencies = latencies if with_latency else (0.0, 0.0)
        results.append(run_policy(cluster, trace, nodes, calibration["startup_cost_s"], latencies))
    return results, calibration


def print_table(results: Sequence[dict[str, Any]], out: Any) -> None:
    head = f"{'policy':<8}{'jobs':>5}{'JCT real':>10}{'JCT sim':>9}{'gap':>8}{'queue real':>12}{'queue sim':>10}{'gap':>8}{'spearman':>10}{'kendall':>9}{'launch s':>9}{'preempt r/s':>12}"
    print(head, file=out)
    for r in results:
        qgap = "n/a" if r["avg_queue_gap"] is None else f"{r['avg_queue_gap']:+.1%}"
        print(f"{r['policy']:<8}{r['jobs']:>5}{r['avg_jct_real_s']:>10.2f}{r['avg_jct_sim_s']:>9.2f}"
              f"{r['avg_jct_gap']:>+8.1%}{r['avg_queue_real_s']:>12.2f}{r['avg_queue_sim_s']:>10.2f}{qgap:>8}"
              f"{r['rank_correlation']:>10.3f}{r['kendall_tau_b']:>9.3f}{r['launch_overhead_s']:>9.2f}"
              f"{r['preemptions_real']:>6}/{r['preemptions_sim']:<5}", file=out)  # fmt: skip


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    trace = make_trace(args.jobs, args.seed, args.span)
    started = time.monotonic()
    with cluster_state(args.state) as state:
        env = read_env(state)
        os.environ["SLURM_CONF"] = env["SLURM_CONF"]
        with managed_files_kept(Path(env["SLURM_CONF"]).parent):
            results, calibration = run_all(policies, trace, args.nodes, args.start_latency, args.startup_cost)
    out = sys.stderr if args.json else sys.stdout
    print(f"sim-to-real: {args.jobs} jobs, seed {args.seed}, arrivals over {args.span:g} s, "
          f"{args.nodes} nodes; SLURM {env.get('GPUTWIN_SLURM_VERSION', '?')}", file=out)  # fmt: skip
    print("startup cost added to simulated runs: "
          + ", ".join(f"{k} {v:g}" for k, v in sorted(calibration.items())), file=out)  # fmt: skip
    print_table(results, out)
    if args.json:
        report = {"results": results, "jobs": args.jobs, "seed": args.seed, "span_s": args.span,
                  "nodes": args.nodes, "slurm_version": env.get("GPUTWIN_SLURM_VERSION"), **calibration,
                  "wall_seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
