"""Forecast start-time error against the horizon, offline: a shared trace replayed, snapshotted, forecast.

Issue 15 item 4, its offline half (`forecast_accuracy.py --offline` runs this): the Philly-shaped
trace (../shared/traces/philly_mix1: 30,756 jobs, 11 partitions, 352 x 8-GPU nodes) is replayed
once under SLURM's order (`--policy live`: priority, then submit; EASY backfill; `fifo` for the VC
table's own) and snapshotted at `--moments` seeded random instants in the middle 90 % of its
arrivals (`gputwin.twin.horizon.snapshots_along`); the replay then goes on to the end, so each
job's actual start is known. From each snapshot `gputwin.twin.forecast` predicts every pending
job's start with run times from:

* `oracle` - every true run time, no spread, one sample: its errors are what the arrivals after
  the moment change (backfilled jobs taking a place), the floor of any estimator;
* `history` - a `HistoryEstimator` fed the jobs that had ended by the moment, `--samples` draws;
* `learned` - the LightGBM estimator (`gputwin.twin.learned`) trained on those ended jobs (a
  moment with too short a history falls back to `history`, counted in `learned_fallbacks`).

Per (moment, pending job): horizon = predicted start (p50) - moment, error = |predicted - actual|
start. The table shows the median and p90 error per horizon bucket; `--plot` (default
docs/forecast-error-vs-horizon.png) draws them, with the numbers beside it as .json. `--json`:
the table goes to stderr and the last line of stdout is `{"offline": {...}}`.

    python benchmarks/forecast_horizon.py --json                                   # full size
    python benchmarks/forecast_horizon.py --jobs 3000 --moments 3 --samples 2 --no-plot --json  # smoke
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.core.history import Estimator, HistoryEstimator
from gputwin.core.model import ClusterSpec, JobSpec, PolicySpec
from gputwin.twin.forecast import forecast, quantile
from gputwin.twin.horizon import by_horizon, ended_by, snapshots_along, start_errors, told
from gputwin.twin.seed import LIVE_POLICY
from gputwin.twin.snapshot import Snapshot

ROOT = Path(__file__).resolve().parent.parent
TRACES = ROOT.parent / "shared" / "traces" / "philly_mix1"
PLOT = ROOT / "docs" / "forecast-error-vs-horizon.png"
ESTIMATORS = ("oracle", "history", "learned")
POLICIES = {"live": LIVE_POLICY, "fifo": PolicySpec()}


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/forecast_horizon.py", description=__doc__.split("\n")[0])
    parser.add_argument("--traces", type=Path, default=TRACES, help="a folder with jobs.csv and cluster.csv")
    parser.add_argument("--jobs", type=int, default=0, help="only the first N jobs (0: all)")
    parser.add_argument("--moments", type=int, default=12, help="snapshot instants (default 12)")
    parser.add_argument("--samples", type=int, default=16, help="forecast samples (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="seeds the moments and the draws")
    parser.add_argument("--policy", choices=sorted(POLICIES), default="live", help="every partition's (default live)")
    parser.add_argument("--estimators", default=",".join(ESTIMATORS), help="comma list of " + ", ".join(ESTIMATORS))
    parser.add_argument("--plot", type=Path, default=PLOT, help=f"PNG to write (default {PLOT.relative_to(ROOT)})")
    parser.add_argument("--no-plot", action="store_true", help="write no plot")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args(argv)
    args.estimators = tuple(e for e in args.estimators.split(",") if e)
    if args.moments < 1 or args.samples < 1 or args.jobs < 0 or not set(args.estimators) <= set(ESTIMATORS):
        parser.error(f"--moments, --samples >= 1; --jobs >= 0; --estimators among {', '.join(ESTIMATORS)}")
    return args


def workload(traces: Path, jobs: int, policy: PolicySpec) -> tuple[ClusterSpec, list[JobSpec]]:
    cluster = load_cluster(traces / "cluster.csv")
    cluster = dataclasses.replace(cluster, partitions=tuple(dataclasses.replace(p, policy=policy)
                                                            for p in cluster.partitions))  # fmt: skip
    trace = list(read_trace(traces / "jobs.csv").jobs)
    return cluster, trace[:jobs] if jobs else trace


def moments(jobs: Sequence[JobSpec], count: int, seed: int) -> list[float]:
    """`count` seeded instants, uniform over the middle 90 % of the arrivals, sorted."""
    first, last = jobs[0].submit, jobs[-1].submit
    rng = random.Random(f"forecast-horizon:{seed}")
    return sorted(round(first + (last - first) * rng.uniform(0.05, 0.95), 1) for _ in range(count))


def estimator_for(name: str, snap: Snapshot, history: list[JobSpec], seed: int) -> Estimator | None:
    """The estimator `name` at `snap` (None for the oracle, which is told instead)."""
    if name == "oracle":
        return None
    if name == "learned":
        from gputwin.estimators.model import TrainError
        from gputwin.twin.learned import learned_intervals

        try:
            return learned_intervals(snap, history, seed=seed)
        except TrainError:
            pass  # too short a history yet: the history estimator's points, counted by the caller
    estimator = HistoryEstimator()
    for job in history:
        estimator.observe(job, job.duration)
    return estimator


Pairs = dict[str, list[tuple[float, float]]]


def measure(cluster: ClusterSpec, jobs: list[JobSpec], args: argparse.Namespace) -> tuple[Pairs, dict[str, Any]]:
    """Every estimator's (horizon, error) pairs over every moment, and what the run saw."""
    along = snapshots_along(cluster, jobs, moments(jobs, args.moments, args.seed))
    truth = {j.job_id: j.duration for j in jobs}
    pairs: Pairs = {name: [] for name in args.estimators}
    seen: dict[str, Any] = {"pending_at_moments": [], "running_at_moments": [], "learned_fallbacks": 0}
    for snap in along.snapshots:
        seen["pending_at_moments"].append(len(snap.pending))
        seen["running_at_moments"].append(len(snap.running))
        if not snap.pending:
            continue
        history = ended_by(jobs, along.starts, snap.taken_at)
        for name in args.estimators:
            estimator = estimator_for(name, snap, history, args.seed)
            if name == "learned" and isinstance(estimator, HistoryEstimator):
                seen["learned_fallbacks"] += 1
            result = forecast(cluster, told(snap, truth), samples=1, sigma=0.0) if name == "oracle" else \
                forecast(cluster, snap, estimator, samples=args.samples, seed=args.seed)  # fmt: skip
            pairs[name] += start_errors(result, along.starts)
    return pairs, seen


