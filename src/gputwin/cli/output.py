"""Terminal output for the CLI: summary tables, comparison tables, progress displays.

Progress goes to stderr, only on a terminal and never under --json or --quiet (`progress_wanted`),
and only once a run has taken `PROGRESS_AFTER` seconds (`Delayed`): a quick command draws nothing,
a long one (a 2M-job trace loading, a long replay) shows its count within a few seconds.
`GPUTWIN_PROGRESS_AFTER=SECONDS` changes the delay (0: at once).
"""

from __future__ import annotations

import os
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol, Sequence

import click
from rich.console import Console
from rich.measure import Measurement
from rich.progress import BarColumn, Progress, ProgressColumn, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.progress import TaskID, TimeRemainingColumn
from rich.table import Table

from gputwin.sim.evaluation import TABLE_METRICS, TENANCY_METRICS
from gputwin.sim.units import FORMATS

# Headers with units and one fixed format per metric (gputwin.sim.units), as the reports show them.
METRIC_COLUMNS = tuple((key, FORMATS[key].header) for key in TABLE_METRICS)

# Seconds before a progress display appears: shorter runs finish before one is worth drawing.
PROGRESS_AFTER = 2.0


def _console(stderr: bool = False) -> Console:
    """A console; piped output is as wide as its widest line (`_print`), a terminal's is its own."""
    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, width=None if stream.isatty() else 140)


def _print(console: Console, table: Table) -> None:
    """Print `table`; piped, at its natural width, so no name is cut or wrapped to fit 140 columns."""
    if not console.is_terminal:  # measured without the console's own width limit
        console.width = max(console.width, Measurement.get(console, console.options.update_width(10**6), table).maximum)
    console.print(table)


def _fmt(value: Any, key: str | None = None) -> str:
    """`value` in metric `key`'s fixed format; other values (counts, names) as they are."""
    if key is not None and key in FORMATS:
        return FORMATS[key].cell(value)
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 10 else f"{value:,.1f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def print_summary(summary: dict[str, Any], out_dir: Path | None) -> None:
    console = _console()
    table = Table(title=f"gputwin simulate — {summary['jobs']:,} jobs, wall {summary['wall_seconds']} s")
    table.add_column("partition")
    table.add_column("policy")
    for _, label in METRIC_COLUMNS:
        table.add_column(label, justify="right")
    for name, metrics in summary["partitions"].items():
        table.add_row(name, summary["policies"].get(name, ""), *(_fmt(metrics[k], k) for k, _ in METRIC_COLUMNS))
    table.add_row("all", "", *(_fmt(summary[k], k) for k, _ in METRIC_COLUMNS), style="bold")
    _print(console, table)
    console.print(f"makespan {FORMATS['makespan'].with_unit(summary['makespan'])}")
    for label, counts in (("skipped trace records", summary.get("skipped")), ("rejected jobs", summary["rejected"])):
        if counts:
            console.print(f"{label}: " + ", ".join(f"{reason} ×{n}" for reason, n in sorted(counts.items())))
    if out_dir is not None:
        console.print(f"wrote {out_dir / 'jobs.csv'} and {out_dir / 'summary.json'}")


def comparison_table(rows: Sequence[dict[str, Any]], title: str = "gputwin demo") -> None:
    """One row per candidate policy, best average JCT first."""
    table = Table(title=title)
    table.add_column("policy")
    for _, label in METRIC_COLUMNS:
        table.add_column(label, justify="right")
    for row in rows:
        table.add_row(row["candidate"], *(_fmt(row[k], k) for k, _ in METRIC_COLUMNS))
    _print(_console(), table)


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
            self.bar = Progress(*self.columns, console=_console(stderr=True), transient=True)
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
    columns = (SpinnerColumn(), TextColumn(f"reading {path.name}: {{task.completed:,}} jobs"), TimeElapsedColumn())
    bar = Delayed(columns, None)
    try:
        yield bar.update
    finally:
        bar.close()


def ranked_table(rows: Sequence[dict[str, Any]], skipped: Sequence[str], title: str) -> None:
    """`gputwin compare`: one row per candidate with its rank, best average JCT first; skip notes after.
    Rows that carry the tenancy metrics (a cluster with tenants) get their columns too."""
    table = Table(title=title)
    table.add_column("#", justify="right")
    table.add_column("candidate")
    columns = [*METRIC_COLUMNS, *((k, FORMATS[k].header) for k in TENANCY_METRICS if any(k in r for r in rows))]
    for _, label in columns:
        table.add_column(label, justify="right")
    for row in rows:
        table.add_row(str(row["rank"]), row["candidate"], *(_fmt(row.get(k), k) for k, _ in columns))
    console = _console()
    _print(console, table)
    for note in skipped:
        console.print(f"note: {note}", highlight=False)


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
