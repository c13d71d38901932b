"""Forecast accuracy against the real thing: gputwin's predicted starts vs `squeue --start` vs what happened.

On the real SLURM test cluster (issue 15 item 4):
1. SLURM's start latency after a job's end made room is measured first (`sim_to_real.
   calibrate_room_latency`: two waves of whole-node jobs) and given to every snapshot as
   `start_latency_s` (measured, never fitted; `--start-latency` overrides it);
2. `--jobs` consecutive jobs of a real trace excerpt (default ../shared/traces/philly_mix1/jobs.csv
   from row `--offset`: its GPUs, clipped to one 8-GPU node, and durations) are time-compressed by
   `--compress` (arrivals and run times divided by it; run times clipped to [3, `--max-seconds`]
   and rounded up to a multiple of `--quantum`, 30 s, since SLURM's limits are whole minutes)
   and submitted at their arrival times to partition `batch` with `--time` = 2x the true run time
   (whole minutes, so exact with the 30 s quantum) and the job name `<trace user>-<trace job id>`;
3. while the queue is long (at `--moments` instants spread over the expected makespan, each with at
   least 5 jobs pending) it reads `squeue --start` and a snapshot (`adapters.slurm.snapshot`), the
   two within a fraction of a second;
4. once every job ended, actual starts come from slurmctld's log (ms; sacct's whole seconds as a
   fallback), and each snapshot is forecast (`gputwin.twin.forecast`: the cluster the snapshot
   implies - SLURM's priority order, EASY backfill; run times from a `HistoryEstimator` fed the runs
   that had ended by that moment, as `--history` from sacct would be, and the limits only as a
   user's request). The forecasts run after the workload, so they take no CPU from slurmctld.

Per job and moment: |predicted start - actual start| in seconds, and relative to the job's actual
remaining wait at that moment (actual start - moment, at least 1 s). Median and p90 over every
(moment, pending job) pair squeue gave a start for, gputwin (p50) beside squeue; `ratio` =
gputwin's median / squeue's (the target is <= 0.5). `gputwin_limits` is the same forecast told only
the time limits (no history), the like-for-like peer of squeue; `gputwin_no_latency` the first
with `start_latency_s` 0 (what the measured latency is worth). With `--json` the table goes to
stderr and stdout's last line is one JSON object `{"slurm": {...}}`.

    python benchmarks/forecast_accuracy.py --json                       # >= 300 jobs (~10 min)
    python benchmarks/forecast_accuracy.py --jobs 60 --max-seconds 30 --json   # smoke (~2 min)
    python benchmarks/forecast_accuracy.py --offline --json   # offline: error vs horizon on philly_mix1
                                                               # (benchmarks/forecast_horizon.py; no SLURM)
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import itertools
import json
import math
import os
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from slurm_live import best_timings, calibrate_room_latency, cluster_state, epoch, read_env, wait_finished

from gputwin.adapters.slurm.commands import run_command
from gputwin.adapters.slurm.snapshot import slurm_snapshot
from gputwin.core.history import HistoryEstimator
from gputwin.core.model import JobSpec
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import default_cluster
from gputwin.twin.snapshot import Snapshot

ROOT = Path(__file__).resolve().parent.parent
TRACE = ROOT.parent / "shared" / "traces" / "philly_mix1" / "jobs.csv"
PARTITION = "batch"
MIN_SECONDS = 3
PREDICTORS = ("gputwin", "gputwin_no_latency", "gputwin_limits", "squeue_start")


@dataclass(frozen=True, slots=True)
class Job:
    """One compressed trace job: arrival (s after the start), GPUs, true run time, the name it gets."""

    arrival: float
    gpus: int
    seconds: int
    name: str

    @property
    def limit_minutes(self) -> int:
        return max(1, math.ceil(2 * self.seconds / 60))


@dataclass(frozen=True, slots=True)
class Moment:
    """What was read at one instant: squeue's start per pending job, and the snapshot."""

    at: float
    squeue: dict[str, float]
    snap: Snapshot


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/forecast_accuracy.py", description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=300, help="trace jobs submitted (default 300)")
    parser.add_argument("--compress", type=float, default=30.0, help="time compression factor (default 30)")
    parser.add_argument("--offset", type=int, default=29000, help="first trace row of the excerpt")
    parser.add_argument("--max-seconds", type=int, default=120, help="clip compressed run times (default 120)")
    parser.add_argument("--quantum", type=int, default=30, help="round run times up to a multiple of this "
                        "(default 30 s: limits are whole minutes, so 2x is then exact; 1 keeps them)")  # fmt: skip
    parser.add_argument("--moments", type=int, default=5, help="forecast instants (default 5)")
    parser.add_argument("--samples", type=int, default=16, help="forecast samples (default 16)")
    parser.add_argument("--nodes", type=int, default=8, help="nodes of a cluster started here (default 8)")
    parser.add_argument("--trace", type=Path, default=TRACE, help="a Philly-style jobs.csv")
    parser.add_argument("--start-latency", type=float, help="seconds; default: measured first")
    parser.add_argument("--state", type=Path, help="state folder of a running cluster (scripts/slurm/start.sh)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    if args.jobs < 1 or args.compress <= 0 or args.moments < 1 or args.max_seconds < MIN_SECONDS:
        parser.error("--jobs, --moments >= 1, --compress > 0, --max-seconds >= 3")
    return args


def excerpt(path: Path, offset: int, count: int, compress: float, max_seconds: int, quantum: int = 1) -> list[Job]:
    """`count` rows from `offset` (file order is submit order), compressed, run times rounded up to
    a multiple of `quantum` seconds (30: SLURM's whole-minute limits are then exactly 2x)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = list(itertools.islice(csv.DictReader(f), offset, offset + count))
    if len(rows) < count:
        raise SystemExit(f"error: {path}: fewer than {offset + count} jobs")
    t0 = int(rows[0]["submit_time"])
    return [Job(round((int(r["submit_time"]) - t0) / compress, 2), max(1, min(int(r["gpu_num"]), 8)),
                _seconds(int(r["duration"]) / compress, max_seconds, quantum),
                f"{r['user']}-{r['job_id']}") for r in rows]  # fmt: skip


def _seconds(compressed: float, max_seconds: int, quantum: int) -> int:
    clipped = min(max(compressed, MIN_SECONDS), max_seconds)
    return max(quantum * math.ceil(clipped / quantum), int(clipped))


# --- the live run ---------------------------------------------------------------------------------


def submit_all(jobs: Sequence[Job], ids: dict[str, Job], t0: float) -> None:
    """sbatch each job at its arrival (a thread of its own, so moments are read meanwhile)."""
    for job in jobs:
        delay = t0 + job.arrival - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the trace's arrival process
        out = run_command(["sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", "-p", PARTITION,
                           f"--gres=gpu:{job.gpus}", f"--time={job.limit_minutes}", f"--job-name={job.name}",
                           "--wrap", f"sleep {job.seconds}"])  # fmt: skip
        ids[out.strip().split(";")[0]] = job


def squeue_starts() -> dict[str, float]:
    """SLURM's own start estimate per pending job (jobs it has none for are left out)."""
    out = run_command(["squeue", "-h", "-t", "PD", "--start", "-p", PARTITION, "-o", "%i|%S"])
    starts = {}
    for line in out.splitlines():
        job_id, _, stamp = line.strip().partition("|")
        if stamp[:1].isdigit():
            starts[job_id] = epoch(stamp)
    return starts


def read_moments(instants: Sequence[float], t0: float, latency: float) -> list[Moment]:
    moments = []
    for instant in instants:
        delay = t0 + instant - time.monotonic()
        if delay > 0:
            time.sleep(delay)  # the chosen instants, not a wait for a condition
        at = time.time()
        squeue = squeue_starts()
        snap = slurm_snapshot(start_latency_s=latency)
        if len(snap.pending) >= 5:
            moments.append(Moment(at, squeue, snap))
    return moments


def run_workload(jobs: Sequence[Job], moments: int, latency: float, gpus: int) -> tuple[dict[str, Job], list[Moment]]:
    """Submit the jobs, read the moments (spread over the makespan the work implies), wait for the end."""
    ids: dict[str, Job] = {}
    makespan = max(jobs[-1].arrival, sum(j.gpus * j.seconds for j in jobs) / gpus)
    # SLURM's backfill pass (every second here) sets squeue's estimates: none in a queue's first second.
    instants = [2.0 + makespan * (k + 0.5) / (moments + 1) for k in range(moments)]
    t0 = time.monotonic()
    submitter = threading.Thread(target=submit_all, args=(jobs, ids, t0), daemon=True)
    submitter.start()
    try:
        taken = read_moments(instants, t0, latency)
        submitter.join()
        wait_finished(list(ids), timeout=300 + 4 * makespan)
    except BaseException:
        run_command(["scancel", "-p", PARTITION])
        raise
    return ids, taken


# --- the comparison -------------------------------------------------------------------------------


def history_at(moment: float, ids: dict[str, Job], runs: dict[str, Any]) -> HistoryEstimator:
    """What sacct could have told at `moment`: the run times of the jobs that had ended."""
    estimator = HistoryEstimator()
    for job_id, t in runs.items():
        if t.end <= moment:
            estimator.observe(JobSpec(job_id, t.submit, t.end - t.start, ids[job_id].gpus, PARTITION, user="root",
                                      name=ids[job_id].name), t.end - t.start)  # fmt: skip
    return estimator


Errors = dict[str, list[tuple[float, float]]]  # predictor -> (absolute s, relative) per compared pair


def errors(moments: Sequence[Moment], ids: dict[str, Job], runs: dict[str, Any], samples: int) -> Errors:
    """(absolute error, relative error) per (moment, job squeue estimated), per predictor."""
    out: Errors = {key: [] for key in PREDICTORS}
    for m in moments:
        cluster, history = default_cluster(m.snap), history_at(m.at, ids, runs)
        instant = dataclasses.replace(m.snap, start_latency_s=0.0)
        runs_of = {"gputwin": forecast(cluster, m.snap, history, samples=samples, seed=0),
                   "gputwin_no_latency": forecast(cluster, instant, history, samples=samples, seed=0),
                   "gputwin_limits": forecast(cluster, m.snap, HistoryEstimator(), samples=samples, seed=0)}
        predicted: dict[str, dict[str, float | None]] = {
            key: {j.job_id: j.start_p50 for j in result.jobs} for key, result in runs_of.items()}
        predicted["squeue_start"] = dict(m.squeue)
        for job_id in m.squeue:
            if job_id not in runs or not all(predicted[k].get(job_id) is not None for k in predicted):
                continue
            actual = runs[job_id].start
            wait = max(actual - m.at, 1.0)
            for key, table in predicted.items():
                err = abs(float(table[job_id] or 0.0) - actual)  # None was skipped above
                out[key].append((err, err / wait))
    return out


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(math.ceil(q * len(ordered)) - 1, 0)] if ordered else math.nan


