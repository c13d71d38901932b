"""How fast gputwin's simulator is, on a real trace and on a million synthetic jobs.

Two benchmarks (see benchmarks/README.md for what they measure and how to read them):

* mix1 - the Philly-shaped trace of ../shared/traces/philly_mix1 (30,756 jobs, 11 partitions):
  one replay per queue policy, native mode, plus `--compat helios` for fifo/sjf/srtf, next to the
  reference simulator's published wall time (it cannot run here: it is not installed and needs
  its own environment).
* synthetic - `gputwin.sim.synthetic` jobs on a 2,000-node x 8-GPU fat tree with QSSF and
  topology-aware placement, overhead on: 100k, 300k and then N jobs, each in a fresh Python
  process so its peak RSS is its own.
* grid (`--grid`) - issue 6's target: `gputwin compare` of the 36-candidate grid (6 queue policies x
  3 placers x backfill on/off, 30 run) on mix1 with `--jobs 2` and the plots, as a user runs it (a
  fresh process): wall and CPU seconds (its own and its workers'), and the load average around it.

Wall times are of the simulation alone (the summary's `wall_seconds`): loading the trace and
generating the jobs are timed separately. With `--json` the tables go to stderr and stdout holds
exactly one JSON object on its last line.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import tempfile
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from simulate_synthetic import bench_synthetic, spawn_worker

from gputwin.core.plugins import known
from gputwin.sim.run import HELIOS_PLACERS, HELIOS_QUEUES, Overrides, run

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE_DIR = "../shared/traces/philly_mix1"  # relative to the repo root
# Per policy, on this machine class, for mix1 (../shared/traces/README.md). Published, not measured.
REFERENCE_WALL = (3.0, 5.0)
GRID_PLACEMENTS = "consolidate,topology-aware,random"  # issue 6's 3 placers: first-fit is the 4th


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    queues, placers = known()["queue"], known()["placement"]
    parser = argparse.ArgumentParser(
        prog="benchmarks/simulate.py",
        description=(
            "Time gputwin's simulator. mix1: replay the Philly-shaped trace once per queue policy "
            "(native mode, plus --compat helios for fifo/sjf/srtf) and compare with the reference "
            "simulator's published 3-5 s per policy. synthetic: generate 100k, 300k and N jobs for "
            "a 2,000-node x 8-GPU cluster and replay each with qssf + topology-aware placement "
            "(overhead on) in its own subprocess, reporting wall time, peak RSS and jobs/s."
        ),
        epilog=(
            "Wall times cover the simulation only; trace loading and job generation are reported "
            "separately. The full run (1M jobs) takes a few minutes and ~0.5-1 GB of memory "
            "(10M streamed: ~1.5 GB)."
        ),
    )
    parser.add_argument(
        "--trace-dir",
        type=Path,
        default=ROOT / DEFAULT_TRACE_DIR,
        help=f"folder with jobs.csv and cluster.csv (default: {DEFAULT_TRACE_DIR}, from the repo root)",
    )
    parser.add_argument(
        "--jobs", type=_positive, default=1_000_000, help="synthetic jobs in the big run (default 1000000)"
    )
    parser.add_argument(
        "--stream", action="store_true",
        help="stream the synthetic jobs into each replay (none resident; what a 10M run needs: --jobs 10000000 "
        "--stream reports `synthetic_10m` with its peak against the <= 3 GB target)",
    )  # fmt: skip
    parser.add_argument("--skip-synthetic", action="store_true", help="run mix1 only")
    parser.add_argument("--skip-mix1", action="store_true", help="run the synthetic benchmark only")
    parser.add_argument(
        "--policies",
        type=_names(queues),
        default=["fifo", "sjf", "srtf", "las", "qssf", "priority"],
        help=f"comma-separated queue policies for mix1 (default: all; known: {','.join(queues)})",
    )
    parser.add_argument(
        "--placement",
        choices=placers,
        default="consolidate",
        help="placement policy for mix1 (default consolidate, the reference's; compat rows use it "
        "when the reference has it, consolidate otherwise)",
    )
    parser.add_argument(
        "--repeat",
        type=_positive,
        default=1,
        help="replay each mix1 policy K times and keep the fastest (default 1)",
    )
    parser.add_argument(
        "--seed", type=int, default=0, help="seed of the synthetic jobs and random placers (default 0)"
    )
    parser.add_argument(
        "--profile",
        type=_positive,
        metavar="N",
        help="also cProfile a synthetic run of N jobs (own subprocess) and print its top functions",
    )
    parser.add_argument(
        "--grid", action="store_true",
        help="also time `gputwin compare` of the 36-candidate grid on mix1 (issue 6: <= 30 s on 2 cores)",
    )  # fmt: skip
    parser.add_argument("--grid-workers", type=_positive, default=2, help="compare --jobs for --grid (default 2)")
    parser.add_argument(
        "--no-plots", action="store_true", help="--grid without the report's plots (they are in by default)"
    )
    parser.add_argument(
        "--peer-python", metavar="PYTHON",
        help="also replay mix1 under this interpreter (say, a venv with the other core: compiled wheel or "
        "editable pure Python) and print both cores side by side, with a check that the results match",
    )  # fmt: skip
    parser.add_argument(
        "--json", action="store_true", help="tables to stderr; one JSON object as stdout's last line"
    )
    return parser.parse_args(argv)


def _positive(text: str) -> int:
    value = int(text.replace("_", ""))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def _names(allowed: list[str]) -> Callable[[str], list[str]]:
    def parse(text: str) -> list[str]:
        names = [t.strip() for t in text.split(",") if t.strip()]
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(
                f"unknown policy {','.join(unknown) or '(none)'}; known: {','.join(allowed)}"
            )
        return names

    return parse


# --- mix1 -----------------------------------------------------------------------------------------


@dataclass
class Mix1Row:
    policy: str
    mode: str  # "native" or "helios"
    wall_s: float
    avg_jct: float
    reference_jct: float | None


def bench_mix1(
    trace_dir: Path, policies: list[str], placement: str, seed: int, repeat: int, out: TextIO
) -> dict[str, Any]:
    """Replays per policy (and compat mode where the reference has it); the fastest of `repeat`."""
    from gputwin.adapters.traces import read_trace

    from gputwin.api.loader import load_cluster

    started = time.perf_counter()
    cluster = load_cluster(trace_dir / "cluster.csv")
    jobs = read_trace(trace_dir / "jobs.csv").jobs
    load_s = time.perf_counter() - started
    reference = _reference_results(trace_dir)
    compat_placer = placement if placement in HELIOS_PLACERS else "consolidate"
    rows: list[Mix1Row] = []
    for policy in policies:
        runs: list[tuple[str, str, str | None]] = [("native", placement, None)]
        if policy in HELIOS_QUEUES:
            runs.append(("helios", compat_placer, "helios"))
        for mode, placer, compat in runs:
            print(f"  mix1 {policy} {mode} ...", file=sys.stderr, flush=True)
            overrides = Overrides(queue=policy, placement=placer)
            walls, avg_jct = [], 0.0
            for _ in range(repeat):
                summary, _ = run(cluster, jobs, overrides=overrides, compat=compat, seed=seed)
                walls.append(summary["wall_seconds"])
                avg_jct = summary["avg_jct"]
            ref = reference.get(f"{policy}/{placer}", {}).get("avg_jct")
            rows.append(Mix1Row(policy, mode, min(walls), avg_jct, ref))
    _print_mix1(rows, len(jobs), len(cluster.partitions), len(cluster.topology.nodes), placement, load_s, out)
    return {
        "mix1": {r.policy: r.wall_s for r in rows if r.mode == "native"},
        "mix1_helios_compat": {r.policy: r.wall_s for r in rows if r.mode == "helios"},
        "mix1_avg_jct": {f"{r.policy}/{r.mode}": r.avg_jct for r in rows},
        "mix1_load_s": round(load_s, 3),
        "mix1_jobs": len(jobs),
        "reference_wall_s": list(REFERENCE_WALL),
    }


def bench_peer(
    args: argparse.Namespace, trace_dir: Path, mine: dict[str, Any], out: TextIO
) -> dict[str, Any]:
    """mix1 again under `--peer-python` (a fresh process, same options), next to this process's rows."""
    command = [args.peer_python, str(Path(__file__).resolve()), "--skip-synthetic", "--json", "--trace-dir",
               str(trace_dir), "--policies", ",".join(args.policies), "--placement", args.placement,
               "--repeat", str(args.repeat), "--seed", str(args.seed)]  # fmt: skip
    print(f"\nmix1 under {args.peer_python} ...", file=sys.stderr, flush=True)
    proc = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    peer: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    same = peer["mix1_avg_jct"] == mine["mix1_avg_jct"]
    print(f"\nmix1, both cores in one run (wall s of the simulation; load {_loadavg()})", file=out)
    # ratio: the interpreted core's wall over the compiled one's (the peer's over this one's if alike)
    slow, fast = (mine, peer) if mine["core"] == "interpreted" else (peer, mine)
    print(f"{'policy/mode':<18}{mine['core']:>14}{peer['core']:>14}{'ratio':>8}", file=out)
    for key, table in (("native", "mix1"), ("helios", "mix1_helios_compat")):
        for policy, wall in mine[table].items():
            ratio = slow[table][policy] / fast[table][policy]
            print(f"{policy + '/' + key:<18}{wall:>14.3f}{peer[table][policy]:>14.3f}{ratio:>8.2f}", file=out)
    print(f"same average JCT in every row: {'yes' if same else 'NO'}", file=out)
    kept = {k: peer[k] for k in ("core", "mix1", "mix1_helios_compat", "mix1_avg_jct")}
    return kept | {"same_avg_jct": same}