def bucket_rows(pairs: Pairs) -> dict[str, list[dict[str, Any]]]:
    return {name: [{"bucket": b.label, "low_s": b.low, "high_s": b.high if b.high != float("inf") else None,
                    "count": b.count, "median_abs_err_s": _r(b.median), "p90_abs_err_s": _r(b.p90)}
                   for b in by_horizon(got)] for name, got in pairs.items()}  # fmt: skip


def _r(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def overall(pairs: Pairs) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, got in pairs.items():
        errs = [e for _, e in got]
        out[name] = {"pairs": len(errs), "median_abs_err_s": _r(quantile(errs, 0.5)) if errs else None,
                     "p90_abs_err_s": _r(quantile(errs, 0.9)) if errs else None}  # fmt: skip
    return out


def print_table(rows: dict[str, list[dict[str, Any]]], total: dict[str, Any], out: Any) -> None:
    names = list(rows)
    print(f"{'horizon':<10}" + "".join(f"{n + ' n':>10}{'med s':>9}{'p90 s':>9}" for n in names), file=out)
    for i, first in enumerate(rows[names[0]]):
        cells = [rows[n][i] for n in names]
        print(f"{first['bucket']:<10}" + "".join(f"{c['count']:>10}{_cell(c['median_abs_err_s'])}"
                                                 f"{_cell(c['p90_abs_err_s'])}" for c in cells), file=out)  # fmt: skip
    print(f"{'all':<10}" + "".join(f"{total[n]['pairs']:>10}{_cell(total[n]['median_abs_err_s'])}"
                                   f"{_cell(total[n]['p90_abs_err_s'])}" for n in names), file=out)  # fmt: skip


def _cell(value: float | None) -> str:
    return f"{'-':>9}" if value is None else f"{value:>9.1f}"


def plot(rows: dict[str, list[dict[str, Any]]], path: Path, title: str) -> None:
    """Median (solid) and p90 (dashed) error per horizon bucket, per estimator; numbers beside as .json."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    for name, buckets in rows.items():
        used = [b for b in buckets if b["count"]]
        xs = list(range(len(used)))
        line = ax.plot(xs, [b["median_abs_err_s"] for b in used], marker="o", label=f"{name} median")[0]
        ax.plot(xs, [b["p90_abs_err_s"] for b in used], marker="x", ls="--", color=line.get_color(), label=f"{name} p90")
        ax.set_xticks(xs, [b["bucket"] for b in used])
    ax.set_yscale("symlog", linthresh=10)  # symlog: the oracle's errors may be 0
    ax.set_ylim(bottom=0)
    ax.set(xlabel="horizon (predicted start - snapshot moment)", ylabel="|predicted - actual start| (s)", title=title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    path.with_suffix(".json").write_text(json.dumps({"title": title, "buckets": rows}, indent=1) + "\n")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load = open("/proc/loadavg").read().split()[0]
    began = time.monotonic()
    cluster, jobs = workload(args.traces, args.jobs, POLICIES[args.policy])
    pairs, seen = measure(cluster, jobs, args)
    rows, total = bucket_rows(pairs), overall(pairs)
    out = sys.stderr if args.json else sys.stdout
    title = (f"{args.traces.name}: {len(jobs)} jobs, {args.policy} policy, {args.moments} moments, "
             f"{args.samples} samples")  # fmt: skip
    print(f"forecast error vs horizon: {title}; load {load}; pending at moments {seen['pending_at_moments']}; "
          f"learned fallbacks {seen['learned_fallbacks']}", file=out)  # fmt: skip
    print_table(rows, total, out)
    if not args.no_plot:
        plot(rows, args.plot, title)
        print(f"plot: {args.plot} (numbers: {args.plot.with_suffix('.json')})", file=out)
    if args.json:
        report = {"jobs": len(jobs), "moments": args.moments, "samples": args.samples, "policy": args.policy,
                  "seed": args.seed, "load_at_start": float(load), "wall_seconds": round(time.monotonic() - began, 1),
                  **seen, "overall": total, "by_horizon": rows}  # fmt: skip
        print(json.dumps({"offline": report}, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
