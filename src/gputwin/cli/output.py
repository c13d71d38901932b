"""Terminal output for the CLI: summary tables and comparison tables (rich); progress is `progress`.

`gputwin simulate --json` never imports this module (nor rich): the command imports it only to
print its table (issue 17, start-up).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from gputwin.cli.progress import console as _console
from gputwin.sim.evaluation import TABLE_METRICS, TENANCY_METRICS
from gputwin.sim.units import FORMATS

# Headers with units and one fixed format per metric (gputwin.sim.units), as the reports show them.
METRIC_COLUMNS = tuple((key, FORMATS[key].header) for key in TABLE_METRICS)


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