def summary(errs: Errors) -> dict[str, float]:
    out: dict[str, float] = {}
    for key, pairs in errs.items():
        for q, tag in ((0.5, "median"), (0.9, "p90")):
            out[f"{key}_{tag}_abs_err_s"] = round(quantile([a for a, _ in pairs], q), 2)
            out[f"{key}_{tag}_rel_err"] = round(quantile([r for _, r in pairs], q), 3)
    out["ratio"] = round(out["gputwin_median_abs_err_s"] / out["squeue_start_median_abs_err_s"], 3) \
        if out["squeue_start_median_abs_err_s"] else math.nan  # fmt: skip
    out["compared"] = len(errs["gputwin"])
    return out


def print_table(result: dict[str, Any], out: Any) -> None:
    print(f"{'predictor':<20}{'median s':>10}{'p90 s':>9}{'median rel':>12}{'p90 rel':>9}", file=out)
    for key in PREDICTORS:
        print(f"{key:<20}{result[key + '_median_abs_err_s']:>10.1f}{result[key + '_p90_abs_err_s']:>9.1f}"
              f"{result[key + '_median_rel_err']:>12.2f}{result[key + '_p90_rel_err']:>9.2f}", file=out)  # fmt: skip
    print(f"ratio (gputwin / squeue median): {result['ratio']}", file=out)