def _loadavg() -> str:
    path = Path("/proc/loadavg")
    return " ".join(path.read_text().split()[:3]) if path.is_file() else "n/a"


def _reference_results(trace_dir: Path) -> dict[str, Any]:
    path = trace_dir / "reference_results.json"
    if not path.is_file():
        return {}
    data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _print_mix1(
    rows: list[Mix1Row], jobs: int, partitions: int, nodes: int, placement: str, load_s: float, out: TextIO
) -> None:
    lo, hi = REFERENCE_WALL
    print(f"\nmix1: {jobs:,} jobs, {partitions} partitions, {nodes} nodes; placement {placement}; "
          f"trace + cluster loaded in {load_s:.2f} s (not in the wall times)", file=out)  # fmt: skip
    print(f"reference simulator (HeliosArtifact): {lo:g}-{hi:g} s per policy, published in "
          "../shared/traces/README.md - it cannot be run here, so the speed-up is against that range",
          file=out)  # fmt: skip
    header = f"{'policy':<9}{'mode':<8}{'wall s':>8}{'ref wall s':>12}{'speed-up':>12}{'avg JCT s':>12}{'ref JCT s':>12}"
    print(header, file=out)
    print("-" * len(header), file=out)
    for r in rows:
        speedup = f"{lo / r.wall_s:.1f}-{hi / r.wall_s:.1f}x" if r.wall_s > 0 else "-"
        ref = f"{r.reference_jct:.3f}" if r.reference_jct is not None else "-"
        print(f"{r.policy:<9}{r.mode:<8}{r.wall_s:>8.3f}{f'{lo:g}-{hi:g}':>12}{speedup:>12}"
              f"{r.avg_jct:>12.3f}{ref:>12}", file=out)  # fmt: skip


