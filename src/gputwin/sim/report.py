"""Writing a simulation's results: the per-job CSV log and the JSON summary, both or neither.

`write_outputs` writes them into a new folder swapped in whole (`gputwin.sim.atomic`): a failure
leaves the previous DIR as it was.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any, Iterable, TextIO

import hostlist

from gputwin.core.topology import Topology
from gputwin.sim.atomic import SIMULATE, atomic_folder
from gputwin.sim.finished import FinishedJob

JOB_LOG_COLUMNS = (
    "job_id", "partition", "user", "name", "task_type", "gpus_requested", "gpus", "submit", "start",
    "end", "jct", "queue", "preemptions", "nodes", "nodelist", "leaves", "tiers", "overhead",
)  # fmt: skip


def write_job_log(jobs: Iterable[FinishedJob], topology: Topology, out: TextIO) -> None:
    """One row per finished job, in completion order. `nodes` is the last run's node count."""
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(JOB_LOG_COLUMNS)
    for job in jobs:
        spec = job.spec
        end = job.end
        writer.writerow((
            spec.job_id, job.partition, spec.user, spec.name, spec.task_type, spec.gpus, job.gpus,
            _num(spec.submit), _num(job.first_start or 0.0), _num(end), _num(end - spec.submit),
            _num(job.wait), job.preemptions, len(job.slots), _nodelist(job, topology), job.leaves, job.tiers, round(job.overhead, 5),
        ))  # fmt: skip


def _nodelist(job: FinishedJob, topology: Topology) -> str:
    """The last run's nodes in SLURM hostlist syntax, like sacct's NodeList."""
    return str(hostlist.collect_hostlist([topology.node_names[n] for n, _ in job.slots]))


def _num(value: float) -> int | float:
    return int(value) if float(value).is_integer() else round(value, 3)


def write_summary(path: Path, summary: dict[str, Any]) -> None:
    path.write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")


def write_outputs(out_dir: Path, summary: dict[str, Any], jobs: Iterable[FinishedJob], topology: Topology) -> None:
    """DIR/jobs.csv and DIR/summary.json, swapped in together (OutputError if DIR cannot take them)."""
    with atomic_folder(out_dir, SIMULATE) as new:
        with open(new / "jobs.csv", "w", newline="") as fh:
            write_job_log(jobs, topology, fh)
        write_summary(new / "summary.json", summary)
