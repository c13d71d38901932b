"""`gputwin compare`: run a grid of policies on one trace and cluster, rank them, write a report."""

from __future__ import annotations

import importlib
import json
import os
import threading
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import click

from gputwin.adapters.sweeps import run_sweep, write_plan
from gputwin.adapters.sweeps.local import LocalExecutor
from gputwin.adapters.sweeps.plan import same_inputs
from gputwin.cli.options import load_inputs, trace_and_cluster
from gputwin.cli.output import ranked_table
from gputwin.cli.progress import sweep_progress
from gputwin.cli.sweep import executor_options, make_executor
from gputwin.cli.version import command_line, core_flavour
from gputwin.sim.atomic import COMPARE, atomic_folder, check
from gputwin.sim.compare import Comparison, comparison, grid, write_report
from gputwin.sim.provenance import Provenance, provenance
from gputwin.sim.reportpage import write_markdown
from gputwin.sim.run import RunError


def warn(message: str) -> None:
    click.echo(f"warning: {message}", err=True)


def _names(value: str) -> list[str]:
    names = [v.strip() for v in value.split(",") if v.strip()]
    if not names:
        raise RunError(f"empty list {value!r}")
    return names


def _switches(value: str | None) -> list[bool | None]:
    if value is None:
        return [None]
    out: list[bool | None] = []
    for name in _names(value):
        if name.lower() not in ("on", "off"):
            raise RunError(f"--backfill takes on,off or one of them, not {name!r}")
        out.append(name.lower() == "on")
    return out


def write_folder(out_dir: Path, report: Comparison, extra: dict[str, Any], origin: Provenance | None, plots: bool,
                 report_format: str, workers: int) -> list[Path]:  # fmt: skip
    """compare's report folder (summary.json and .csv, the PNGs, index.html and/or report.md), swapped
    in whole (`gputwin.sim.atomic`); `gputwin whatif --out` writes the same. Returns the paths written."""
    with atomic_folder(out_dir, COMPARE) as new:
        written = write_report(new, report, extra)
        pngs: list[Path] = []
        if plots:
            from gputwin.sim.plots import write_plots  # matplotlib takes a while to import (see `done`)

            # The figures are drawn in parallel on this machine, whatever ran the candidates.
            pngs = write_plots(new, report, workers=min(workers, os.cpu_count() or 1), origin=origin,
                               page=report_format != "md")  # fmt: skip
        if report_format != "html":
            pngs.append(write_markdown(new, report, pngs, origin))
        written += pngs
    return [out_dir / path.name for path in written]


@click.command()
@trace_and_cluster
@click.option("--policies", default="fifo,sjf,qssf", show_default=True,
              help="Queue policies to compare, comma-separated.")
@click.option("--placements", default="consolidate,topology-aware", show_default=True,
              help="Placers to compare, comma-separated.")
@click.option("--backfill", "backfill", default=None,
              help="on, off or on,off (default: as the cluster file says). Skipped for preemptive policies.")
@click.option("--sizing", "sizings", default=None,
              help="GPU sizings to compare, comma-separated (default: as the cluster file says).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for randomised placement.")
@click.option("--jobs", "workers", default=os.cpu_count() or 1, show_default="CPU count",
              type=click.IntRange(1, 256),
              help="Candidates run in parallel: local processes, or SLURM/Kubernetes tasks at once.")
@executor_options
@click.option("--out", "out_dir", required=True, type=click.Path(path_type=Path),
              help="Write summary.json, summary.csv, the plots and index.html here (swapped in whole).")
@click.option("--plots/--no-plots", default=True, show_default=True,
              help="Also write the PNG plots and index.html (a self-contained page embedding them).")
@click.option("--report-format", "report_format", default="html", show_default=True,
              type=click.Choice(("html", "md", "both")),
              help="The report a person reads: index.html, report.md (markdown for a CI or pull-request "
                   "comment, linking the PNGs beside it) or both.")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@click.option("--json", "as_json", is_flag=True, help="Print the ranked list as one JSON object on stdout.")
def compare(trace_path: Path, fmt: str, cluster_path: Path, gpus_per_node: int, skip_invalid: bool,
            procs_per_gpu: int, policies: str, placements: str, backfill: str | None, sizings: str | None, seed: int,
            workers: int, executor: str, partition: str | None, namespace: str, image: str,
            volume_claim: str | None, sweep_timeout: float, out_dir: Path, plots: bool, report_format: str,
            quiet: bool, as_json: bool) -> None:  # fmt: skip
    """Compare queue policies, placers, backfill and sizing on one trace, best average JCT first.

    The candidates run as a sweep in OUT/sweep (one result file each), here or on a cluster
    (--executor); run again with the same options and OUT, a sweep resumes where it stopped.
    The report is written into a new folder and swapped in whole: a failure leaves the last one.
    """
    candidates, skipped = grid(
        _names(policies), _names(placements),
        list(_names(sizings)) if sizings is not None else [None], _switches(backfill),
    )  # fmt: skip
    # errors first
    cluster, trace = load_inputs(trace_path, fmt, cluster_path, gpus_per_node, skip_invalid, procs_per_gpu)
    check(out_dir, COMPARE)  # before the sweep: a folder that cannot take the report is refused now
    folder = out_dir / "sweep"
    plan = write_plan(folder, trace_path, trace.format, cluster_path, gpus_per_node=gpus_per_node,
                      skip_invalid=skip_invalid, seed=seed, candidates=tuple(candidates),
                      procs_per_gpu=procs_per_gpu)  # fmt: skip
    runner = make_executor(executor, workers, partition, namespace, image, volume_claim, sweep_timeout)
    if isinstance(runner, LocalExecutor) and same_inputs(folder, plan, trace_path, cluster_path):
        runner.inputs = (cluster, tuple(trace.jobs))  # loaded above: the workers need not parse them again
    # Once fewer candidates are left than workers, a core is idle until the last one ends: import
    # matplotlib (about a second) there rather than after the sweep.
    preload_at, finished = max(1, len(candidates) - workers + 1), [0]
    with sweep_progress(len(candidates), enabled=not quiet) as advance:

        def done(index: int) -> None:
            finished[0] += 1
            if plots and finished[0] == preload_at:
                threading.Thread(target=importlib.import_module, args=("gputwin.sim.plots",), daemon=True).start()
            if advance is not None:
                advance(candidates[index].name)

        report = comparison(run_sweep(folder, runner, done, warn), skipped)
    extra = {"trace": {"path": str(trace_path), "format": trace.format, "jobs": len(trace.jobs),
                       "skipped": dict(trace.skipped)}, "seed": seed, "executor": executor}  # fmt: skip
    origin = provenance(trace_path, cluster_path, core_flavour(), datetime.now(timezone.utc), command_line())
    written = write_folder(out_dir, report, extra, origin, plots, report_format, workers)
    if as_json:
        click.echo(json.dumps({**extra, **report.to_json()}, sort_keys=True))
        return
    title = f"gputwin compare — {len(trace.jobs):,} jobs, {len(candidates)} candidates"
    ranked_table(report.to_json()["candidates"], report.skipped, title)
    if not quiet:
        click.echo("wrote " + ", ".join(str(p) for p in written))
