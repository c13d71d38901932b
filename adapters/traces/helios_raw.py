"""Helios' raw job logs: the `cluster_log.csv` of each cluster in github.com/S-Lab-System-Group/HeliosData.

Header (Venus, Earth, Saturn, Uranus): `job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,
start_time,end_time,duration,queue`, times `YYYY-MM-DD HH:MM:SS`; the Philly log of the same study
(HeliosArtifact's `philly_trace.csv`) has `jobname` instead of `job_id` and Philly's states.
`--format helios` stays the *processed* CSV the simulator reads; this reader maps the raw log as the
SC'21 paper and its artifact (`framework/QSSF Service/utils.py`) do:

- GPU jobs only: `gpu_num == 0` (CPU jobs, half the log) is skipped, "zero GPUs".
- state: COMPLETED, CANCELLED and FAILED as they are; TIMEOUT and NODE_FAIL become FAILED (the
  dataset README: "regarded as failed in our analysis"); SUSPENDED (one job in Uranus, which the
  paper ignores) is skipped, "suspended"; Philly's Pass / Killed / Failed become COMPLETED /
  CANCELLED / FAILED (as the artifact replaces them); `CANCELLED by N` (sacct's form) is
  CANCELLED. Any other state is an error naming it.
- run = `duration` (end_time - start_time, seconds); empty, then `end_time - start_time`; neither
  (a job cancelled while it waited): skipped, "never started". `queue` (wait) is not read: the
  simulator makes its own.
- submit = `submit_time`, wall-clock read as UTC (re-based by `read_trace`) or plain seconds;
  task_type = `vc`; user = `user`; job_id = `job_id`, else `jobname`; num_nodes = `node_num`.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputwin.api.names import MAX_NODES
from gputwin.core.model import JobSpec

from .errors import FieldError
from .fields import (
    MAX_DURATION,
    MAX_GPUS,
    check_seconds,
    parse_count,
    parse_name,
    parse_seconds,
    parse_trace_time,
)
from .table import Converter, ReadContext, Row, Table, convert_rows, open_text

REQUIRED = ("user", "vc", "gpu_num", "state", "submit_time")
ZERO_GPUS = "zero GPUs"
SUSPENDED = "suspended"
NEVER_STARTED = "never started"
STATES = {
    "COMPLETED": "COMPLETED", "CANCELLED": "CANCELLED", "FAILED": "FAILED", "TIMEOUT": "FAILED",
    "NODE_FAIL": "FAILED", "Pass": "COMPLETED", "Killed": "CANCELLED", "Failed": "FAILED",
}  # fmt: skip


def read_helios_raw(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the GPU jobs of a Helios `cluster_log.csv` in file order."""
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, ",")
        table.require(*REQUIRED)
        table.require("job_id" if "jobname" not in table.columns else "jobname")
        if "duration" not in table.columns:
            table.require("start_time", "end_time")
        yield from convert_rows(ctx, table, _converter(ctx, table))


def _converter(ctx: ReadContext, table: Table) -> Converter:
    col = table.columns
    user, vc, gpus, state, submit = (col[name] for name in REQUIRED)
    id_field = "job_id" if "job_id" in col else "jobname"

    def convert(row: Row, seq: int) -> JobSpec | str:
        gpu_num = parse_count(row[gpus], "gpu_num", MAX_GPUS)
        if gpu_num == 0:
            return ZERO_GPUS
        mapped = _state(row[state])
        if mapped is None:
            return SUSPENDED
        submitted, is_date = parse_trace_time(row[submit], "submit_time")
        ctx.clock.observe(is_date, "submit_time")
        run = _run(table, row)
        if run is None:
            return NEVER_STARTED
        node_num = table.get(row, "node_num").strip()
        return JobSpec(
            job_id=parse_name(row[col[id_field]], id_field),
            submit=submitted,
            duration=run,
            gpus=gpu_num,
            task_type=parse_name(row[vc], "vc"),
            user=row[user].strip(),
            name=table.get(row, "jobname").strip(),
            state=mapped,
            num_nodes=parse_count(node_num, "node_num", MAX_NODES) if node_num else 0,
            seq=seq,
        )

    return convert


def _state(text: str) -> str | None:
    """The gputwin state of a raw state; None for SUSPENDED (skipped)."""
    value = text.strip()
    if value == "SUSPENDED":
        return None
    if value.startswith("CANCELLED by "):
        return "CANCELLED"
    mapped = STATES.get(value)
    if mapped is None:
        shown = value if len(value) <= 40 else value[:40] + "..."
        raise FieldError("state", f"unknown state {shown!r} (want {', '.join(STATES)} or SUSPENDED)")
    return mapped


def _run(table: Table, row: Row) -> float | None:
    duration = table.get(row, "duration").strip()
    if duration:
        return parse_seconds(duration, "duration", MAX_DURATION)
    start, end = table.get(row, "start_time").strip(), table.get(row, "end_time").strip()
    if not start or not end:
        return None
    began, _ = parse_trace_time(start, "start_time")
    ended, _ = parse_trace_time(end, "end_time")
    if ended < began:
        raise FieldError("end_time", "before start_time")
    return check_seconds(ended - began, "end_time", MAX_DURATION)
