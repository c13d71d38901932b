"""How fast gputwin's SLURM adapter moves data in and out (issue 4's targets).

Three measurements (see benchmarks/README.md):

* sacct - generate an N-line `sacct -P` dump (jobs with their `.batch`/`.extern`/`.0` steps,
  array tasks, typed gres, pending/running/cancelled/requeued records) and time `read_trace` on
  it: `sacct_records_per_s` counts every data line read, `sacct_jobs_per_s` the jobs kept.
  Target: >= 200,000 records/s.
* render - build a 1,000-node cluster (125 leaf switches x 8 nodes x 8 GPUs under 5 spines and a
  core, 8 partitions) and time `render` plus the offline part of `validate` (line and hostlist
  checks, node existence against the generated node set, `luac -p` when installed).
* apply - on a live SLURM test cluster (`GPUTWIN_SLURM_STATE` pointing at a folder with env.sh,
  as tests/slurm/conftest.py uses) time `apply` of manifests/samples/two-leaf.yaml: a dry run
  (validation + diff) and a real apply (write, reconfigure, verify); the cluster's own managed
  files are put back afterwards. Without a cluster `apply_seconds` is null and the reason says why.
  A live 1,000-node apply would need a slurmctld with 1,000 nodes: the live figure is measured on
  the 16-node test cluster.

With `--json` the table goes to stderr and stdout's last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

ROOT = Path(__file__).resolve().parent.parent
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
HEADER = (
    "JobID|JobName|User|Account|Partition|State|Submit|Start|End|Elapsed|AllocTRES|ReqTRES|NNodes|NodeList"
)
RECORDS_TARGET = 200_000
RENDER_TARGET_S = 2.0


# --- command line ---------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/slurm_io.py",
        description=(
            "Time the SLURM adapter: read a generated N-line `sacct -P` dump with read_trace "
            "(target >= 200,000 records/s), render + validate a generated 1,000-node topology "
            "(125 leaves x 8 nodes, 8 partitions), and - when GPUTWIN_SLURM_STATE points at a "
            "running test cluster - apply the two-leaf sample policy to it (dry run and real)."
        ),
        epilog="The live apply runs on the 16-node test cluster; a 1,000-node slurmctld is not part of it.",
    )
    parser.add_argument("--records", type=int, default=200_000, metavar="N",
                        help="data lines in the generated sacct -P file (default 200000)")  # fmt: skip
    parser.add_argument("--repeat", type=int, default=3, metavar="K",
                        help="time the read K times and keep the fastest (default 3)")  # fmt: skip
    parser.add_argument("--seed", type=int, default=1, help="random seed of the generated dump (default 1)")
    parser.add_argument("--json", action="store_true",
                        help="table on stderr; stdout's last line is one JSON object")  # fmt: skip
    args = parser.parse_args(argv)
    if args.records < 1 or args.repeat < 1:
        parser.error("--records and --repeat must be >= 1")
    return args


# --- sacct -P ingestion ---------------------------------------------------------------------------

_PARTITIONS = ("train", "infer", "dev", "debug")
_STATES = ("COMPLETED",) * 12 + (
    "FAILED",
    "CANCELLED by 1000",
    "TIMEOUT",
    "PREEMPTED",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
)
_GPU_TYPES = ("a100", "h100")
_EPOCH = datetime(2026, 1, 1, tzinfo=UTC)


def _stamp(seconds: int) -> str:
    return (_EPOCH + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%S")


def _elapsed(seconds: int) -> str:
    days, rest = divmod(seconds, 86400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def write_sacct(path: Path, records: int, seed: int = 1) -> None:
    """An N-data-line `sacct -P -D` dump shaped like a real GPU cluster's (one header line)."""
    rng = random.Random(seed)
    users = [f"user{i:03d}" for i in range(200)]
    lines = [HEADER]
    job = 1000
    clock = 0
    while len(lines) <= records:
        job += 1
        clock += rng.randint(0, 40)
        user = rng.choice(users)
        part = rng.choice(_PARTITIONS)
        name = rng.choice(("train", "eval", "sweep", "notebook", "bench")) + str(rng.randint(0, 30))
        nodes = rng.choice((1, 1, 1, 1, 2, 4))
        gpus = rng.choice((1, 2, 4, 8)) if nodes == 1 else 8 * nodes
        first = 1 + nodes // 2
        hosts = f"gpu{first:04d}" if nodes == 1 else f"gpu[{first:04d}-{first + nodes - 1:04d}]"
        gtype = rng.choice(_GPU_TYPES)
        alloc = f"billing={gpus * 4},cpu={gpus * 4},gres/gpu:{gtype}={gpus},gres/gpu={gpus},mem={gpus * 32}G,node={nodes}"
        req = f"billing={gpus * 4},cpu={gpus * 4},gres/gpu={gpus},mem={gpus * 32}G,node={nodes}"
        submit = clock
        start = submit + rng.choice((0, 0, 5, 60, 600, 3600))
        run = int(rng.lognormvariate(7, 1.5)) + 1
        kind = rng.random()
        job_ids = [str(job)]
        if kind < 0.1:  # an array of 2-6 tasks
            job_ids = [f"{job}_{task}" for task in range(rng.randint(2, 6))]
        for job_id in job_ids:
            state = rng.choice(_STATES)
            if kind > 0.97:  # pending: no start, no allocation
                lines.append(f"{job_id}|{name}|{user}|ml|{part}|PENDING|{_stamp(submit)}|Unknown|Unknown|"
                             f"00:00:00||{req}|{nodes}|None assigned")  # fmt: skip
                continue
            if kind > 0.95:  # running
                lines.append(f"{job_id}|{name}|{user}|ml|{part}|RUNNING|{_stamp(submit)}|{_stamp(start)}|"
                             f"Unknown|{_elapsed(run)}|{alloc}|{req}|{nodes}|{hosts}")  # fmt: skip
                continue
            if kind > 0.93:  # requeued once: an earlier run, then the one that finished (sacct -D)
                lines.append(f"{job_id}|{name}|{user}|ml|{part}|REQUEUED|{_stamp(submit)}|{_stamp(start)}|"
                             f"{_stamp(start + 30)}|00:00:30|{alloc}|{req}|{nodes}|{hosts}")  # fmt: skip
                start += 60
            end = start + run
            times = f"{_stamp(submit)}|{_stamp(start)}|{_stamp(end)}|{_elapsed(run)}"
            lines.append(f"{job_id}|{name}|{user}|ml|{part}|{state}|{times}|{alloc}|{req}|{nodes}|{hosts}")
            steps = f"{_stamp(start)}|{_stamp(start)}|{_stamp(end)}|{_elapsed(run)}"
            step_tres = (
                f"cpu={gpus * 4},gres/gpu:{gtype}={gpus},gres/gpu={gpus},mem={gpus * 32}G,node={nodes}"
            )
            lines.append(f"{job_id}.batch|batch|||{part}|{state.split()[0]}|{steps}|{step_tres}||1|{hosts}")
            lines.append(f"{job_id}.extern|extern|||{part}|COMPLETED|{steps}|{step_tres}||{nodes}|{hosts}")
            if rng.random() < 0.5:
                lines.append(
                    f"{job_id}.0|python|||{part}|{state.split()[0]}|{steps}|{step_tres}||{nodes}|{hosts}"
                )
    path.write_text("\n".join(lines[: records + 1]) + "\n", encoding="utf-8")


