"""Instructions a replay costs, counted by callgrind: a figure the machine's load does not move.

Wall time on a shared 2-core machine moves by 30 % and more with the load; the number of machine
instructions a run executes moves by well under 1 %. This counts, under valgrind's callgrind, the
instructions of one `gputwin.sim.run.run` replay of the shared Philly-shaped trace per policy, for
one or more Python interpreters side by side (each with its own gputwin installed: the editable
pure-Python core, a `pip wheel .` venv with the compiled core, an older commit's venv to compare
against). A run that only loads the trace and the cluster is counted too and subtracted, so the
figure is the replay alone.

    python benchmarks/instructions.py                                   # this interpreter, fifo,srtf,qssf
    python benchmarks/instructions.py --python OLD/bin/python --python NEW/bin/python --json

Needs valgrind (`apt-get install valgrind`); a replay runs about 50x slower under it (1-4 min each).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE_DIR = ROOT.parent / "shared" / "traces" / "philly_mix1"

# The child: load the inputs, then replay once (unless the policy is "-": load only).
CHILD = """
import sys
from pathlib import Path
from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.sim.run import Overrides, run
d = Path(sys.argv[1])
cluster = load_cluster(d / "cluster.csv")
jobs = read_trace(d / "jobs.csv").jobs
if sys.argv[2] != "-":
    summary, _ = run(cluster, jobs, overrides=Overrides(queue=sys.argv[2], placement="consolidate"), seed=0)
    print(summary["avg_jct"] if isinstance(summary, dict) else summary.avg_jct)
"""
COLLECTED = re.compile(r"Collected : (\d+)")


def count(python: str, trace_dir: Path, policy: str) -> tuple[int, str]:
    """Instructions of one child run, and what it printed (the average JCT)."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", python, "-c", CHILD,
           str(trace_dir), policy]  # fmt: skip
    done = subprocess.run(cmd, capture_output=True, text=True, check=False)
    found = COLLECTED.search(done.stderr)
    if done.returncode != 0 or found is None:
        raise SystemExit(f"error: {python}: the run failed: {done.stderr.strip().splitlines()[-1:]}")
    return int(found.group(1)), done.stdout.strip()


def core_of(python: str) -> str:
    probe = "import gputwin.core.scheduler as s; print('compiled' if s.__file__.endswith('.so') else 'pure')"
    return subprocess.run([python, "-c", probe], capture_output=True, text=True, check=False).stdout.strip() or "?"


def measure(pythons: list[str], policies: list[str], trace_dir: Path) -> dict[str, dict[str, object]]:
    results: dict[str, dict[str, object]] = {}
    for python in pythons:
        print(f"  {python}: loading only ...", file=sys.stderr, flush=True)
        base, _ = count(python, trace_dir, "-")
        row: dict[str, object] = {"core": core_of(python), "load_only": base}
        for policy in policies:
            print(f"  {python}: {policy} ...", file=sys.stderr, flush=True)
            total, jct = count(python, trace_dir, policy)
            row[policy] = {"instructions": total - base, "avg_jct": float(jct)}
        results[python] = row
    return results


def table(results: dict[str, dict[str, object]], policies: list[str]) -> str:
    lines = ["| python | core | " + " | ".join(f"{p} (G instr.)" for p in policies) + " |",
             "|---|---|" + "---|" * len(policies)]  # fmt: skip
    first = next(iter(results.values()))
    for python, row in results.items():
        cells = []
        for policy in policies:
            got, ref = row[policy], first[policy]
            assert isinstance(got, dict) and isinstance(ref, dict)
            change = (got["instructions"] / ref["instructions"] - 1) * 100 if row is not first else None
            same = "" if got["avg_jct"] == ref["avg_jct"] else " (other JCT!)"
            cells.append(f"{got['instructions'] / 1e9:.3f}" + ("" if change is None else f" ({change:+.1f} %)") + same)
        lines.append(f"| {python} | {row['core']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", action="append", help="an interpreter with gputwin installed (repeatable; "
                        "default: this one); the first is the reference the others are compared with")
    parser.add_argument("--policies", default="fifo,srtf,qssf", help="queue policies, comma-separated")
    parser.add_argument("--trace-dir", type=Path, default=DEFAULT_TRACE_DIR,
                        help="a folder with jobs.csv and cluster.csv (default: ../shared/traces/philly_mix1)")
    parser.add_argument("--json", action="store_true", help="the last line of stdout is one JSON object")
    args = parser.parse_args()
    if shutil.which("valgrind") is None:
        raise SystemExit("error: valgrind is not installed (apt-get install valgrind)")
    if not (args.trace_dir / "jobs.csv").is_file():
        raise SystemExit(f"error: {args.trace_dir}: no jobs.csv (--trace-dir)")
    policies = [p for p in args.policies.split(",") if p]
    results = measure(args.python or [sys.executable], policies, args.trace_dir)
    print(table(results, policies), file=sys.stderr if args.json else sys.stdout)
    if args.json:
        print(json.dumps({"trace": str(args.trace_dir), "runs": results}))


if __name__ == "__main__":
    main()
