"""The public entry points: stream a trace (`iter_jobs`) or read it whole (`read_trace`).

Clocks: `iter_jobs` streams, so it cannot know the earliest submit time before the last record;
it yields submit times on the file's own clock (epoch seconds for sacct, sacct --json and dated
Helios CSVs; trace-relative seconds for numeric Helios CSVs and Alibaba). `read_trace` then
re-bases epoch traces so `submit == 0` is the earliest kept job (`origin` says which instant that
is) and leaves relative traces as they are (`origin == 0.0`). Jobs are then ordered by
`(submit, seq)`: equal submit times keep file order.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from operator import attrgetter
from pathlib import Path

from gputwin.api.names import MAX_SHARDS_PER_GPU
from gputwin.core.model import JobSpec

from .alibaba import read_alibaba
from .errors import TraceError
from .helios import read_helios
from .helios_raw import read_helios_raw
from .pai import read_pai
from .philly import read_philly
from .sacct import read_sacct
from .sacct_json import read_sacct_json
from .sniff import FORMATS, sniff_format
from .swf import read_swf
from .table import ReadContext

_READERS: Mapping[str, Callable[[ReadContext], Iterator[JobSpec]]] = {
    "sacct": read_sacct,
    "sacct-json": read_sacct_json,
    "helios": read_helios,
    "alibaba": read_alibaba,
    "swf": read_swf,
    "philly-json": read_philly,
    "helios-raw": read_helios_raw,
    "pai": read_pai,
}


@dataclass(frozen=True)
class TraceResult:
    """A whole trace: jobs in `(submit, seq)` order, the format read, its origin, skip counts."""

    jobs: tuple[JobSpec, ...]
    format: str
    origin: float
    skipped: Mapping[str, int]

    def summary(self) -> dict[str, object]:
        """What a CLI prints or a report stores: JSON-able, skip reasons sorted."""
        return {"format": self.format, "jobs": len(self.jobs), "skipped": dict(sorted(self.skipped.items()))}


def iter_jobs(
    path: str | Path,
    fmt: str = "auto",
    *,
    skip_invalid: bool = False,
    skipped: Counter[str] | None = None,
    procs_per_gpu: int = 1,
    shards_per_gpu: int = 0,
) -> Iterator[JobSpec]:
    """Stream a trace's jobs in file order; `seq` numbers the kept jobs from 0.

    Submit times are on the file's own clock (see the module docstring). Skip reasons are
    counted into `skipped` when given. An unknown `fmt` (or, with "auto", an unreadable or
    unrecognised file) fails right away; errors in the records surface while iterating.
    `procs_per_gpu` is SWF's processors per GPU (other formats count GPUs themselves);
    `shards_per_gpu` is the SLURM cluster's gres/shard per GPU, which sacct's `gres/shard=N` is read
    against as a fraction (`sacct_columns.share`; 0: unknown, such a job reads as one whole GPU).
    """
    return _open(path, fmt, skip_invalid, Counter() if skipped is None else skipped, procs_per_gpu,
                 shards_per_gpu)[1]  # fmt: skip


def read_trace(
    path: str | Path, fmt: str = "auto", *, skip_invalid: bool = False, procs_per_gpu: int = 1,
    progress: Callable[[int], None] | None = None, shards_per_gpu: int = 0,
) -> TraceResult:
    """Read a whole trace: jobs sorted by `(submit, seq)`, epoch clocks re-based to `origin`.
    `progress` is told how many jobs were read every `PROGRESS_EVERY` and at the end."""
    ctx, stream, name = _open(path, fmt, skip_invalid, Counter(), procs_per_gpu, shards_per_gpu)
    jobs = list(stream) if progress is None else _counted(stream, progress)
    origin = min((job.submit for job in jobs), default=0.0) if ctx.clock.epoch else 0.0
    if origin:
        _rebase(jobs, origin)
    jobs.sort(key=_order)
    return TraceResult(tuple(jobs), name, origin, dict(sorted(ctx.skipped.items())))


_order = attrgetter("submit", "seq")
PROGRESS_EVERY = 10_000  # jobs: a call per job would cost a tenth of a 2M-job read


def _counted(stream: Iterator[JobSpec], progress: Callable[[int], None]) -> list[JobSpec]:
    jobs: list[JobSpec] = []
    append = jobs.append
    for job in stream:
        append(job)
        if len(jobs) % PROGRESS_EVERY == 0:
            progress(len(jobs))
    progress(len(jobs))
    return jobs


def _rebase(jobs: list[JobSpec], origin: float) -> None:
    """`jobs[i] = replace(job, submit=job.submit - origin)` for every job, ten times faster.

    The readers build a fresh JobSpec per record and nothing outside `read_trace` has seen these
    yet, so each one's submit is shifted in place (a frozen dataclass still has slots to set)
    instead of copying all eleven fields through the frozen `__init__`.
    """
    if all(type(job) is JobSpec for job in jobs) and len(set(map(id, jobs))) == len(jobs):
        setter = object.__setattr__
        for job in jobs:
            setter(job, "submit", job.submit - origin)
    else:  # not all ours, or one object twice: copy them as before
        jobs[:] = [replace(job, submit=job.submit - origin) for job in jobs]


def _open(
    path: str | Path, fmt: str, skip_invalid: bool, skipped: Counter[str], procs_per_gpu: int = 1,
    shards_per_gpu: int = 0,
) -> tuple[ReadContext, Iterator[JobSpec], str]:
    if type(procs_per_gpu) is not int or procs_per_gpu < 1:
        raise TraceError(str(path), None, "procs_per_gpu", f"want a whole number >= 1, got {procs_per_gpu!r}")
    if type(shards_per_gpu) is not int or not 0 <= shards_per_gpu <= MAX_SHARDS_PER_GPU:
        raise TraceError(str(path), None, "shards_per_gpu",
                         f"want a whole number 0..{MAX_SHARDS_PER_GPU}, got {shards_per_gpu!r}")  # fmt: skip
    ctx = ReadContext(Path(path), skip_invalid, skipped, procs_per_gpu=procs_per_gpu, shards_per_gpu=shards_per_gpu)
    if fmt == "auto":
        fmt = sniff_format(path)
    reader = _READERS.get(fmt)
    if reader is None:
        raise TraceError(
            str(path), None, "format", f"unknown format {fmt!r}; expected auto or one of {', '.join(FORMATS)}"
        )
    return ctx, reader(ctx), fmt