def bench_sacct(records: int, repeat: int, seed: int) -> dict[str, Any]:
    from gputwin.adapters.traces import read_trace

    with tempfile.TemporaryDirectory(prefix="gputwin-slurm-io-") as tmp:
        path = Path(tmp) / "sacct-P.txt"
        started = time.perf_counter()
        write_sacct(path, records, seed)
        generate = time.perf_counter() - started
        best = float("inf")
        for _ in range(repeat):
            started = time.perf_counter()
            result = read_trace(path, "sacct")
            best = min(best, time.perf_counter() - started)
        size_mb = path.stat().st_size / 1e6
    return {
        "sacct_records": records,
        "sacct_jobs": len(result.jobs),
        "sacct_skipped": dict(result.skipped),
        "sacct_file_mb": round(size_mb, 2),
        "sacct_generate_seconds": round(generate, 3),
        "sacct_read_seconds": round(best, 4),
        "sacct_records_per_s": round(records / best),
        "sacct_jobs_per_s": round(len(result.jobs) / best),
    }


# --- render + validate ----------------------------------------------------------------------------


def big_cluster_yaml(leaves: int = 125, per_leaf: int = 8, spines: int = 5, partitions: int = 8) -> str:
    """SwitchTopology + GPUPartitions + SchedulingPolicies for leaves x per_leaf 8-GPU nodes."""
    docs = [
        "apiVersion: gputwin.io/v1alpha1\nkind: SwitchTopology\nmetadata:\n  name: big\nspec:\n  switches:\n"
    ]
    docs[0] += "    - name: core\n"
    docs[0] += "".join(f"    - name: spine{s}\n      parent: core\n" for s in range(spines))
    docs[0] += "".join(f"    - name: leaf{i:03d}\n      parent: spine{i % spines}\n" for i in range(leaves))
    docs[0] += "  nodeGroups:\n"
    for i in range(leaves):
        first = i * per_leaf + 1
        docs[0] += (f"    - switch: leaf{i:03d}\n      nodes: gpu[{first:04d}-{first + per_leaf - 1:04d}]\n"
                    "      gpusPerNode: 8\n")  # fmt: skip
    docs[0] += "  commOverhead:\n    perTier: 0.1\n    crossNode: 0.05\n"
    policies = (("fifo-consolidate", "fifo", "consolidate", ""), ("sjf-topology", "sjf", "topology-aware",
                "\n    maxWaitSeconds: 300"), ("qssf-topology", "qssf", "topology-aware", ""))  # fmt: skip
    for name, queue, placement, extra in policies:
        docs.append(f"apiVersion: gputwin.io/v1alpha1\nkind: SchedulingPolicy\nmetadata:\n  name: {name}\n"
                    f"spec:\n  queue:\n    policy: {queue}\n  placement:\n    policy: {placement}{extra}\n")  # fmt: skip
    nodes = leaves * per_leaf
    step = nodes // partitions
    for p in range(partitions):
        first, last = p * step + 1, nodes if p == partitions - 1 else (p + 1) * step
        docs.append(f"apiVersion: gputwin.io/v1alpha1\nkind: GPUPartition\nmetadata:\n  name: part{p}\nspec:\n"
                    f"  topology: big\n  taskTypes: [task{p}]\n  nodes: gpu[{first:04d}-{last:04d}]\n"
                    f"  policy: {policies[p % len(policies)][0]}\n  priorityTier: {p % 3}\n")  # fmt: skip
    return "---\n".join(docs)


