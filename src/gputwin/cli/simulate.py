"""`gputwin simulate`: replay a job trace on a cluster and report JCT, queueing delay and utilisation.

The command the CLI is most often run for, so this module imports only the simulation path: the
trace readers, the cluster loader, the simulator and the report writer (an import-linter contract
in pyproject.toml keeps kopf, kubernetes, matplotlib, optuna, the operator and the sweeps off it).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gputwin.adapters.traces.estimates import read_estimates
from gputwin.cli.options import load_inputs, trace_and_cluster
from gputwin.cli.progress import progress_reporter
from gputwin.core.plugins import known
from gputwin.estimators import ESTIMATORS, factory
from gputwin.sim.atomic import SIMULATE, check
from gputwin.sim.report import write_outputs
from gputwin.sim.run import Overrides, run

PLUGINS = known()


@click.command()
@trace_and_cluster
@click.option("--policy", type=click.Choice(PLUGINS["queue"]), help="Queue policy for every partition.")
@click.option("--placement", type=click.Choice(PLUGINS["placement"]), help="Placement for every partition.")
@click.option("--sizing", type=click.Choice(PLUGINS["sizing"]), help="GPU sizing for every partition.")
@click.option("--backfill/--no-backfill", default=None, help="EASY backfill for non-preemptive policies.")
@click.option("--compat", type=click.Choice(["helios"]),
              help="Reproduce the HeliosArtifact simulator's semantics (fifo/sjf/srtf, qssf with "
                   "--estimates; consolidate/random).")
@click.option("--estimates", "estimates_path", type=click.Path(path_type=Path),
              help="Per-job run-time estimates, CSV `jobname,priority` (the reference simulator's format): "
                   "qssf ranks by them x GPUs instead of learning from history.")
@click.option("--estimator", default="history", show_default=True, type=click.Choice(ESTIMATORS),
              help="Run-time estimator QSSF ranks by: running means, LightGBM trained online, or the true run time.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for randomised placement.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Write jobs.csv (one row per job) and summary.json here (a new or earlier --out folder).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout.")
def simulate(trace_path: Path, fmt: str, cluster_path: Path, policy: str | None, placement: str | None,
             sizing: str | None, backfill: bool | None, compat: str | None, estimates_path: Path | None,
             estimator: str, gpus_per_node: int, seed: int, out_dir: Path | None, as_json: bool,
             skip_invalid: bool, procs_per_gpu: int) -> None:  # fmt: skip
    """Replay a job trace on a cluster and report JCT, queueing delay and utilisation."""
    if out_dir is not None:
        check(out_dir, SIMULATE)  # a folder that cannot take the output is refused before the run
    cluster, trace = load_inputs(trace_path, fmt, cluster_path, gpus_per_node, skip_invalid, procs_per_gpu)
    overrides = Overrides(queue=policy, placement=placement, sizing=sizing, backfill=backfill)
    estimates = None if estimates_path is None else read_estimates(estimates_path, trace.jobs)
    table = None if estimates is None else estimates.estimator
    # The learned estimator reads submit hours on the trace's own clock (`origin`: its epoch 0).
    chosen = estimator if estimator == "history" else factory(estimator, trace.jobs, seed, trace.origin)
    with progress_reporter(len(trace.jobs)) as progress:
        summary, outcome = run(cluster, trace.jobs, overrides=overrides, compat=compat, seed=seed,
                               progress=progress, estimates=table, estimator=chosen)  # fmt: skip
    summary["skipped"] = dict(trace.skipped)
    summary["trace"] = {"path": str(trace_path), "format": trace.format}
    if estimates is not None:
        summary["estimates"] = estimates.describe()
    if out_dir is not None:
        from gputwin.core.topology import Topology

        write_outputs(out_dir, summary, outcome.finished, Topology(cluster.topology))
    if as_json:
        click.echo(json.dumps(_public(summary), sort_keys=True))
    else:
        from gputwin.cli.output import print_summary  # rich's tables: only for a terminal's reader

        print_summary(summary, out_dir)


def _public(summary: dict[str, Any]) -> dict[str, Any]:
    """The --json object: everything but the (long) utilisation series."""
    return {k: v for k, v in summary.items() if k != "utilization_series"}
