"""Helios/Philly-style job CSV: read it, and write jobs back out in the same shape.

Required columns: `job_id,user,vc,gpu_num,submit_time,duration`; optional `jobname,state,node_num`
and `gpu_milli` (others such as `cpu_num,start_time,end_time,queue` are accepted and ignored). Decisions:

- `vc` is the partition (`task_type`), read as a string: `6214e9` must not become 6214000000.0.
- `submit_time` in plain seconds (integer or float) is trace-relative: values are kept as they are
  and the origin is 0.0 (the Philly trace starts at 0; re-basing it would shift every result).
- `submit_time` as `YYYY-MM-DD HH:MM:SS` (the Helios traces) is wall-clock UTC; `read_trace`
  re-bases it to the earliest kept job. One file may not mix the two.
- `gpu_num == 0` rows are skipped and counted under "zero GPUs"; an empty `state` is COMPLETED.
- `gpu_milli` (gputwin's own column, written only when a job asks for a GPU share): 1-999 is that
  share of one GPU (`gpu_num` must then be 1); 1000 or empty, whole GPUs.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Iterator
from typing import TextIO

from gputwin.api.names import MAX_NODES
from gputwin.core.model import JobSpec

from .errors import FieldError
from .fields import (
    MAX_DURATION,
    MAX_GPUS,
    MAX_NUMBER_CHARS,
    MAX_SECONDS,
    parse_count,
    parse_name,
    parse_seconds,
    parse_trace_time,
)
from .table import Converter, ReadContext, Row, Table, convert_rows, open_text

REQUIRED = ("job_id", "user", "vc", "gpu_num", "submit_time", "duration")
HEADER = ("job_id", "user", "vc", "jobname", "gpu_num", "state", "submit_time", "duration")
ZERO_GPUS = "zero GPUs"


def read_helios(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the jobs of a Helios CSV in file order, submit times on the file's own clock."""
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, ",")
        table.require(*REQUIRED)
        yield from convert_rows(ctx, table, _converter(ctx, table))


def _converter(ctx: ReadContext, table: Table) -> Converter:
    """`_checked_converter`'s jobs, faster for the rows nearly every trace is made of.

    A row whose GPUs, submit time and duration are plain ASCII digits within their bounds, on a
    file already seen to be in plain seconds, with a job id and vc and no `node_num`/`gpu_milli`,
    is built here in one step (the field parsers' calls and regexes are most of a 30k-job read);
    any other row goes to `_checked_converter`, which accepts it or names what is wrong with it.
    Both give the same job for the rows the fast path takes (tests/adapters: a property test).
    """
    checked = _checked_converter(ctx, table)
    col = table.columns
    job_id, user, vc, gpus, submit, duration = (col[name] for name in REQUIRED)
    name_at, state_at = col.get("jobname"), col.get("state")
    extra = tuple(col[name] for name in ("node_num", "gpu_milli") if name in col)
    clock, longest = ctx.clock, MAX_NUMBER_CHARS

    def convert(row: Row, seq: int) -> JobSpec | str:
        g, s, d = row[gpus], row[submit], row[duration]
        jid, part = row[job_id].strip(), row[vc].strip()
        if not (
            clock.epoch is False and jid and part
            and g.isdigit() and g.isascii() and len(g) <= longest
            and s.isdigit() and s.isascii() and len(s) <= longest
            and d.isdigit() and d.isascii() and len(d) <= longest
        ) or any(row[i].strip() for i in extra):  # fmt: skip
            return checked(row, seq)
        gpu_num, submitted, run = int(g), float(int(s)), float(int(d))
        if not 0 < gpu_num <= MAX_GPUS or submitted > MAX_SECONDS or run > MAX_DURATION:
            return checked(row, seq)
        # Positional, in JobSpec's field order (job_id, submit, duration, gpus, task_type, user, name,
        # state, priority, num_nodes, seq): keywords cost a sixth of the call; the property test
        # compares every field with the checked path's keyword-built job.
        return JobSpec(
            jid, submitted, run, gpu_num, part, row[user].strip(), "" if name_at is None else row[name_at].strip(),
            ("" if state_at is None else row[state_at].strip()) or "COMPLETED", 0, 0, seq,
        )  # fmt: skip

    return convert


def _checked_converter(ctx: ReadContext, table: Table) -> Converter:
    """Any row to its job or skip reason, each field through its parser (which names what is wrong)."""
    col = table.columns
    job_id, user, vc, gpus, submit, duration = (col[name] for name in REQUIRED)

    def convert(row: Row, seq: int) -> JobSpec | str:
        gpu_num = parse_count(row[gpus], "gpu_num", MAX_GPUS)
        if gpu_num == 0:
            return ZERO_GPUS
        submitted, is_date = parse_trace_time(row[submit], "submit_time")
        ctx.clock.observe(is_date, "submit_time")
        node_num = table.get(row, "node_num").strip()
        milli = _milli(table.get(row, "gpu_milli").strip(), gpu_num)
        return JobSpec(
            job_id=parse_name(row[job_id], "job_id"),
            submit=submitted,
            duration=parse_seconds(row[duration], "duration", MAX_DURATION),
            gpus=gpu_num,
            task_type=parse_name(row[vc], "vc"),
            user=row[user].strip(),
            name=table.get(row, "jobname").strip(),
            state=table.get(row, "state").strip() or "COMPLETED",
            num_nodes=parse_count(node_num, "node_num", MAX_NODES) if node_num else 0,
            seq=seq,
            gpu_milli=milli,
        )

    return convert


def _milli(text: str, gpu_num: int) -> int:
    if not text:
        return 1000
    milli = parse_count(text, "gpu_milli", 1000)
    if milli == 0:
        raise FieldError("gpu_milli", "0: a job asks for 1-999 thousandths of one GPU, or 1000 (whole GPUs)")
    if milli < 1000 and gpu_num != 1:
        raise FieldError("gpu_milli", f"a share of one GPU ({milli}/1000) with gpu_num {gpu_num}: a share needs gpu_num 1")
    return milli


def write_helios_csv(jobs: Iterable[JobSpec], out: TextIO, *, nodes: bool = False, milli: bool = False) -> None:
    """Write jobs as a Helios CSV that `read_helios` reads back to the same jobs.

    Whole-second times are written as integers so an integer trace stays an integer trace;
    other floats use repr(), which round-trips exactly. `nodes` adds a `node_num` column,
    `milli` a `gpu_milli` one (GPU shares).
    """
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(HEADER + (("node_num",) if nodes else ()) + (("gpu_milli",) if milli else ()))
    for job in jobs:
        row = (job.job_id, job.user, job.task_type, job.name, job.gpus, job.state,
               _seconds(job.submit), _seconds(job.duration))  # fmt: skip
        writer.writerow(row + ((job.num_nodes,) if nodes else ()) + ((job.gpu_milli,) if milli else ()))


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))
