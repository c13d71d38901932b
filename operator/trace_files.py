"""The TraceReplay sandbox: which trace files a replay may read, and what its errors may say.

A TraceReplay is written by whoever may create one; its `spec.trace.file` is read by the
operator's process, with the operator's rights. So a file is read only when all of these hold
(docs/security.md says why; tests/hostile/test_hostile_replay.py proves each):

- it lies inside an allowed folder: the operator's `GPUTWIN_TRACE_DIR` (unset by default, so a
  cluster refuses file sources until an admin opts in), and in the embedded emulator also the
  folder of the manifest that declared the replay (the `gputwin.io/manifest-folder` annotation,
  which `gputwin apply` writes and only the emulator trusts). A relative path is relative to the
  first of these. Symlinks and `..` are resolved before the check, so neither leads out;
- it is a regular file (never a FIFO, device, socket or directory: `os.stat` before anything
  opens it, then `fstat` on a descriptor opened with O_NONBLOCK | O_NOFOLLOW, so a file swapped
  in between is caught and a FIFO never blocks the open);
- it is at most `GPUTWIN_TRACE_MAX_BYTES` long (default 32 MiB, see DEFAULT_MAX_BYTES).

The reader then reads that very descriptor (`/proc/self/fd/N`), not the path again.

Errors never quote the file: `redacted` turns a reader's `TraceError` (whose reasons quote the
offending value) into `WHERE[:LINE]: FIELD: REASON` with a field and reason from a fixed
vocabulary, or `record` / `invalid value` when a reader says something this module does not know.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gputwin.adapters.traces import TraceError

TRACE_DIR_ENV = "GPUTWIN_TRACE_DIR"
TRACE_MAX_ENV = "GPUTWIN_TRACE_MAX_BYTES"
# Reading a Helios CSV takes ~11x its size in memory (the Philly trace: 1.6 MB -> 18 MB RSS), so
# 32 MiB of trace is ~0.35 GiB: it fits, with the simulations, in the Deployment's 1 GiB limit.
# A larger cap needs a larger limit: a trace that gets the operator OOM-killed is read again by
# the restarted one (the replay is still pending), which would never end.
DEFAULT_MAX_BYTES = 32 * 1024 * 1024
MANIFEST_FOLDER = "gputwin.io/manifest-folder"  # written by `gputwin apply`; trusted by the emulator only
WHERE = "spec.trace.file"


class TraceRefused(Exception):
    """A trace file the sandbox will not read: `reason` (the status reason) and a one-line message."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason, self.message = reason, message


@dataclass(frozen=True, slots=True)
class TraceAccess:
    """Where TraceReplay files may come from, and how large they may be."""

    base: Path | None = None  # GPUTWIN_TRACE_DIR, resolved; None: no file source outside the emulator
    max_bytes: int = DEFAULT_MAX_BYTES
    manifest_folders: bool = False  # the emulator: a replay's manifest folder is allowed too


@dataclass(frozen=True, slots=True)
class TraceFile:
    """A trace file that passed `locate`: as the spec names it, where it resolved, its cap."""

    shown: str
    path: Path
    max_bytes: int


def locate(file: str, access: TraceAccess, annotations: Mapping[str, str] | None = None) -> TraceFile:
    """The checked file `spec.trace.file` names, or TraceRefused saying why it may not be read."""
    folders = _folders(access, annotations or {})
    if not folders:
        raise TraceRefused("TraceNotAllowed", (
            f"{WHERE}: file sources are off: the operator setting {TRACE_DIR_ENV} (the folder trace "
            "files may come from) is not set; an admin sets it, or use spec.trace.configMap"))  # fmt: skip
    named = Path(file)
    try:
        resolved = (named if named.is_absolute() else folders[0][1] / named).resolve()
    except RuntimeError:  # a symlink loop (an OSError from Python 3.13 on)
        raise TraceRefused("TraceNotAllowed", f"{WHERE}: {file}: cannot be resolved (a symlink loop)") from None
    except OSError as exc:
        raise TraceRefused("TraceNotAllowed", f"{WHERE}: {file}: cannot be resolved ({exc.strerror})") from None
    if not any(resolved.is_relative_to(folder) for _, folder in folders):
        allowed = " or ".join(f"{what} ({folder})" for what, folder in folders)
        raise TraceRefused("TraceNotAllowed", f"{WHERE}: {file}: resolves outside {allowed}")
    try:
        info = os.stat(resolved)
    except OSError as exc:
        raise _unreadable(file, exc) from None
    _check(file, info, access.max_bytes)
    return TraceFile(file, resolved, access.max_bytes)


def _folders(access: TraceAccess, annotations: Mapping[str, str]) -> list[tuple[str, Path]]:
    """The allowed folders, resolved, each with how a message names it; relative paths use the first."""
    folders = []
    manifest = annotations.get(MANIFEST_FOLDER) if access.manifest_folders else None
    if manifest:
        folders.append(("the manifest's folder", Path(manifest).resolve()))
    if access.base is not None:
        folders.append((TRACE_DIR_ENV, access.base.resolve()))
    return folders