# --- grid: issue 6's 36 candidates, as a user runs them -------------------------------------------


def bench_grid(trace_dir: Path, workers: int, plots: bool, repeat: int, out: TextIO) -> dict[str, Any]:
    """`gputwin compare` of 6 queue policies x 3 placers x backfill on/off in a fresh process (the
    fastest of `repeat` by wall time). CPU seconds are the process's and its workers' (what a quiet
    machine's wall time would be bounded by: CPU / workers); the load average says how quiet it was."""
    runs = []
    for _ in range(repeat):
        print("  grid: gputwin compare, 36 candidates ...", file=sys.stderr, flush=True)
        runs.append(_grid_once(trace_dir, workers, plots))
    best = min(runs, key=lambda r: r["wall_s"])
    best["runs_wall_s"] = [r["wall_s"] for r in runs]
    print(f"\ngrid: gputwin compare, {best['candidates']} candidates run ({best['skipped']} skipped), "
          f"--jobs {workers}, plots {'on' if plots else 'off'}", file=out)  # fmt: skip
    walls = ", ".join(f"{w:.1f}" for w in best["runs_wall_s"])
    print(f"wall {best['wall_s']:.1f} s (target <= 30 s; runs: {walls}), "
          f"CPU {best['cpu_s']:.1f} s (the candidates' simulation walls sum to {best['sim_s']:.1f} s), "
          f"load average {best['load_before']:.2f} before / {best['load_after']:.2f} after", file=out)  # fmt: skip
    return {"grid": best}