def bench_render(version: str = "22.05") -> dict[str, Any]:
    from unittest import mock

    import hostlist
    from gputwin.adapters.slurm import apply as apply_mod
    from gputwin.adapters.slurm.render import render

    from gputwin.api.loader import load_cluster

    with tempfile.TemporaryDirectory(prefix="gputwin-slurm-io-") as tmp:
        path = Path(tmp) / "big.yaml"
        path.write_text(big_cluster_yaml(), encoding="utf-8")
        started = time.perf_counter()
        cluster = load_cluster(path)
        load = time.perf_counter() - started
    started = time.perf_counter()
    rendered = render(cluster, version=version)
    render_s = time.perf_counter() - started
    # validate() asks slurmctld which nodes exist and which settings it runs with: answer from the
    # generated cluster instead, so the offline checks are what is timed.
    nodes = {node.name for node in cluster.topology.nodes}
    requires = {key: want for key, want in rendered.requires}
    started = time.perf_counter()
    with mock.patch.object(apply_mod, "live_nodes", return_value=nodes), \
         mock.patch.object(apply_mod, "live_config", return_value=requires):  # fmt: skip
        notes = apply_mod.validate(rendered)
    validate_s = time.perf_counter() - started
    partition_nodes = sum(len(hostlist.expand_hostlist(h)) for _, h in rendered.partitions)
    return {
        "render_nodes": len(nodes),
        "render_switches": len(rendered.switches),
        "render_partitions": len(rendered.partitions),
        "render_partition_nodes": partition_nodes,
        "render_bytes": sum(len(data) for _, data in rendered.files),
        "load_seconds": round(load, 4),
        "render_only_seconds": round(render_s, 4),
        "validate_seconds": round(validate_s, 4),
        "render_seconds": round(render_s + validate_s, 4),
        "lua_checked": not notes,
    }


# --- live apply -----------------------------------------------------------------------------------


