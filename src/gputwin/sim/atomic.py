"""All-or-nothing output folders: `simulate`, `compare` and `tune --out DIR` swap a whole folder in.

A command writes its report into a fresh folder beside DIR (`.DIR.new-XXXX`, same filesystem) and
`atomic_folder` renames it into place only when every file is written. A failure at any point
(an error, a full disk, Ctrl-C) removes the new folder and leaves DIR as it was, or absent: never
`jobs.csv` without `summary.json`, never PNGs without `index.html`.

Replacing an existing DIR takes three renames: DIR -> `.DIR.old-XXXX`, the resume state (below)
from there into the new folder, the new folder -> DIR; then the old one is deleted. A failed
rename puts everything back. POSIX cannot swap two non-empty folders in one step, so a process
killed between the first and the last rename (microseconds) leaves no DIR; the old and the new
folder are then both beside it, whole, under those hidden names (the resume state in one of them).
A process killed (SIGKILL) while writing leaves its `.DIR.new-XXXX` beside DIR, which nothing
reads: delete it at will. DIR's parent must be writable, since that is where the swap happens.

Resume state is not part of the swap. `compare`'s sweep (`DIR/sweep`: the plan, one result file
per candidate) and `tune`'s optuna study (`DIR/study.db`) are worth keeping when a run is cut
short, so they are written in place as the run goes, each step atomic on its own: a result file
is written to a temporary name and `os.replace`d (`gputwin.adapters.sweeps.plan`), a trial is an
SQLite transaction. The swap carries them (`Layout.carry`) from the old DIR into the new one by
rename, so a resumed run finds them where it left them, and the report beside them is always
one run's whole report. They stay inside DIR (rather than beside it) so that DIR is still all
there is to a run: resumed by giving the same `--out`, moved or deleted as one folder.

Only a folder that holds nothing but what the command writes is replaced (`check`): `--out ~`
or a folder of one's own files is refused, naming the first entry that is not ours, before any
simulation runs. So is a DIR that is a file, that cannot be written, or that holds the current
folder (`--out .`: the shell would be left in a deleted folder); each is one line (`OutputError`).
"""

from __future__ import annotations

import fnmatch
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gputwin.errors import InputError


def _umask() -> int:
    """The process's umask, read once at import (setting it to read it is not thread-safe later)."""
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


UMASK = _umask()
FILE_MODE, FOLDER_MODE = 0o666 & ~UMASK, 0o777 & ~UMASK  # what open() and mkdir() would give


class OutputError(InputError):
    """An output folder that cannot be (re)written; one line naming it and the reason."""


@dataclass(frozen=True, slots=True)
class Layout:
    """What one command writes into its output folder."""

    command: str
    files: tuple[str, ...]  # glob patterns of the report's regular files (swapped in whole)
    carry: tuple[str, ...] = ()  # resume state, written in place and carried into the new folder


SIMULATE = Layout("simulate", ("jobs.csv", "summary.json"))
COMPARE = Layout("compare", ("summary.json", "summary.csv", "index.html", "report.md", "*.png"), carry=("sweep",))
TUNE = Layout("tune", ("tune.json", "schedulingpolicy.yaml", "report.md"),
              carry=("study.db", "study.db-journal", "study.db-wal", "study.db-shm"))  # fmt: skip


def _writable(path: Path) -> bool:
    effective = os.access in os.supports_effective_ids  # the effective user, as the kernel checks it
    return os.access(path, os.W_OK | os.X_OK, effective_ids=effective)


