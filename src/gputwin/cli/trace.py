"""`gputwin trace …`: work on trace files themselves; `convert` writes any readable trace as SWF or Helios CSV.

`convert` reads the whole trace as `simulate` would (same `--format`, `--skip-invalid`,
`--procs-per-gpu`), then writes it through `gputwin.adapters.traces.writers` into a temporary file
beside `--out` and renames it into place: `--out` is the whole converted trace or, after any
error, what it was before. What was read and skipped is printed on stderr, so stdout stays empty.
"""

from __future__ import annotations

from pathlib import Path

import click

from gputwin.adapters.traces import FORMATS, read_trace
from gputwin.adapters.traces.writers import write_atomically, write_helios, write_swf


@click.group()
def trace() -> None:
    """Work on trace files: convert any readable trace to SWF or to the Helios CSV."""


@trace.command()
@click.option("--trace", "trace_path", required=True, type=click.Path(path_type=Path),
              help="The trace to read (any format `gputwin simulate --trace` reads).")
@click.option("--format", "fmt", default="auto", show_default=True, type=click.Choice(("auto",) + FORMATS),
              help="Its format; auto sniffs it from the file.")
@click.option("--to", "target", required=True, type=click.Choice(("swf", "helios")),
              help="swf: the Standard Workload Format; helios: the CSV `--format helios` reads.")
@click.option("--out", "out_path", required=True, type=click.Path(path_type=Path),
              help="The file to write (replaced whole, or left as it was on an error).")
@click.option("--skip-invalid", is_flag=True, help="Skip malformed trace records (counted) instead of stopping.")
@click.option("--procs-per-gpu", default=1, show_default=True, type=click.IntRange(1, 1 << 20),
              help="SWF input: processors that make one GPU.")
def convert(trace_path: Path, fmt: str, target: str, out_path: Path, skip_invalid: bool,
            procs_per_gpu: int) -> None:  # fmt: skip
    """Write a trace's jobs as SWF or as the Helios CSV, atomically; counts go to stderr."""
    result = read_trace(trace_path, fmt, skip_invalid=skip_invalid, procs_per_gpu=procs_per_gpu)
    with write_atomically(out_path) as stream:
        if target == "swf":
            write_swf(result.jobs, stream, origin=result.origin, source=f"{trace_path.name} ({result.format})")
        else:
            write_helios(result.jobs, stream)
    skipped = ", ".join(f"{reason}: {count:,}" for reason, count in result.skipped.items()) or "none"
    click.echo(f"{len(result.jobs):,} jobs from {trace_path} ({result.format}) to {out_path} ({target}); "
               f"skipped or noted: {skipped}", err=True)  # fmt: skip
