"""What tenancy costs the simulator, and what it measures (issue 16's targets).

Two benchmarks (benchmarks/README.md says how to read them):

* synthetic_1m - the 1M-job `gputwin.sim.synthetic` trace on its 2,000-node x 8-GPU fat tree
  (qssf + topology-aware, as benchmarks/simulate.py runs it), twice, each in a fresh subprocess:
  with 20 tenants (every partition's 4,000 GPUs guaranteed 200 each, one cohort that lends and
  borrows without limits, the synthetic's 200 users dealt round-robin: u0 -> t00, u1 -> t01, ...)
  and `fairness: fairshare` (one-day half-life, t00 weighted 2), and without either. Wall time
  side by side, their ratio (target <= 1.5), and Jain's index of the tenant run.
* alibaba - the Alibaba 2023 default pod list (../shared/traces/alibaba_openb) on the demo
  cluster's 64 GPUs (fifo, consolidate; tests/sim/test_sim_fragmentation.py's golden set-up):
  `fractional` (the 2,573 pods asking for part of a GPU packed onto shared GPUs, gputwin.core.
  sharing) beside `whole` (each rounded up to a whole GPU): average JCT, fragmented GPUs,
  GPU-hours used (a share by its fraction) and held (an open shared GPU counts whole).

Wall times are of the simulation alone (the summary's `wall_seconds`). With `--json` the tables go
to stderr and stdout's last line is one JSON object.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, TextIO

from gputwin.core.model import ClusterSpec, QuotaSpec

ROOT = Path(__file__).resolve().parent.parent
ALIBABA = ROOT.parent / "shared" / "traces" / "alibaba_openb" / "openb_pod_list_default.csv"
TENANTS = 20
HALF_LIFE = 86400.0  # fairshare usage counts half after a day
WEIGHTS = {"t00": 2.0}  # one tenant weighted, so the weights are exercised too
TARGET_RATIO = 1.5


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/tenancy.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=1_000_000, help="synthetic jobs (default 1000000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the synthetic jobs (default 0)")
    parser.add_argument("--trace", type=Path, default=ALIBABA, help="the Alibaba pod list (default: shared traces)")
    parser.add_argument("--skip-alibaba", action="store_true", help="the synthetic benchmark only")
    parser.add_argument("--json", action="store_true", help="figures on stderr, one JSON object last on stdout")
    parser.add_argument("--worker", choices=("tenancy", "baseline"), help=argparse.SUPPRESS)  # one run
    return parser.parse_args(argv)


# --- synthetic ------------------------------------------------------------------------------------


def tenancy_cluster(cluster: ClusterSpec, users: int, tenants: int = TENANTS) -> ClusterSpec:
    """`cluster` with every partition's GPUs guaranteed evenly to `tenants` tenants of one cohort
    (users dealt round-robin) and fairshare ahead of each partition's queue policy."""
    gpus = {n.name: n.gpus for n in cluster.topology.nodes}
    members = [tuple(f"u{u}" for u in range(users) if u % tenants == t) for t in range(tenants)]
    parts = []
    for part in cluster.partitions:
        share = sum(gpus[n] for n in part.nodes) // tenants
        quotas = tuple(QuotaSpec(f"t{t:02d}", share, members[t], cohort="all") for t in range(tenants))
        policy = dataclasses.replace(part.policy, fairness="fairshare", half_life=HALF_LIFE, weights=WEIGHTS)
        parts.append(dataclasses.replace(part, quotas=quotas, policy=policy))
    return dataclasses.replace(cluster, partitions=tuple(parts))


def worker(side: str, n: int, seed: int) -> dict[str, Any]:
    """One replay of n synthetic jobs in this process, with tenants or without."""
    from gputwin.sim.run import run
    from gputwin.sim.synthetic import USERS, synthetic_cluster, synthetic_jobs

    cluster = synthetic_cluster()
    jobs = synthetic_jobs(n, cluster, seed=seed)
    if side == "tenancy":
        cluster = tenancy_cluster(cluster, USERS)
    cpu = time.process_time()
    summary, _ = run(cluster, jobs, seed=seed)
    cpu = time.process_time() - cpu  # on a shared machine the wall time is mostly the others' load
    return {"wall_s": summary["wall_seconds"], "cpu_s": round(cpu, 2), "jobs": summary["jobs"], "avg_jct": summary["avg_jct"],
            "rejected": sum(summary["rejected"].values()), "jain": summary.get("jain"),
            "tenants": len(summary.get("tenants", {})), "per_tenant": summary.get("tenants", {})}  # fmt: skip