def _check(file: str, info: os.stat_result, max_bytes: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        raise TraceRefused("TraceUnreadable", f"{WHERE}: {file}: not a regular file ({_kind(info.st_mode)}); "
                                              "only regular files are read")  # fmt: skip
    if info.st_size > max_bytes:
        raise TraceRefused("TraceTooLarge", f"{WHERE}: {file}: {info.st_size:,} bytes, over the cap of "
                                            f"{max_bytes:,} bytes ({TRACE_MAX_ENV})")  # fmt: skip


def _kind(mode: int) -> str:
    kinds = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
             (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"))  # fmt: skip
    return next((name for test, name in kinds if test(mode)), "not a plain file")


def _unreadable(file: str, exc: OSError) -> TraceRefused:
    if isinstance(exc, FileNotFoundError):
        return TraceRefused("TraceNotFound", f"{WHERE}: {file}: no such file")
    if exc.errno == errno.ELOOP:  # O_NOFOLLOW met a symlink swapped in after locate
        return TraceRefused("TraceNotAllowed", f"{WHERE}: {file}: became a symlink; not followed")
    return TraceRefused("TraceUnreadable", f"{WHERE}: {file}: {exc.strerror or 'cannot be read'}")


@contextmanager
def opened(trace: TraceFile) -> Iterator[Path]:
    """A path for the reader to open that is the checked file itself: the file is opened once,
    without following a symlink or blocking, checked again on its descriptor, and read through
    `/proc/self/fd/N` (where there is no /proc, the resolved path)."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(trace.path, flags)
    except OSError as exc:
        raise _unreadable(trace.shown, exc) from None
    try:
        _check(trace.shown, os.fstat(fd), trace.max_bytes)
        pinned = Path(f"/proc/self/fd/{fd}")
        yield pinned if pinned.exists() else trace.path
    finally:
        os.close(fd)


# --- redaction ------------------------------------------------------------------------------------

# Fields the readers name today (their own column and JSON names, never the file's): shown as
# they are. Anything else -- a reader's new field, or a header name from the file itself (e.g. a
# duplicate column) -- is shown as `record`.
KNOWN_FIELDS = frozenset(
    "file format row json jobs header job_id user vc gpu_num submit_time duration start_time end_time "
    "name num_gpu gpu_milli creation_time scheduled_time deletion_time JobID JobIDRaw Submit Start End "
    "Elapsed State NNodes NodeList AllocTRES ReqTRES AllocGRES ReqGRES Partition User JobName "
    "time.submission time.start time.end time.elapsed tres.allocated tres.requested state.current "
    "job_id array.job_id array.task_id het.job_id het.job_offset allocation_nodes".split()
)
_JSON_FIELD = re.compile(r"jobs\[\d{1,9}\](\.[a-z_]{1,40}){0,3}|column \d{1,9}")
# Reasons the readers give, up to where they start quoting: the first words are kept when a
# reason starts with one of these; the rest (the value, a header, a line) never is.
KNOWN_REASONS = (
    "empty file", "empty column name", "empty", "no such file", "is a directory", "permission denied",
    "not UTF-8 text", "no records after the header", "missing required column", "duplicate column",
    "not an integer", "not a finite number", "not a number", "negative duration", "negative",
    "not a time", "not a duration", "not a TRES list", "not a GRES item", "not a hostlist",
    "not an object", "not a list", "not a string", "not a state", "no submit time for a job that started",
    "more than one GPU", "cannot tell the format", "missing", "no jobs in the file", "unknown format",
)  # fmt: skip
_BARE = ("missing required column", "duplicate column", "not UTF-8 text")  # what follows: not a value
_COUNTS = re.compile(r"expected \d{1,9} fields, got \d{1,9}")


def redacted(exc: TraceError, where: str) -> str:
    """`WHERE[:LINE]: FIELD: REASON` for a reader's error, with nothing of the file's content."""
    field = exc.field if exc.field in KNOWN_FIELDS or _JSON_FIELD.fullmatch(exc.field) else "record"
    line = "" if exc.line is None else f":{exc.line}"
    return f"{where}{line}: {field}: {_reason(exc.reason)}"


def _reason(reason: str) -> str:
    counts = _COUNTS.match(reason)
    if counts:
        return counts.group(0)
    if reason in KNOWN_REASONS:
        return reason
    bare = next((r for r in _BARE if reason.startswith(r)), None)
    if bare:
        return bare
    known = next((r for r in KNOWN_REASONS if reason.startswith(r) and reason[len(r)] in ":( "), None)
    if known == "cannot tell the format":
        return "cannot tell the format; set spec.trace.format"
    return f"{known} (the value is not shown)" if known else "invalid value (not shown)"


__all__ = [
    "DEFAULT_MAX_BYTES",
    "MANIFEST_FOLDER",
    "TRACE_DIR_ENV",
    "TRACE_MAX_ENV",
    "TraceAccess",
    "TraceFile",
    "TraceRefused",
    "locate",
    "opened",
    "redacted",
]
