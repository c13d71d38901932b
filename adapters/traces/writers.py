"""Writing any reader's jobs out as SWF or as the Helios processed CSV (`gputwin trace convert`).

`write_swf` writes a Standard Workload Format log (https://www.cs.huji.ac.il/labs/parallel/workload/swf.html)
that `read_swf` reads back to the same jobs: a `;` header (`Version: 2.2`, `MaxJobs`, `MaxRecords`,
`UnixStartTime` for wall-clock traces, `MaxQueues`, one `; Queue: N name` per partition, numbered from 1 in
first-appearance order) and 18 fields a job, one processor per GPU:

- 1 job number: the job ids when all are distinct whole numbers, else 1, 2, ... in order;
- 2 submit, seconds from the first job (`UnixStartTime` says when that was); 4 run time; 5 and 8
  allocated and requested processors = GPUs; 11 status 1 (COMPLETED), 0 (FAILED), 5 (CANCELLED), else
  -1; 12 user: the users when all are whole numbers, else 1, 2, ... named by `; Note: User N is NAME`
  lines (-1 for none); 15 queue = the partition's number; every other field -1 (not recorded).

Times that are not whole seconds are written as decimals, which the spec's integers cannot hold but
`read_swf` takes, so nothing is rounded away. `write_helios` is `write_helios_csv` plus `node_num`.
`write_atomically` writes a file whole or not at all (a temporary file beside it, then a rename).
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from gputwin.core.model import JobSpec

from .errors import TraceError
from .helios import write_helios_csv

_STATUS = {"COMPLETED": "1", "FAILED": "0", "CANCELLED": "5"}
_MAX_NUMBER = 1 << 32  # SWF ids must fit the reader's bound


def write_swf(jobs: Sequence[JobSpec], out: TextIO, *, origin: float = 0.0, source: str = "") -> None:
    """Write `jobs` (in submit order) as an SWF log; `origin` is the epoch second of submit 0, if any."""
    queues = _numbers(job.task_type for job in jobs)
    users = _numbers(job.user for job in jobs if job.user)
    first = min((job.submit for job in jobs), default=0.0)
    ids = _job_numbers(jobs)
    header = [
        "; Version: 2.2",
        f"; Computer: gputwin trace convert{f' of {_one_line(source)}' if source else ''}",
        f"; MaxJobs: {len(jobs)}",
        f"; MaxRecords: {len(jobs)}",
        *([f"; UnixStartTime: {_number(origin + first)}"] if origin else []),
        f"; MaxQueues: {len(queues)}",
        *(f"; Queue: {number} {_name(name, 'task_type')}" for name, number in queues.items()),
        "; Note: one processor per GPU (gputwin reads it back with --procs-per-gpu 1)",
    ]
    numeric_users = all(_whole(user) for user in users)
    if not numeric_users:
        header += [f"; Note: User {number} is {_name(name, 'user')}" for name, number in users.items()]
    out.write("\n".join(header) + "\n")
    for job_id, job in zip(ids, jobs, strict=True):
        user = "-1" if not job.user else (str(int(job.user)) if numeric_users else str(users[job.user]))
        fields = [job_id, _number(job.submit - first), "-1", _number(job.duration), str(job.gpus), "-1", "-1",
                  str(job.gpus), "-1", "-1", _STATUS.get(job.state, "-1"), user, "-1", "-1",
                  str(queues[job.task_type]), "-1", "-1", "-1"]  # fmt: skip
        out.write(" ".join(fields) + "\n")


def write_helios(jobs: Sequence[JobSpec], out: TextIO) -> None:
    """The Helios processed CSV `read_helios` reads, with `node_num` when any job records it and
    `gpu_milli` when any asks for a GPU share: nothing the jobs say is lost."""
    write_helios_csv(jobs, out, nodes=any(job.num_nodes for job in jobs),
                     milli=any(job.gpu_milli != 1000 for job in jobs))  # fmt: skip


WRITERS: dict[str, Callable[..., None]] = {"swf": write_swf, "helios": write_helios}


@contextmanager
def write_atomically(path: Path) -> Iterator[TextIO]:
    """A text stream whose content replaces `path` only when the block ends without an error.

    An existing `path` must be a regular file (or a link to one): renaming over `/dev/null` or a
    FIFO would replace the device itself when run as root.
    """
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        mode = stat.S_IFREG
    if not stat.S_ISREG(mode):
        kind = "a directory" if stat.S_ISDIR(mode) else "a device, FIFO or socket"
        raise TraceError(str(path), None, "--out", f"not a regular file ({kind})")
    folder = path.parent
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".new", dir=folder)
    except OSError as exc:  # no such folder, not writable...: name --out, not the temporary file
        raise TraceError(str(path), None, "--out", (exc.strerror or type(exc).__name__).lower()) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as stream:
            yield stream
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temp, 0o666 & ~_UMASK)  # mkstemp makes 0600; give what open() would have
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def _read_umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


_UMASK = _read_umask()  # read once at import: setting it to read it is not thread-safe later


def _numbers(names: Iterator[str] | Sequence[str]) -> dict[str, int]:
    """Each distinct name its number from 1, in first-appearance order."""
    numbers: dict[str, int] = {}
    for name in names:
        numbers.setdefault(name, len(numbers) + 1)
    return numbers


def _job_numbers(jobs: Sequence[JobSpec]) -> list[str]:
    ids = [job.job_id for job in jobs]
    if all(_whole(job_id) for job_id in ids) and len({int(job_id) for job_id in ids}) == len(ids):
        return [str(int(job_id)) for job_id in ids]
    return [str(position) for position in range(1, len(ids) + 1)]


def _whole(text: str) -> bool:
    """A whole number written as the SWF reader writes it back (no sign, no leading zero)."""
    return text.isascii() and text.isdigit() and str(int(text)) == text and int(text) < _MAX_NUMBER


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else repr(float(value))


def _name(name: str, field: str) -> str:
    """A queue or user name for a header line: one line, no surrounding blanks (the reader strips them)."""
    if name != name.strip() or any(char in name for char in "\r\n\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"):
        raise TraceError("--to swf", None, field, f"{name!r} cannot be an SWF header name (line break or edge blanks)")
    return name


def _one_line(text: str) -> str:
    return " ".join(text.split())