def _spawn(side: str, n: int, seed: int) -> dict[str, Any]:
    command = [sys.executable, str(Path(__file__).resolve()), "--worker", side, "--jobs", str(n), "--seed", str(seed)]
    done = subprocess.run(command, stdout=subprocess.PIPE, text=True, check=False)  # stderr passes through
    if done.returncode != 0:
        raise SystemExit(f"{side} worker for {n} jobs failed with exit code {done.returncode}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def bench_synthetic(n: int, seed: int, out: TextIO) -> dict[str, Any]:
    """Both sides, each in a fresh process (the same start for each: no warm caches, no old heap)."""
    runs = {}
    for side in ("baseline", "tenancy"):
        print(f"  synthetic {n:,} jobs, {side} ...", file=sys.stderr, flush=True)
        runs[side] = _spawn(side, n, seed)
    base, ten = runs["baseline"], runs["tenancy"]
    ratio = round(ten["wall_s"] / base["wall_s"], 3) if base["wall_s"] else None
    cpu_ratio = round(ten["cpu_s"] / base["cpu_s"], 3) if base["cpu_s"] else None
    print(f"\nsynthetic: {n:,} jobs, 2,000 nodes x 8 GPUs, 4 partitions, qssf + topology-aware", file=out)
    print(f"  {'':<34}{'wall (s)':>10}{'CPU (s)':>10}{'avg JCT (s)':>14}{'finished':>10}{'rejected':>10}", file=out)
    for label, r in ((f"{TENANTS} tenants, quotas + fairshare", ten), ("no tenants (baseline)", base)):
        print(f"  {label:<34}{r['wall_s']:>10.2f}{r['cpu_s']:>10.2f}{r['avg_jct']:>14,.1f}{r['jobs']:>10,}"
              f"{r['rejected']:>10,}", file=out)  # fmt: skip
    verdict = "" if ratio is None else ("  (target <= 1.5: met)" if ratio <= TARGET_RATIO else "  (target <= 1.5: MISSED)")
    print(f"  ratio {ratio}{verdict} (CPU {cpu_ratio}); Jain's index {ten['jain']}", file=out)
    return {"synthetic_1m": {"jobs": n, "wall_s": ten["wall_s"], "baseline_wall_s": base["wall_s"], "ratio": ratio,
                             "cpu_s": ten["cpu_s"], "baseline_cpu_s": base["cpu_s"], "cpu_ratio": cpu_ratio,
                             "jain": ten["jain"], "avg_jct": ten["avg_jct"], "baseline_avg_jct": base["avg_jct"],
                             "per_tenant": ten["per_tenant"]}}  # fmt: skip


# --- alibaba --------------------------------------------------------------------------------------


def alibaba_cluster() -> ClusterSpec:
    from gputwin.api.loader import load_cluster
    from gputwin.api.resources import demo_cluster_path

    return load_cluster(demo_cluster_path())


def alibaba_side(trace: Path, fractional: bool) -> dict[str, Any]:
    """The pods with fractional requests packed onto shared GPUs (`fractional`), or each rounded
    up to a whole GPU, as the simulator read them before it packed fractions."""
    import dataclasses

    from gputwin.adapters.traces import read_trace
    from gputwin.sim.run import Overrides, run

    jobs = read_trace(trace).jobs
    if not fractional:
        jobs = [j if j.gpu_milli == 1000 else dataclasses.replace(j, gpu_milli=1000) for j in jobs]
    summary, outcome = run(alibaba_cluster(), jobs, overrides=Overrides(queue="fifo", placement="consolidate"))
    gpus = summary["gpu_utilization"] * sum(p["gpus"] for p in summary["partitions"].values())
    used = round(gpus * summary["makespan"] / 3600, 1)  # a share counts by its fraction
    held = summary.get("sharing", {}).get("gpu_hours_allocated", used)  # an open shared GPU counts whole
    return {"jobs": summary["jobs"], "avg_jct": summary["avg_jct"], "fragmented_gpus": summary.get("fragmented_gpus"),
            "share_jobs": summary.get("sharing", {}).get("share_jobs", 0), "gpu_hours": used,
            "gpu_hours_allocated": round(held, 1), "wall_s": summary["wall_seconds"]}  # fmt: skip


def bench_alibaba(trace: Path, out: TextIO) -> dict[str, Any]:
    sides = {"fractional": alibaba_side(trace, True), "whole": alibaba_side(trace, False)}
    print(f"\nalibaba: {trace.name} on the demo cluster's 64 GPUs, fifo + consolidate", file=out)
    print(f"  {'':<12}{'pods':>8}{'shares':>8}{'avg JCT (s)':>14}{'fragmented GPUs':>17}{'GPU-h used':>12}"
          f"{'GPU-h held':>12}", file=out)  # fmt: skip
    for name, r in sides.items():
        frag = "—" if r["fragmented_gpus"] is None else f"{r['fragmented_gpus']:.3f}"
        print(f"  {name:<12}{r['jobs']:>8,}{r['share_jobs']:>8,}{r['avg_jct']:>14,.1f}{frag:>17}"
              f"{r['gpu_hours']:>12,.1f}{r['gpu_hours_allocated']:>12,.1f}", file=out)  # fmt: skip
    return {"alibaba": sides}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.jobs < 1:
        print("error: --jobs: expected at least 1", file=sys.stderr)
        return 2
    if args.worker:
        print(json.dumps(worker(args.worker, args.jobs, args.seed)))
        return 0
    out = sys.stderr if args.json else sys.stdout
    started = time.perf_counter()
    report = bench_synthetic(args.jobs, args.seed, out)
    if not args.skip_alibaba:
        if not args.trace.is_file():
            print(f"error: {args.trace}: no such file; pass --trace or --skip-alibaba", file=sys.stderr)
            return 2
        report.update(bench_alibaba(args.trace, out))
    print(f"\ntotal {time.perf_counter() - started:.1f} s; load average {os.getloadavg()[0]:.2f}", file=out)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
