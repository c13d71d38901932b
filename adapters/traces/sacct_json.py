"""`sacct --json` output: SLURM 22.05 (data_parser v0.0.38) and 24.11 (v0.0.41/v0.0.42) layouts.

The document is loaded whole (`json.loads`, at most `MAX_JSON_CHARS` characters; nesting too
deep for the parser, or integers of thousands of digits, are one TraceError); jobs are then
converted one by one in file order. Numbers are bounded as in fields.py (times `MAX_SECONDS`,
durations `MAX_DURATION`, GPUs `MAX_GPUS`, nodes `MAX_NODES`); text fields may not hold NULs.
Errors name the JSON path (`jobs[3].time.start`) since there is no useful line number. The two
layouts differ in small ways this reader absorbs:

- a number may be a plain int (22.05) or a "no_val" object `{"set", "infinite", "number"}`
  (24.11; unset or infinite reads as absent);
- `state.current` is a string (22.05) or a list of strings (24.11; the first is the state).

Decisions mirror the `sacct -P` reader: times are epoch seconds (`time.submission/start/end`),
re-based by `read_trace`; start 0/absent -> "never started", end 0/absent -> "still running",
no GPUs -> "zero GPUs" (skipped and counted). GPUs come from `tres.allocated` (else
`tres.requested`): the untyped `gres`/`gpu` entry, else the sum of `gpu:TYPE` entries; without
either, a `gres`/`shard` entry (SLURM GRES sharding, `{"type": "gres", "name": "shard", "count": N}`)
is a share of one GPU as the `-P` reader reads `gres/shard=N` (`sacct_columns.share`). Steps live
inside their job and are ignored. Array tasks read as `ARRAY_TASK`, pending remainders as
`ARRAY_[TASKS]`, het components as `HET+OFFSET`. A job id printed twice (`sacct -D`) keeps its
last record; earlier ones count as "requeued duplicates". task_type = partition or "default".
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence

from gputwin.api.names import MAX_NODES, MAX_SHARDS_PER_GPU
from gputwin.core.model import JobSpec

from .errors import FieldError, TraceError
from .fields import MAX_DURATION, MAX_GPUS, MAX_SECONDS, check_seconds
from .sacct_columns import share
from .table import ReadContext, keep_jobs, open_text

# The largest document read: 512 Mi characters (a 24.11 dump of ~50k jobs; Python objects of a
# document take about ten times its size). Split bigger dumps, or use `sacct -P`.
MAX_JSON_CHARS = 1 << 29
MAX_JOB_ID = 2**63  # SLURM's ids are 32-bit; anything wider is not an id

NEVER_STARTED = "never started"
STILL_RUNNING = "still running"
ZERO_GPUS = "zero GPUs"
REQUEUED = "requeued duplicates"

Json = Mapping[str, object]


def read_sacct_json(ctx: ReadContext) -> Iterator[JobSpec]:
    """The jobs of a `sacct --json` document in file order (epoch-second submit times)."""
    ctx.clock.observe(True, "jobs")
    records = _records(ctx)
    remaining = Counter(_job_id_or_none(job) for job in records)
    yield from keep_jobs(
        ctx, enumerate(records), lambda item, seq: _convert(item[1], seq, remaining, ctx),
        lambda item, exc: TraceError(ctx.name, None, f"jobs[{item[0]}].{exc.field}", exc.reason),
    )  # fmt: skip


def _records(ctx: ReadContext) -> list[Json]:
    """The `jobs` list of the document (a bare list of jobs is accepted too)."""
    text = _read_capped(ctx)
    try:
        document: object = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(ctx.name, exc.lineno, "json", exc.msg) from None
    except RecursionError:
        raise TraceError(ctx.name, None, "json", "nested too deep") from None
    except ValueError as exc:  # an integer beyond int()'s digit limit
        raise TraceError(ctx.name, None, "json", f"unreadable number ({str(exc).split(';')[0]})") from None
    del text
    jobs = document.get("jobs") if isinstance(document, Mapping) else document
    if not isinstance(jobs, list):
        raise TraceError(ctx.name, None, "jobs", "missing: want an object with a 'jobs' list")
    if not jobs:
        raise TraceError(ctx.name, None, "jobs", "no jobs in the file")
    for index, job in enumerate(jobs):
        if not isinstance(job, Mapping):
            raise TraceError(ctx.name, None, f"jobs[{index}]", f"not an object: {_brief(job)}")
    return jobs


def _read_capped(ctx: ReadContext) -> str:
    """The whole document, read in chunks (read(n) would allocate n up front), at most MAX_JSON_CHARS."""
    parts, size = [], 0
    with open_text(ctx) as stream:
        while chunk := stream.read(1 << 20):
            size += len(chunk)
            if size > MAX_JSON_CHARS:
                raise TraceError(ctx.name, None, "file", f"larger than {MAX_JSON_CHARS:,} characters")
            parts.append(chunk)
    return "".join(parts)


def _convert(job: Json, seq: int, remaining: Counter[str | None], ctx: ReadContext) -> JobSpec | str:
    job_id = _job_id(job)
    remaining[job_id] -= 1
    if remaining[job_id] > 0:
        return REQUEUED  # a later record of this job is the one that ran to the end
    times = _object(job, "time")
    start = _number(times.get("start"), "time.start", MAX_SECONDS)
    if not start:
        return NEVER_STARTED
    end = _number(times.get("end"), "time.end", MAX_SECONDS)
    if not end:
        return STILL_RUNNING
    if end < start:
        raise FieldError("time.end", f"negative duration: end is {start - end} s before start")
    check_seconds(end - start, "time.end", MAX_DURATION)
    submit = _number(times.get("submission"), "time.submission", MAX_SECONDS)
    if submit is None:
        raise FieldError("time.submission", "missing")
    gpus, milli = share(*_gpus(_object(job, "tres")), ctx.shards_per_gpu, ctx.skipped)
    if gpus == 0:
        return ZERO_GPUS
    return JobSpec(
        job_id=job_id,
        submit=float(submit),
        duration=float(end - start),
        gpus=gpus,
        task_type=_text(job, "partition") or "default",
        user=_text(job, "user"),
        name=_text(job, "name"),
        state=_state(job),
        num_nodes=_number(job.get("allocation_nodes"), "allocation_nodes", MAX_NODES) or 0,
        seq=seq,
        gpu_milli=milli,
    )


def _job_id(job: Json) -> str:
    """The id sacct prints: `123`, `123_4` (array task), `123_[5-9]` (pending tasks), `123+0`."""
    job_id = _number(job.get("job_id"), "job_id", MAX_JOB_ID)
    if job_id is None:
        raise FieldError("job_id", "missing")
    array, het = _object(job, "array"), _object(job, "het")
    array_id = _number(array.get("job_id"), "array.job_id", MAX_JOB_ID)
    if array_id:
        task = _number(array.get("task_id"), "array.task_id", MAX_JOB_ID)
        if task is not None:
            return f"{array_id}_{task}"
        tasks = array.get("task")
        if isinstance(tasks, str) and tasks:
            return f"{array_id}_[{_clean(tasks, 'array.task')}]"
    het_id = _number(het.get("job_id"), "het.job_id", MAX_JOB_ID)
    offset = _number(het.get("job_offset"), "het.job_offset", MAX_JOB_ID)
    if het_id and offset is not None:
        return f"{het_id}+{offset}"
    return str(job_id)


def _job_id_or_none(job: Json) -> str | None:
    # Counting pass: a bad id is reported (with its path) when the job itself is converted.
    try:
        return _job_id(job)
    except FieldError:
        return None


def _gpus(tres: Json) -> tuple[int, int]:
    """(GPUs, shards) from allocated TRES, or requested TRES when nothing was allocated."""
    for which in ("allocated", "requested"):
        entries = tres.get(which)
        if entries is None or entries == []:
            continue
        if not isinstance(entries, list):
            raise FieldError(f"tres.{which}", f"not a list: {_brief(entries)}")
        return _gpu_total(entries, f"tres.{which}")
    return 0, 0


def _gpu_total(entries: Sequence[object], path: str) -> tuple[int, int]:
    total: int | None = None
    typed = shards = 0
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping) or entry.get("type") != "gres":
            continue
        name = entry.get("name")
        if name == "shard":  # untyped in 22.05's TRES, as gres/shard=N in `sacct -P`
            shards = _number(entry.get("count"), f"{path}[{index}].count", MAX_GPUS * MAX_SHARDS_PER_GPU) or 0
            continue
        if not isinstance(name, str) or not (name == "gpu" or name.startswith("gpu:")):
            continue
        count = _number(entry.get("count"), f"{path}[{index}].count", MAX_GPUS) or 0
        if name == "gpu":
            total = count
        else:
            typed += count
    gpus = typed if total is None else total
    if gpus > MAX_GPUS:
        raise FieldError(path, f"too many GPUs: {gpus} (at most {MAX_GPUS:,})")
    return gpus, shards


def _number(value: object, path: str, maximum: float) -> int | None:
    """An int from 0 to `maximum`, or a 24.11 no_val object; None when absent, unset or infinite."""
    if isinstance(value, Mapping):
        if value.get("set") is False or value.get("infinite") is True:
            return None
        value = value.get("number")
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise FieldError(path, f"not an integer: {_brief(value)}")
    if value < 0:
        raise FieldError(path, "negative" if value < -MAX_JOB_ID else f"negative: {value!r}")
    if value > maximum:
        raise FieldError(path, f"too large (at most {maximum:,.0f})")
    return value


def _object(job: Json, key: str) -> Json:
    value = job.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise FieldError(key, f"not an object: {_brief(value)}")
    return value


def _text(job: Json, key: str) -> str:
    value = job.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise FieldError(key, f"not a string: {_brief(value)}")
    return _clean(value, key).strip()


def _brief(value: object) -> str:
    """A value for an error message: scalars shown (cut short), containers only named (their repr
    could be huge, or nested too deep to print)."""
    if isinstance(value, Mapping):
        return "an object"
    if isinstance(value, list):
        return "a list"
    return f"{value!r:.60}"


def _clean(value: str, key: str) -> str:
    if "\0" in value:
        raise FieldError(key, "contains a NUL character")
    return value


def _state(job: Json) -> str:
    current = _object(job, "state").get("current")
    if isinstance(current, list) and current and all(isinstance(s, str) for s in current):
        current = current[0]
    if current is None or current == []:
        return "COMPLETED"
    if not isinstance(current, str):
        raise FieldError("state.current", f"not a state: {_brief(current)}")
    return current.split()[0] if current.strip() else "COMPLETED"
