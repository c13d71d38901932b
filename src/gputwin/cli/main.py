"""The `gputwin` command: simulate a trace, or run the embedded demo.

Errors a user can make (a bad trace line, a bad cluster file, an unknown policy) end the command
with `error: FILE:LINE: FIELD: reason` on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gputwin import __version__
from gputwin.adapters.slurm import SlurmError
from gputwin.adapters.sweeps import SweepError
from gputwin.adapters.traces import TraceError
from gputwin.api.problems import ClusterError
from gputwin.cli.compare import compare as compare_command
from gputwin.cli.describe import describe as describe_command
from gputwin.cli.emulator import COMMANDS as EMULATOR_COMMANDS
from gputwin.cli.errors import report
from gputwin.cli.get import get as get_command
from gputwin.cli.operator_cmd import operator as operator_command
from gputwin.cli.options import load_inputs, trace_and_cluster
from gputwin.cli.output import comparison_table, print_summary, progress_reporter
from gputwin.cli.slurm import slurm as slurm_group
from gputwin.cli.sweep import sweep_task
from gputwin.cli.tune import tune as tune_command
from gputwin.core.plugins import known
from gputwin.sim.atomic import SIMULATE, OutputError, check
from gputwin.sim.report import write_outputs
from gputwin.sim.run import Overrides, RunError, run

USER_ERRORS = (TraceError, ClusterError, RunError, SweepError, SlurmError, OutputError, OSError)
PLUGINS = known()


class UserErrorGroup(click.Group):
    """Turns a user's mistake into one clear line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            report(exc)
            ctx.exit(2)


@click.group(cls=UserErrorGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="gputwin")
def cli() -> None:
    """A digital twin for GPU-cluster scheduling.

    Replay job history through per-partition queues, GPU placement and sizing policies, and
    compare them by job completion time, queueing delay and utilisation.
    """


@cli.command()
@trace_and_cluster
@click.option("--policy", type=click.Choice(PLUGINS["queue"]), help="Queue policy for every partition.")
@click.option("--placement", type=click.Choice(PLUGINS["placement"]), help="Placement for every partition.")
@click.option("--sizing", type=click.Choice(PLUGINS["sizing"]), help="GPU sizing for every partition.")
@click.option("--backfill/--no-backfill", default=None, help="EASY backfill for non-preemptive policies.")
@click.option("--compat", type=click.Choice(["helios"]),
              help="Reproduce the HeliosArtifact simulator's semantics (fifo/sjf/srtf; consolidate/random).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for randomised placement.")
@click.option("--out", "out_dir", type=click.Path(path_type=Path),
              help="Write jobs.csv (one row per job) and summary.json here (a new or earlier --out folder).")
@click.option("--json", "as_json", is_flag=True, help="Print the summary as one JSON object on stdout.")
def simulate(trace_path: Path, fmt: str, cluster_path: Path, policy: str | None, placement: str | None,
             sizing: str | None, backfill: bool | None, compat: str | None, gpus_per_node: int, seed: int,
             out_dir: Path | None, as_json: bool, skip_invalid: bool, procs_per_gpu: int) -> None:  # fmt: skip
    """Replay a job trace on a cluster and report JCT, queueing delay and utilisation."""
    if out_dir is not None:
        check(out_dir, SIMULATE)  # a folder that cannot take the output is refused before the run
    cluster, trace = load_inputs(trace_path, fmt, cluster_path, gpus_per_node, skip_invalid, procs_per_gpu)
    overrides = Overrides(queue=policy, placement=placement, sizing=sizing, backfill=backfill)
    with progress_reporter(len(trace.jobs)) as progress:
        summary, outcome = run(cluster, trace.jobs, overrides=overrides, compat=compat, seed=seed,
                               progress=progress)  # fmt: skip
    summary["skipped"] = dict(trace.skipped)
    summary["trace"] = {"path": str(trace_path), "format": trace.format}
    if out_dir is not None:
        from gputwin.core.topology import Topology

        write_outputs(out_dir, summary, outcome.finished, Topology(cluster.topology))
    if as_json:
        click.echo(json.dumps(_public(summary), sort_keys=True))
    else:
        print_summary(summary, out_dir)


def _public(summary: dict[str, Any]) -> dict[str, Any]:
    """The --json object: everything but the (long) utilisation series."""
    return {k: v for k, v in summary.items() if k != "utilization_series"}


@cli.command()
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as one JSON object.")
def demo(as_json: bool) -> None:
    """Run the embedded default: a bundled trace and cluster under several policies, compared."""
    from gputwin.cli.demo import run_demo

    rows = run_demo()
    if as_json:
        click.echo(json.dumps(rows, sort_keys=True))
    else:
        comparison_table(rows)


# The emulator (apply, get, describe, delete, run, events), the operator, the SLURM group, compare, tune and
# sweep-task (what compare's slurm and kubernetes executors run on each node).
EMULATOR = (*EMULATOR_COMMANDS, get_command, describe_command)
for _command in (*EMULATOR, operator_command, slurm_group, compare_command, tune_command, sweep_task):
    cli.add_command(_command)


def main() -> None:
    cli(prog_name="gputwin")


if __name__ == "__main__":  # pragma: no cover
    main()
