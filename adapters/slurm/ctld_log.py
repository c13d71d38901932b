"""Job event times with millisecond precision, from slurmctld's own log.

sacct stamps Submit/Start/End in whole seconds, and slurmctld starts jobs on scheduler passes
that fall at a similar phase of each second, so the truncation errors of Start do not average
out: sub-second costs (launch overhead, scheduling latency) cannot be measured from sacct. The
controller's log has them to the millisecond (``LogTimeFormat=iso8601_ms``, the default):

    [2026-11-29T12:16:57.976] _slurm_rpc_submit_batch_job: JobId=44 InitPrio=1 usec=399
    [2026-11-29T12:16:58.066] sched: Allocate JobId=44 NodeList=gpu01 #CPUs=1 Partition=bench
    [2026-11-29T12:17:01.380] sched/backfill: _start_job: Started JobId=45 in bench on gpu02
    [2026-11-29T12:17:04.170] _job_complete: JobId=44 done

`job_events(path, job_ids)` returns (submit, first start, last end) per job, epoch seconds on the
host's clock (the log has no zone; slurmctld logs local time, read here as local time).
The messages are those of SLURM 22.05; other releases may word them differently, so a caller
treats a job without all three as "not in the log" and falls back to sacct.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

_LINE = re.compile(r"^\[(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3})\] (.*)$")
_SUBMIT = re.compile(r"_slurm_rpc_submit_batch_job: JobId=(\d+) ")
_START = re.compile(r"(?:sched: Allocate|sched/backfill: _start_job: Started) JobId=(\d+) ")
_END = re.compile(r"_job_complete: JobId=(\d+) done$")


@dataclass(frozen=True, slots=True)
class JobEvents:
    """When slurmctld accepted, first started and last completed one job (epoch seconds)."""

    submit: float
    start: float
    end: float


def job_events(path: Path, job_ids: Iterable[str]) -> dict[str, JobEvents]:
    """Events of the given jobs found in the log; jobs lacking any of the three are left out."""
    wanted = set(job_ids)
    submit: dict[str, float] = {}
    start: dict[str, float] = {}
    end: dict[str, float] = {}
    with open(path, encoding="utf-8", errors="replace") as log:
        for line in log:
            match = _LINE.match(line.rstrip("\n"))
            if match is None or "JobId=" not in match.group(2):
                continue
            message = match.group(2)
            for pattern, into, keep_first in (
                (_SUBMIT, submit, False),
                (_START, start, True),
                (_END, end, False),
            ):
                found = pattern.search(message)
                if found and found.group(1) in wanted:
                    when = datetime.fromisoformat(match.group(1)).timestamp()
                    if not (keep_first and found.group(1) in into):
                        into[found.group(1)] = when  # a requeued job: first start, last end
                    break
    return {job: JobEvents(submit[job], start[job], end[job]) for job in wanted
            if job in submit and job in start and job in end}  # fmt: skip
