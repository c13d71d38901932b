"""Progress displays on stderr: a replay's jobs, a trace loading, a sweep's candidates.

Progress goes to stderr, only on a terminal and never under --json or --quiet (`progress_wanted`),
and only once a run has taken `PROGRESS_AFTER` seconds (`Delayed`): a quick command draws nothing,
a long one (a 2M-job trace loading, a long replay) shows its count within a few seconds.
`GPUTWIN_PROGRESS_AFTER=SECONDS` changes the delay (0: at once).

rich is imported only where a display is drawn: `gputwin simulate` run from a script or under
--json (no terminal) loads none of it (issue 17, start-up).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator, Protocol, Sequence

import click

if TYPE_CHECKING:
    from rich.console import Console
    from rich.progress import Progress, ProgressColumn, TaskID

# Seconds before a progress display appears: shorter runs finish before one is worth drawing.
PROGRESS_AFTER = 2.0


def console(stderr: bool = False) -> Console:
    """A console; piped output is as wide as its widest line (`output._print`), a terminal's is its own."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 140)


def progress_wanted() -> bool:
    """Whether to show progress: stderr is a terminal and the command has no --json or --quiet set."""
    if not sys.stderr.isatty():
        return False
    ctx = click.get_current_context(silent=True)
    params = ctx.params if ctx is not None else {}
    return not (params.get("as_json") or params.get("quiet"))


def _delay() -> float:
    try:
        return max(0.0, float(os.environ.get("GPUTWIN_PROGRESS_AFTER", PROGRESS_AFTER)))
    except ValueError:
        return PROGRESS_AFTER


class Delayed:
    """A transient rich Progress on stderr that starts only once `after` seconds have passed since
    it was made; `update` before that only checks the clock."""

    def __init__(self, columns: Sequence[ProgressColumn], total: int | None, after: float | None = None) -> None:
        self.columns, self.total = columns, total
        self.start = time.monotonic() + (_delay() if after is None else after)
        self.bar: Progress | None = None
        self.task: TaskID | None = None

    def update(self, completed: int, description: str = "") -> None:
        if self.bar is None:
            if time.monotonic() < self.start:
                return
            from rich.progress import Progress

            self.bar = Progress(*self.columns, console=console(stderr=True), transient=True)
            self.bar.start()
            self.task = self.bar.add_task("", total=self.total)
        assert self.task is not None
        self.bar.update(self.task, completed=completed, description=description)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.stop()


@contextmanager
def progress_reporter(total: int) -> Iterator[Callable[[int], None] | None]:
    """A jobs-submitted bar with ETA for a replay that runs longer than PROGRESS_AFTER; None (no
    bar) when `progress_wanted` says no."""
    if total == 0 or not progress_wanted():
        yield None
        return
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} jobs"),
               TimeRemainingColumn())  # fmt: skip
    bar, last = Delayed(columns, total), 0

    def advance(submitted: int) -> None:
        nonlocal last
        if submitted - last >= 1000 or submitted == total:
            bar.update(submitted)
            last = submitted

    try:
        yield advance
    finally:
        bar.close()


@contextmanager
def trace_progress(path: Path) -> Iterator[Callable[[int], None] | None]:
    """`reading PATH: 1,230,000 jobs` with a spinner and the time taken, while a trace loads for
    longer than PROGRESS_AFTER (the readers stream: the count is jobs read so far, no total)."""
    if not progress_wanted():
        yield None
        return
    from rich.progress import SpinnerColumn, TextColumn, TimeElapsedColumn

    columns = (SpinnerColumn(), TextColumn(f"reading {path.name}: {{task.completed:,}} jobs"), TimeElapsedColumn())
    bar = Delayed(columns, None)
    try:
        yield bar.update
    finally:
        bar.close()


class Advance(Protocol):
    """Count one more done (or set how many are, `completed`), showing the name of the last one."""

    def __call__(self, name: str, completed: int | None = None) -> None: ...


@contextmanager
def sweep_progress(
    total: int, enabled: bool = True, verb: str = "comparing", unit: str = "candidates"
) -> Iterator[Advance | None]:
    """A done-of-total bar with ETA on stderr ("comparing 3/36 candidates", "tuning 5/30 trials");
    each call of the returned function counts one more done (or sets how many are, `completed`) and
    shows its name. None when disabled or stderr is not a terminal; shown only once the sweep has
    run for PROGRESS_AFTER seconds, as every other progress display."""
    if not enabled or total == 0 or not sys.stderr.isatty():
        yield None
        return
    from rich.progress import BarColumn, TextColumn, TimeRemainingColumn

    columns = (TextColumn(verb), BarColumn(), TextColumn(f"{{task.completed}}/{{task.total}} {unit}"),
               TimeRemainingColumn(), TextColumn("{task.description}"))  # fmt: skip
    bar, done = Delayed(columns, total), 0

    def advance(name: str, completed: int | None = None) -> None:
        nonlocal done
        done = done + 1 if completed is None else completed
        bar.update(done, name)

    try:
        yield advance
    finally:
        bar.close()