def _grid_once(trace_dir: Path, workers: int, plots: bool) -> dict[str, Any]:
    out_dir = Path(tempfile.mkdtemp(prefix="gputwin-grid-"))
    command = [sys.executable, "-m", "gputwin", "compare", "--trace", str(trace_dir / "jobs.csv"),
               "--cluster", str(trace_dir / "cluster.csv"), "--policies", ",".join(known()["queue"]),
               "--placements", GRID_PLACEMENTS, "--backfill", "on,off", "--jobs", str(workers),
               "--out", str(out_dir), "--quiet", "--json", *([] if plots else ["--no-plots"])]  # fmt: skip
    try:
        load_before = os.getloadavg()[0]
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"gputwin compare failed with exit code {done.returncode}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {
        "wall_s": round(wall, 2),
        "cpu_s": round(cpu, 2),
        "sim_s": round(sum(c["wall_seconds"] for c in result["candidates"]), 2),  # per-candidate walls
        "candidates": len(result["candidates"]),
        "skipped": len(result["skipped"]),
        "workers": workers,
        "plots": plots,
        "load_before": round(load_before, 2),
        "load_after": round(os.getloadavg()[0], 2),
        "best_candidate": result["candidates"][0]["candidate"],
    }


# --- main -----------------------------------------------------------------------------------------


def core_build() -> str:
    """'compiled' when the mypyc-built core (a wheel build) is the one imported, else 'interpreted'."""
    import gputwin.core.scheduler

    return "compiled" if not gputwin.core.scheduler.__file__.endswith(".py") else "interpreted"


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    report: dict[str, Any] = {"mix1": {}, "synthetic_1m": None, "core": core_build()}
    print(f"core: {report['core']} ({'mypyc-compiled' if report['core'] == 'compiled' else 'pure Python'})",
          file=out)
    trace_dir = args.trace_dir.resolve()
    if (args.grid or not args.skip_mix1) and not (
        (trace_dir / "jobs.csv").is_file() and (trace_dir / "cluster.csv").is_file()
    ):
        print(
            f"error: {trace_dir} has no jobs.csv and cluster.csv; pass --trace-dir or --skip-mix1",
            file=sys.stderr,
        )
        return 2
    # Synthetic first, while this process is small: a child's ru_maxrss starts at the RSS of the
    # process it was forked from (Linux records the pre-exec peak), so spawning after mix1 has
    # loaded its trace would report this process's size for small runs.
    if not args.skip_synthetic:
        report.update(bench_synthetic(args.jobs, args.seed, out, args.stream))
    if args.grid:  # after the synthetic runs, whose peak RSS is read from RUSAGE_CHILDREN
        report.update(bench_grid(trace_dir, args.grid_workers, not args.no_plots, args.repeat, out))
    if not args.skip_mix1:
        report.update(bench_mix1(trace_dir, args.policies, args.placement, args.seed, args.repeat, out))
        if args.peer_python:
            report["peer"] = bench_peer(args, trace_dir, report, out)
    if args.profile:
        print(f"\ncProfile of a synthetic run of {args.profile:,} jobs (stderr):", file=out, flush=True)
        report["profile_run"] = spawn_worker(args.profile, args.seed, profile=True)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