def bench_apply() -> dict[str, Any]:
    state = os.environ.get("GPUTWIN_SLURM_STATE")
    if not state:
        return {"apply_seconds": None, "apply_dry_run_seconds": None,
                "apply_note": "no live cluster: GPUTWIN_SLURM_STATE is not set (scripts/slurm/start.sh)"}  # fmt: skip
    env_file = Path(state) / "env.sh"
    if not env_file.is_file():
        return {"apply_seconds": None, "apply_dry_run_seconds": None,
                "apply_note": f"no live cluster: {env_file} does not exist"}  # fmt: skip
    sys.path.insert(0, str(Path(__file__).resolve().parent))  # benchmarks/ is no package: its sibling
    from slurm_live import read_env

    from gputwin.adapters.slurm.apply import apply, reconfigure, write_atomic
    from gputwin.adapters.slurm.errors import SlurmError
    from gputwin.adapters.slurm.render import MANAGED_FILES, render
    from gputwin.api.loader import load_cluster

    env = read_env(Path(state))
    saved_env = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    conf_dir = Path(env["SLURM_CONF"]).parent
    saved = {name: (conf_dir / name).read_bytes() for name in MANAGED_FILES if (conf_dir / name).exists()}
    try:
        rendered = render(load_cluster(TWO_LEAF))
        started = time.perf_counter()
        apply(rendered, conf_dir, dry_run=True)
        dry = time.perf_counter() - started
        started = time.perf_counter()
        result = apply(rendered, conf_dir)
        real = time.perf_counter() - started
    except SlurmError as exc:
        return {
            "apply_seconds": None,
            "apply_dry_run_seconds": None,
            "apply_note": f"live apply failed: {exc}",
        }
    finally:
        for name in MANAGED_FILES:
            if name in saved:
                write_atomic(conf_dir / name, saved[name])
            else:
                (conf_dir / name).unlink(missing_ok=True)
        try:
            reconfigure()
        finally:
            for key, value in saved_env.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    return {"apply_seconds": round(real, 3), "apply_dry_run_seconds": round(dry, 3),
            "apply_changed_files": list(result.changed),
            "apply_note": "measured on the live 16-node test cluster (two-leaf sample policy); "
                          "a 1,000-node live apply needs a slurmctld with 1,000 nodes"}  # fmt: skip


# --- main -----------------------------------------------------------------------------------------


def print_table(report: dict[str, Any], out: TextIO) -> None:
    def row(what: str, value: str, note: str = "") -> None:
        print(f"{what:<34} {value:>14}  {note}", file=out)

    ok = "ok" if report["sacct_records_per_s"] >= RECORDS_TARGET else "BELOW TARGET"
    row("sacct -P records", f"{report['sacct_records']:,}", f"{report['sacct_file_mb']} MB generated")
    row("sacct -P read s (best)", f"{report['sacct_read_seconds']:.3f}")
    row("sacct -P records/s", f"{report['sacct_records_per_s']:,}", f"target >= {RECORDS_TARGET:,}: {ok}")
    row("sacct -P jobs kept", f"{report['sacct_jobs']:,}", f"{report['sacct_jobs_per_s']:,} jobs/s")
    skipped = ", ".join(f"{k} {v:,}" for k, v in report["sacct_skipped"].items())
    row("sacct -P skipped", "", skipped)
    ok = "ok" if report["render_seconds"] <= RENDER_TARGET_S else "ABOVE TARGET"
    topo = (f"{report['render_nodes']:,} nodes, {report['render_switches']} switches, "
            f"{report['render_partitions']} partitions")  # fmt: skip
    row("render s", f"{report['render_only_seconds']:.3f}", topo)
    lua = "luac -p included" if report["lua_checked"] else "no luac here: Lua syntax not checked"
    row("validate s (offline)", f"{report['validate_seconds']:.3f}", lua)
    row(
        "render + validate s",
        f"{report['render_seconds']:.3f}",
        f"target <= {RENDER_TARGET_S:g} s with apply: {ok}",
    )
    if report["apply_seconds"] is None:
        row("apply s", "n/a", report["apply_note"])
    else:
        row("apply dry run s (validate+diff)", f"{report['apply_dry_run_seconds']:.3f}")
        row("apply s (write+reconfigure)", f"{report['apply_seconds']:.3f}", report["apply_note"])


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    report: dict[str, Any] = {}
    report.update(bench_sacct(args.records, args.repeat, args.seed))
    report.update(bench_render())
    report.update(bench_apply())
    print_table(report, out)
    if args.json:
        print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
