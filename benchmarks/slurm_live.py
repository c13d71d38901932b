"""The live SLURM test cluster as the SLURM benchmarks use it: start or reuse one, submit, wait, time.

Shared by `sim_to_real.py`, `forecast_accuracy.py` and `slurm_io.py` (benchmarks/ is no package:
they import it as a sibling module). A cluster is a state folder made by scripts/slurm/start.sh;
its `env.sh` gives the client environment. Job times come from slurmctld's log to the millisecond
when it has every job, else from sacct's whole seconds (see docs/slurm-test-cluster.md).
"""

from __future__ import annotations

import bisect
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from gputwin.adapters.slurm.apply import live_config, reconfigure, write_atomic
from gputwin.adapters.slurm.checks import ENDED_STATES
from gputwin.adapters.slurm.commands import run_command
from gputwin.adapters.slurm.ctld_log import job_events
from gputwin.adapters.slurm.render import MANAGED_FILES

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "scripts" / "slurm"
TASK = "bench"  # the benchmark jobs' task type (`--comment=task:bench`), the partition's job type


@dataclass(frozen=True, slots=True)
class Timing:
    """Submit, start and end of one job (epoch seconds for real runs, virtual for the simulator)."""

    submit: float
    start: float
    end: float


@contextmanager
def cluster_state(given: Path | None) -> Iterator[Path]:
    """A running cluster's state folder: the given one, or one started here and stopped after."""
    if given is not None:
        yield given
        return
    state = Path(tempfile.mkdtemp(prefix="gputwin-sim2real-", dir="/tmp"))
    state.chmod(0o755)  # munged and mariadbd run as other users
    try:
        run_script("start.sh", "--state", str(state), "--nodes", "8", "--gpus", "8", "--leaves", "2")
        yield state
    finally:
        run_script("stop.sh", "--state", str(state))
        shutil.rmtree(state, ignore_errors=True)