def main(argv: Sequence[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--offline" in argv:  # the offline half: a shared trace replayed, no SLURM (forecast_horizon.py)
        from forecast_horizon import main as offline

        return offline([a for a in argv if a != "--offline"])
    args = parse_args(argv)
    jobs = excerpt(args.trace, args.offset, args.jobs, args.compress, args.max_seconds, args.quantum)
    load = open("/proc/loadavg").read().split()[0] if os.path.exists("/proc/loadavg") else "?"
    started = time.monotonic()
    with cluster_state(args.state) as state:
        env = read_env(state)
        os.environ["SLURM_CONF"] = env["SLURM_CONF"]
        topology = slurm_snapshot().topology
        nodes, gpus = len(topology.nodes), sum(n.gpus for n in topology.nodes)
        latency, measured = (args.start_latency, 0) if args.start_latency is not None \
            else calibrate_room_latency(nodes, ("-p", PARTITION))  # fmt: skip
        ids, moments = run_workload(jobs, args.moments, latency, gpus)
        runs, _, _, source = best_timings(list(ids))
    if not moments:
        raise SystemExit("error: the queue never held 5 jobs at a moment: raise --jobs or --compress")
    result = {"jobs": len(ids), "moments": len(moments), "start_latency_s": round(latency, 3),
              "latency_samples": measured, "pending_at_moments": [len(m.snap.pending) for m in moments],
              "squeue_estimates_at_moments": [len(m.squeue) for m in moments],
              **summary(errors(moments, ids, runs, args.samples))}  # fmt: skip
    out = sys.stderr if args.json else sys.stdout
    print(f"forecast accuracy: {len(ids)} jobs of {args.trace} from row {args.offset}, compressed {args.compress:g}x, "
          f"run times in [{MIN_SECONDS}, {args.max_seconds}] s rounded up to {args.quantum} s, "
          f"{nodes} nodes; SLURM {env.get('GPUTWIN_SLURM_VERSION', '?')}; load {load}; times from {source}; "
          f"start latency {latency:.3f} s; pending at moments {result['pending_at_moments']}, squeue estimated "
          f"{result['squeue_estimates_at_moments']}", file=out)  # fmt: skip
    print_table(result, out)
    if args.json:
        report = {"slurm": result, "trace": str(args.trace), "offset": args.offset, "compress": args.compress,
                  "load_at_start": load, "quantum_s": args.quantum, "max_seconds": args.max_seconds, "wall_seconds": round(time.monotonic() - started, 1)}  # fmt: skip
        print(json.dumps(report, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
