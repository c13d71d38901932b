"""How long the `gputwin` command takes to answer, whole process, as a user runs it.

Three commands, each in a fresh process, `--runs` times (issue 17 item 1):

* `gputwin --help` - start-up alone: the interpreter, the CLI's imports, click's help text.
* `gputwin simulate` of a 100-job trace (the first 100 jobs of the bundled demo trace on the
  bundled demo cluster) - start-up plus a run too small to matter: what simulate imports.
* `gputwin simulate` of the Philly-shaped trace (../shared/traces/philly_mix1: jobs.csv and
  cluster.csv, 30,756 jobs) - start-up, reading the trace and the simulation.

Each row gives the median, min and max wall seconds of the whole process (fork to exit), and the
load average is printed before and after: on a shared machine the figures move with it.
`--peer-python PYTHON` times the same commands with another install (the `gputwin` beside that
interpreter: a venv of an earlier commit, or the compiled wheel) in the same run, alternating
run by run, and prints both side by side. `--instructions` also counts the instructions of
every command once with callgrind (valgrind), a figure the load does not move (mix1: ~1 min).
The issue's targets (`--help` <= 0.15 s; compiled simulate of mix1 <= 0.6 s) are printed beside
the medians. With `--json` the table goes to stderr and stdout's last line is one JSON object.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import re
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
# Issue 17's targets, whole process: name -> (seconds, whether it is stated for the compiled core only).
TARGETS = {"--help": (0.15, False), "simulate mix1": (0.6, True)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="benchmarks/startup.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="runs of each command (default 5)")
    parser.add_argument("--trace-dir", type=Path, default=DEFAULT_TRACE_DIR,
                        help="folder with jobs.csv and cluster.csv (default ../shared/traces/philly_mix1)")
    parser.add_argument("--skip-mix1", action="store_true", help="only --help and the 100-job simulate")
    parser.add_argument("--peer-python", type=Path,
                        help="also time the gputwin installed beside this interpreter (e.g. an earlier commit's venv)")
    parser.add_argument("--peer-label", default="peer", help="the peer's column name (default: peer)")
    parser.add_argument("--instructions", action="store_true",
                        help="also count each command's instructions once with callgrind")
    parser.add_argument("--json", action="store_true", help="table to stderr; one JSON object as the last line")
    args = parser.parse_args(argv)
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    return args


def gputwin_command(python: Path | None = None) -> list[str]:
    """The `gputwin` script installed beside `python` (default: this interpreter), else `python -m gputwin`."""
    interpreter = Path(python) if python is not None else Path(sys.executable)
    script = interpreter.parent / "gputwin"
    if script.exists():
        return [str(script)]
    found = shutil.which("gputwin") if python is None else None
    return [found] if found else [str(interpreter), "-m", "gputwin"]


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


def compiled(command: list[str]) -> bool:
    """Whether that install's core is the mypyc build (`gputwin --version` names it)."""
    out = subprocess.run(command + ["--version"], capture_output=True, text=True, check=True).stdout
    return "compiled core" in out


def instructions(command: list[str]) -> int | None:
    """Instructions the whole process runs (callgrind's `Collected :`), None without valgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return None
    proc = subprocess.run([valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", *command],
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)  # fmt: skip
    found = re.search(r"Collected : (\d+)", proc.stderr)
    return int(found.group(1)) if proc.returncode == 0 and found else None


def summary(times: list[float]) -> dict[str, float]:
    return {"median_s": round(statistics.median(times), 3), "min_s": round(min(times), 3),
            "max_s": round(max(times), 3)}  # fmt: skip


def measure(installs: dict[str, list[str]], chosen: dict[str, list[str]], args: argparse.Namespace
            ) -> dict[str, dict[str, dict[str, Any]]]:  # fmt: skip
    """install -> command name -> figures; the installs alternate run by run, so a load change hits both."""
    times: dict[str, dict[str, list[float]]] = {i: {n: [] for n in chosen} for i in installs}
    for name, extra in chosen.items():
        for _ in range(args.runs):
            for install, command in installs.items():
                times[install][name].append(time_once(command + extra))
    results: dict[str, dict[str, dict[str, Any]]] = {i: {n: summary(t) for n, t in rows.items()}
                                                     for i, rows in times.items()}  # fmt: skip
    if args.instructions:
        for install, command in installs.items():
            for name in chosen:
                results[install][name]["instructions"] = instructions(command + chosen[name])
    return results


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    out = sys.stderr if args.json else sys.stdout
    installs = {"this": gputwin_command()}
    if args.peer_python is not None:
        installs[args.peer_label] = gputwin_command(args.peer_python)
    builds = {name: compiled(command) for name, command in installs.items()}
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="gputwin-startup-") as tmp:
        results = measure(installs, cases(Path(tmp), args), args)
    load_after = os.getloadavg()
    print_table(out, args, installs, builds, results)
    print(f"load average before {_load(load_before)}, after {_load(load_after)}", file=out)
    if args.json:
        record: dict[str, Any] = {
            "runs": args.runs, "compiled": builds["this"], "commands": results["this"],
            "installs": {name: {"command": " ".join(installs[name]), "compiled": builds[name],
                                "commands": results[name]} for name in installs},
            "targets_s": {name: seconds for name, (seconds, _) in TARGETS.items()},
            "load_before": list(load_before), "load_after": list(load_after),
        }  # fmt: skip
        print(json.dumps(record, sort_keys=True))


def print_table(out: Any, args: argparse.Namespace, installs: dict[str, list[str]], builds: dict[str, bool],
                results: dict[str, dict[str, dict[str, Any]]]) -> None:  # fmt: skip
    """One row per command: each install's median (min-max) seconds side by side, then the target."""
    print(f"gputwin start-up, whole process, {args.runs} runs each, median (min-max) seconds", file=out)
    for name, command in installs.items():
        print(f"  {name}: {'compiled' if builds[name] else 'pure Python'} core, {' '.join(command)}", file=out)
    header = "".join(f" {name:>24}" for name in installs)
    print(f"{'command':<20}{header}  target", file=out)
    for command_name in results["this"]:
        cells = "".join(f" {_cell(results[name][command_name]):>24}" for name in installs)
        print(f"{command_name:<20}{cells}  {_target(command_name)}", file=out)
    if args.instructions:
        for command_name in results["this"]:
            cells = "".join(f" {_instr(results[name][command_name].get('instructions')):>24}" for name in installs)
            print(f"{command_name + ' instr':<20}{cells}", file=out)


def _cell(row: dict[str, Any]) -> str:
    return f"{row['median_s']:.3f} ({row['min_s']:.3f}-{row['max_s']:.3f})"


def _instr(count: int | None) -> str:
    return "n/a" if count is None else f"{count / 1e6:,.0f} M"


def _target(name: str) -> str:
    if name not in TARGETS:
        return ""
    seconds, compiled_only = TARGETS[name]
    return f"<= {seconds} s{' (compiled)' if compiled_only else ''}"


def _load(load: tuple[float, float, float]) -> str:
    return " ".join(f"{x:.2f}" for x in load)


if __name__ == "__main__":
    main()