def check(dest: Path, layout: Layout) -> Path:
    """DIR resolved, if the command may write it: absent, or a writable folder of its own files."""
    dest = Path(os.path.abspath(dest))
    if dest.is_symlink() and dest.resolve().is_dir():
        dest = dest.resolve()  # the folder the link names is swapped; the link keeps naming it
    if not dest.exists() and not dest.is_symlink():
        parent = next((p for p in dest.parents if p.exists()), None)
        if parent is not None and not parent.is_dir():
            raise OutputError(f"{parent}: not a folder, cannot hold {dest}")
        if parent is not None and not _writable(parent):
            raise OutputError(f"{parent}: not writable, cannot create {dest} in it")
        return dest
    if not dest.is_dir() or dest.is_symlink():
        raise OutputError(f"{dest}: not a folder; give a new or empty folder for the output")
    here = Path.cwd()
    if dest == here or dest in here.parents:  # the shell would be left in a deleted folder
        raise OutputError(
            f"{dest}: holds the current folder, which is never replaced; give a folder inside it"
        )
    for entry in sorted(os.scandir(dest), key=lambda e: e.name):
        _check_entry(dest, entry, layout)
    for where in (dest, dest.parent):
        if not _writable(where):
            raise OutputError(f"{where}: not writable, cannot replace {dest}")
    return dest


def _check_entry(dest: Path, entry: os.DirEntry[str], layout: Layout) -> None:
    if entry.name in layout.carry:
        return  # resume state: whoever reads it checks it
    if not any(fnmatch.fnmatchcase(entry.name, p) for p in layout.files):
        raise OutputError(f"{dest / entry.name}: not something gputwin {layout.command} writes; give a new "
                          f"or empty folder (a folder holding other files is never replaced)")  # fmt: skip
    if not stat.S_ISREG(entry.stat(follow_symlinks=False).st_mode):
        raise OutputError(f"{dest / entry.name}: not a regular file, where gputwin {layout.command} writes "
                          f"one; remove it or give another folder")  # fmt: skip


@contextmanager
def atomic_folder(dest: Path, layout: Layout) -> Iterator[Path]:
    """A new empty folder beside `dest` to write the report into; renamed into place at the end of
    the `with` block, removed (and `dest` untouched) if the block raises."""
    dest = check(dest, layout)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
        new = Path(tempfile.mkdtemp(dir=dest.parent, prefix=f".{dest.name}.new-"))
    except OSError as exc:
        if exc.filename is not None and Path(exc.filename).name.startswith(f".{dest.name}.new-"):
            exc.filename = None  # mkdtemp's own name for the folder: the user knows it as `dest`
        raise OutputError(describe(exc, dest)) from None
    try:
        _set_mode(new, dest)
        yield new
        _swap(new, dest, layout.carry)
    except OSError as exc:
        raise OutputError(describe(exc, dest, new)) from None
    finally:
        shutil.rmtree(new, ignore_errors=True)  # gone already when the swap went through


def _set_mode(new: Path, dest: Path) -> None:
    """mkdtemp makes a private folder; the output gets the mode DIR had, or the umask's default."""
    if dest.is_dir():
        shutil.copymode(dest, new)
    else:
        new.chmod(FOLDER_MODE)


def _swap(new: Path, dest: Path, carry: tuple[str, ...]) -> None:
    if not dest.exists():
        os.rename(new, dest)  # fails, changing nothing, if a folder appeared there meanwhile
        return
    old = new.with_name(new.name.replace(".new-", ".old-", 1))
    os.rename(dest, old)
    moved: list[str] = []
    try:
        for name in carry:
            if os.path.lexists(old / name):
                os.rename(old / name, new / name)
                moved.append(name)
        os.rename(new, dest)
    except BaseException:
        for name in moved:  # put the previous folder back as it was
            os.rename(new / name, old / name)
        os.rename(old, dest)
        raise
    shutil.rmtree(old, ignore_errors=True)  # the new output is in place; a leftover is only litter


def describe(exc: OSError, dest: Path | None = None, new: Path | None = None) -> str:
    """An OS error as `FILE: reason`: the file it concerns (named as it would be in DIR, not in the
    temporary folder `new`), else `dest`."""
    if exc.filename is None and dest is None:
        return str(exc)
    where = str(exc.filename) if exc.filename is not None else str(dest)
    if new is not None and where.startswith(str(new)):
        where = f"{dest}{where[len(str(new)):]}"
    return f"{where}: {(exc.strerror or str(exc)).lower()}"


__all__ = [
    "COMPARE",
    "FILE_MODE",
    "FOLDER_MODE",
    "SIMULATE",
    "TUNE",
    "UMASK",
    "Layout",
    "OutputError",
    "atomic_folder",
    "check",
    "describe",
]
