"""How fast `gputwin forecast` is: 10,000 pending jobs on 1,000 nodes, 32 samples (issue 15's target).

The snapshot is synthetic and seeded: 1,000 nodes x 8 GPUs under 20 leaf switches of 50 nodes
(2 spines), 4 partitions of 250 nodes; every node busy with running jobs (1-8 GPUs, started in the
last 2 h, time limits of 1-8 h); 10,000 jobs queued in priority order (60 % 1 GPU ... 3 % 32 GPUs,
a third of them with a time limit), spread over the partitions. No history: run times are drawn
around the time limit or the prior (`gputwin.twin.sampling`). The same forecast runs with 1 and 2
worker processes, side by side; the figures are wall seconds of `forecast()` alone (the snapshot is
built first) and, beside them, CPU seconds per replay (the parent's and its workers', over the samples:
set-up and summary included), which a loaded machine does not inflate as it does wall seconds. The issue's target is <= 2 s with the compiled core (`GPUTWIN_COMPILE=1`) on 2 cores;
the line `compiled` says which core this run used. `--json`'s `forecast_s_10k_pending` (issue 15's
key) is the best wall time at exactly that size (null at any other; `forecast_s` holds it always).

    python benchmarks/forecast.py                 # the target size
    python benchmarks/forecast.py --pending 500 --nodes 100 --samples 4 --json   # smoke run
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import random
import resource
import time

import gputwin.core.scheduler as scheduler_module
from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.twin.forecast import forecast
from gputwin.twin.seed import LIVE_POLICY, default_cluster
from gputwin.twin.snapshot import PendingJob, RunningJob, SnapPartition, Snapshot

NOW = 1_800_000_000.0
TARGET = (10_000, 1000, 32)  # pending jobs, nodes, samples: the size issue 15 states
SIZES = ((1, 0.60), (2, 0.15), (4, 0.12), (8, 0.10), (32, 0.03))


def synthetic(nodes: int, pending: int, seed: int) -> Snapshot:
    rng = random.Random(seed)
    per_leaf = 50
    leaves = max(1, nodes // per_leaf)
    switches = (SwitchSpec("core"), SwitchSpec("spine0", "core"), SwitchSpec("spine1", "core")) + tuple(
        SwitchSpec(f"leaf{i}", f"spine{i % 2}") for i in range(leaves))
    names = [f"n{i:04d}" for i in range(nodes)]
    topo = TopologySpec("bench", switches, tuple(NodeSpec(n, 8, f"leaf{min(i // per_leaf, leaves - 1)}")
                                                 for i, n in enumerate(names)))  # fmt: skip
    quarter = max(1, nodes // 4)
    parts = tuple(SnapPartition(f"p{k}", tuple(names[k * quarter:(k + 1) * quarter if k < 3 else nodes]))
                  for k in range(4))  # fmt: skip
    return Snapshot(NOW, "benchmark", topo, parts, _running(rng, parts), _pending(rng, parts, pending))


def _running(rng: random.Random, parts: tuple[SnapPartition, ...]) -> tuple[RunningJob, ...]:
    out = []
    for part in parts:
        for node in part.nodes:
            free = 8
            while free:
                gpus = min(free, rng.choice((1, 2, 4, 8)))
                free -= gpus
                start = NOW - rng.uniform(0, 7200)
                out.append(RunningJob(f"r{len(out)}", part.name, start - 60, start, ((node, gpus),),
                                      time_limit=3600.0 * rng.randint(1, 8), user=f"u{rng.randrange(200)}"))  # fmt: skip
    return tuple(out)


def _pending(rng: random.Random, parts: tuple[SnapPartition, ...], count: int) -> tuple[PendingJob, ...]:
    sizes, weights = zip(*SIZES)
    jobs = []
    for i in range(count):
        gpus = rng.choices(sizes, weights)[0]
        limit = 3600.0 * rng.randint(1, 12) if rng.random() < 1 / 3 else None
        jobs.append(PendingJob(f"q{i}", parts[rng.randrange(len(parts))].name, NOW - rng.uniform(0, 86400), gpus,
                               max(1, gpus // 8), 0, limit, None, f"u{rng.randrange(200)}", f"job{i % 500}"))  # fmt: skip
    return tuple(jobs)


def _cpu() -> float:
    """CPU seconds of this process and of its reaped children (a forecast's forked workers): a
    replay's cost that the machine's load does not inflate as it does wall seconds. From
    getrusage (microseconds), not os.times (10 ms ticks): a small forecast's one forked worker
    may use less than a tick."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--pending", type=int, default=10_000)
    parser.add_argument("--samples", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--no-backfill", action="store_true",
                        help="strict priority order (the default is SLURM's: priority with EASY backfill)")
    parser.add_argument("--json", action="store_true", help="print one JSON object as the last line")
    args = parser.parse_args()
    snap = synthetic(args.nodes, args.pending, args.seed)
    cluster = default_cluster(snap, dataclasses.replace(LIVE_POLICY, backfill=not args.no_backfill))
    compiled = not scheduler_module.__file__.endswith(".py")
    with open("/proc/loadavg") as f:
        load = f.read().split()[0]
    print(f"snapshot: {len(snap.running)} running, {len(snap.pending)} pending on {args.nodes} nodes; "
          f"{args.samples} samples; backfill: {not args.no_backfill}; compiled core: {compiled}; "
          f"cpus: {os.cpu_count()}; load {load}")  # fmt: skip
    walls, cpus = {}, {}
    for workers in (1, 2):
        began, cpu = time.perf_counter(), _cpu()
        result = forecast(cluster, snap, samples=args.samples, seed=args.seed, workers=workers)
        walls[workers], cpus[workers] = time.perf_counter() - began, (_cpu() - cpu) / args.samples
        started = sum(j.started for j in result.jobs) / max(len(result.jobs), 1)
        print(f"workers {workers}: {walls[workers]:7.2f} s wall  ({walls[workers] / args.samples * workers:.3f} s per "
              f"replay per worker; {cpus[workers]:.3f} CPU s per replay; {started:.1%} of pending jobs start "
              "within the horizon)")  # fmt: skip
    best = min(walls.values())
    print(f"best: {best:.2f} s against the target of 2 s ({'met' if best <= 2 else 'not met'})")
    if args.json:
        # Issue 15's key holds the figure only at the size it names; any other size reports `forecast_s` alone.
        target = (args.pending, args.nodes, args.samples) == TARGET
        print(json.dumps({"forecast_s_10k_pending": round(best, 3) if target else None, "forecast_s": round(best, 3),
                          "target_size": target, "workers_1_s": round(walls[1], 3),
                          "workers_2_s": round(walls[2], 3), "cpu_s_per_replay_1": round(cpus[1], 4),
                          "cpu_s_per_replay_2": round(cpus[2], 4), "pending": len(snap.pending),
                          "running": len(snap.running), "nodes": args.nodes, "samples": args.samples,
                          "backfill": not args.no_backfill, "compiled": compiled, "load": float(load)}))  # fmt: skip


if __name__ == "__main__":
    main()