def run_script(name: str, *args: str) -> None:
    done = subprocess.run(["bash", str(SCRIPTS / name), *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"error: scripts/slurm/{name} failed: {done.stderr.strip()[-600:]}")


def read_env(state: Path) -> dict[str, str]:
    env_file = state / "env.sh"
    if not env_file.is_file():
        print(
            f"error: {state}: no env.sh (start a cluster there with scripts/slurm/start.sh)", file=sys.stderr
        )
        raise SystemExit(2)
    pairs = re.findall(r"^export ([A-Z_]+)=(.*)$", env_file.read_text(), re.MULTILINE)
    return dict(pairs)


@contextmanager
def managed_files_kept(conf_dir: Path) -> Iterator[None]:
    """Put the cluster's managed files back afterwards (a given cluster is someone else's)."""
    saved = {name: (conf_dir / name).read_bytes() for name in MANAGED_FILES if (conf_dir / name).exists()}
    try:
        yield
    finally:
        for name, data in saved.items():
            write_atomic(conf_dir / name, data)
        reconfigure()


def wait_finished(job_ids: Sequence[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = run_command(["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State"])
        states = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
        if len(states) == len(job_ids) and all(s.split()[0] in ENDED_STATES for s in states.values()):
            return
        time.sleep(1.0)
    run_command(["scancel", *job_ids])
    raise SystemExit(f"error: jobs not finished within {timeout:.0f} s; cancelled")


def read_timings(job_ids: Sequence[str]) -> tuple[dict[str, Timing], int]:
    """Submit/Start/End per job from sacct (UTC, whole seconds), and how many runs were preempted."""
    out = run_command(["sacct", "-n", "-P", "-X", "-D", "-j", ",".join(job_ids),
                       "-o", "JobID,State,Submit,Start,End"])  # fmt: skip
    timings: dict[str, Timing] = {}
    preempted = 0
    for line in out.splitlines():
        job_id, state, submit, start, end = line.split("|")
        if state.split()[0] in ("PREEMPTED", "REQUEUED"):
            preempted += 1
            continue
        if "None" in (start, end) or "Unknown" in (start, end):
            continue  # cancelled before it ran (by someone else on a shared cluster): nothing to time
        timings[job_id] = Timing(epoch(submit), epoch(start), epoch(end))
    return timings, preempted


def epoch(stamp: str) -> float:
    return datetime.fromisoformat(stamp).replace(tzinfo=UTC).timestamp()  # TZ=UTC (run_command)


def precise_timings(job_ids: Sequence[str]) -> dict[str, Timing] | None:
    """The same times to the millisecond from slurmctld's log, or None when it lacks any job."""
    path = Path(live_config().get("SlurmctldLogFile", ""))
    if not path.is_file():
        return None
    events = job_events(path, job_ids)
    if len(events) != len(job_ids):
        return None
    return {job: Timing(e.submit, e.start, e.end) for job, e in events.items()}


def best_timings(job_ids: Sequence[str]) -> tuple[dict[str, Timing], dict[str, Timing], int, str]:
    """(times used, sacct's times, preempted runs, source): the log's when complete, else sacct's."""
    sacct, preempted = read_timings(job_ids)
    precise = precise_timings(job_ids)
    if precise is None:
        return sacct, sacct, preempted, "sacct (whole seconds)"
    return precise, sacct, preempted, "slurmctld.log (ms)"


def calibrate_room_latency(nodes: int, options: Sequence[str] = (f"--comment=task:{TASK}",),
                           seconds: int = 5) -> tuple[float, int]:  # fmt: skip
    """SLURM's start latency after a job's end made room: (mean seconds, jobs measured).

    Two waves of whole-node (`gpu:8`) `sleep 5` jobs on `nodes` idle nodes: the first fills
    them, each job of the second waits for one; its latency is its start minus the end of the job
    that ran on its node before it (nodes from sacct, times as `best_timings`). Only jobs submitted
    before that end count: one submitted later (sbatch is slow on a loaded machine) did not wait
    for room, and its gap is its submission's delay. The median of the gaps, so one slow pass does
    not move it. This is the delay a twin adds after the instant room appears
    (`Snapshot.start_latency_s`); `calibrate_startup`'s latency is the same for a submission onto
    free GPUs. Measured, never fitted.
    """
    ids = [sbatch([*options, "--gres=gpu:8", f"--job-name=room{i}", "--wrap", f"sleep {seconds}"])
           for i in range(2 * nodes)]  # fmt: skip
    wait_finished(ids, timeout=120 + 8 * seconds)
    timings, _, _, _ = best_timings(ids)
    out = run_command(["sacct", "-n", "-P", "-X", "-j", ",".join(ids), "-o", "JobID,NodeList"])
    where = dict(line.split("|", 1) for line in out.splitlines() if "|" in line)
    gaps = []
    for node in set(where.values()):
        runs = sorted((timings[j] for j in ids if where.get(j) == node and j in timings), key=lambda t: t.start)
        gaps += [later.start - earlier.end for earlier, later in zip(runs, runs[1:]) if later.submit < earlier.end]
    return (max(0.0, statistics.median(gaps)) if gaps else 0.0), len(gaps)


def start_after_end(timings: Mapping[str, Timing]) -> dict[str, float | int | None]:
    """How soon SLURM started jobs that waited for room: per such job, its start minus the latest
    end (of any job of the run) before it; p50, p90 and how many took over 0.1 s.

    A job waited when it was submitted before that end. ~0.02 s is slurmctld scheduling on the
    end itself (on slurmd's MESSAGE_EPILOG_COMPLETE); up to ~1 s is a start on a later pass: its
    ~1 s background loop or a backfill cycle (a job behind a blocked one, or an end slurmd answered
    with ESLURMD_KILL_JOB_ALREADY_COMPLETE, which only queues a pass; docs/slurm-test-cluster.md).
    """
    ends = sorted(t.end for t in timings.values())
    gaps = []
    for t in timings.values():
        last = bisect.bisect_right(ends, t.start)
        if last and t.submit < ends[last - 1]:
            gaps.append(t.start - ends[last - 1])
    if not gaps:
        return {"start_after_end_jobs": 0, "start_after_end_p50_s": None, "start_after_end_p90_s": None,
                "start_after_end_over_0_1_s": 0}  # fmt: skip
    gaps.sort()
    return {"start_after_end_jobs": len(gaps), "start_after_end_p50_s": round(statistics.median(gaps), 3),
            "start_after_end_p90_s": round(gaps[min(len(gaps) - 1, int(0.9 * len(gaps)))], 3),
            "start_after_end_over_0_1_s": sum(g > 0.1 for g in gaps)}  # fmt: skip


def sbatch(args: Sequence[str]) -> str:
    out = run_command(["sbatch", "--parsable", "--output=/dev/null", "--chdir=/tmp", *args])
    return out.strip().split(";")[0]
