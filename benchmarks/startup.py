"""How long the `gputwin` command takes to answer, whole process, as a user runs it.

Three commands, each in a fresh process, `--runs` times (issue 17 item 1):

* `gputwin --help` - start-up alone: the interpreter, the CLI's imports, click's help text.
* `gputwin simulate` of a 100-job trace (the first 100 jobs of the bundled demo trace on the
  bundled demo cluster) - start-up plus a run too small to matter: what simulate imports.
* `gputwin simulate` of the Philly-shaped trace (../shared/traces/philly_mix1: jobs.csv and
  cluster.csv, 30,756 jobs) - start-up, reading the trace and the simulation.

Each row gives the median, min and max wall seconds of the whole process (fork to exit), and the
load average is printed before and after: on a shared machine the figures move with it. With
`--json` the table goes to stderr and stdout's last line is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_TRACE_DIR = ROOT / ".." / "shared" / "traces" / "philly_mix1"
SMALL_JOBS = 100


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/startup.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--trace-dir", type=Path, default=DEFAULT_TRACE_DIR,
                        help="folder with jobs.csv and cluster.csv (default ../shared/traces/philly_mix1)")
    parser.add_argument("--skip-mix1", action="store_true", help="only --help and the 100-job simulate")
    parser.add_argument("--json", action="store_true", help="table to stderr; one JSON object as the last line")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return args


def gputwin_command() -> list[str]:
    """The `gputwin` script installed beside this interpreter, else `python -m gputwin`."""
    script = Path(sys.executable).parent / "gputwin"
    if script.exists():
        return [str(script)]
    found = shutil.which("gputwin")
    return [found] if found else [sys.executable, "-m", "gputwin"]


def small_trace(folder: Path) -> Path:
    """The first SMALL_JOBS jobs of the bundled demo trace, as a CSV in `folder`."""
    from gputwin.api.resources import demo_trace_path

    path = folder / f"demo-{SMALL_JOBS}.csv"
    with demo_trace_path().open() as src:
        path.write_text("".join(itertools.islice(src, SMALL_JOBS + 1)))  # the header, then the jobs
    return path


def cases(folder: Path, args: argparse.Namespace) -> dict[str, list[str]]:
    """Name -> the arguments after `gputwin`."""
    from gputwin.api.resources import demo_cluster_path

    chosen = {
        "--help": ["--help"],
        f"simulate {SMALL_JOBS} jobs": ["simulate", "--trace", str(small_trace(folder)),
                                        "--cluster", str(demo_cluster_path()), "--json"],
    }  # fmt: skip
    if not args.skip_mix1:
        trace_dir = args.trace_dir.resolve()
        chosen["simulate mix1"] = ["simulate", "--trace", str(trace_dir / "jobs.csv"),
                                   "--cluster", str(trace_dir / "cluster.csv"), "--json"]  # fmt: skip
    return chosen


def time_once(command: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return elapsed


def compiled() -> bool:
    """Whether the installed core is the mypyc build (an extension module, not a .py file)."""
    import gputwin.core.ledger

    return not str(gputwin.core.ledger.__file__).endswith(".py")


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    command = gputwin_command()
    load_before = os.getloadavg()
    results: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="gputwin-startup-") as tmp:
        for name, extra in cases(Path(tmp), args).items():
            times = [time_once(command + extra) for _ in range(args.runs)]
            results[name] = {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
                             "max_s": round(max(times), 3)}  # fmt: skip
    load_after = os.getloadavg()
    build = "compiled" if compiled() else "pure Python"
    print(f"gputwin start-up, whole process, {args.runs} runs each ({build}; {' '.join(command)})", file=out)
    print(f"{'command':<22} {'median s':>9} {'min s':>7} {'max s':>7}", file=out)
    for name, row in results.items():
        print(f"{name:<22} {row['median_s']:>9.3f} {row['min_s']:>7.3f} {row['max_s']:>7.3f}", file=out)
    print(f"load average before {_load(load_before)}, after {_load(load_after)}", file=out)
    if args.json:
        record: dict[str, Any] = {"runs": args.runs, "compiled": build == "compiled", "commands": results,
                                  "load_before": list(load_before), "load_after": list(load_after)}  # fmt: skip
        print(json.dumps(record, sort_keys=True))


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    main()
