"""The `gputwin` command: simulate a trace, run the embedded demo, the emulator, the operator, …

Errors a user can make (a bad trace line, a bad cluster file, an unknown policy) end the command
with `error: FILE:LINE: FIELD: reason` on stderr and exit status 2, never a traceback. The
emulator's kubectl-shaped commands (`KUBECTL_SHAPED`: apply, get, describe, delete, events) exit 1
instead, usage errors included, as kubectl does: a script written for kubectl reads them the same.

Every subcommand is imported on first use (`gputwin.cli.lazy`): `gputwin --help` loads no
subcommand and `gputwin simulate` only the simulation path, so neither waits for kopf, the
Kubernetes client, optuna, matplotlib or the sweep executors (benchmarks/startup.py times it).
"""

from __future__ import annotations

from typing import Any

import click

from gputwin.cli.errors import report
from gputwin.cli.lazy import Lazy, LazyGroup
from gputwin.cli.version import version_option
from gputwin.errors import InputError

# Every user error derives from InputError (gputwin.errors), so catching it imports none of the
# modules that raise them (the SLURM adapter, the sweeps): one that was never imported cannot raise.
USER_ERRORS = (InputError, OSError)

# name -> where the command lives and its --help line (its docstring's first sentence; a test checks).
COMMANDS = {
    "simulate": Lazy("gputwin.cli.simulate:simulate",
                     "Replay a job trace on a cluster and report JCT, queueing delay and utilisation."),
    "demo": Lazy("gputwin.cli.demo:demo",
                 "Run the embedded default: a bundled trace and cluster under several policies, compared."),
    "compare": Lazy("gputwin.cli.compare:compare",
                    "Compare queue policies, placers, backfill and sizing on one trace, best average JCT first."),
    "tune": Lazy("gputwin.cli.tune:tune",
                 "Search queue, placement, backfill, sizing and their knobs for the best policy on one trace."),
    # The emulator: a Kubernetes-like API over files, reconciled on a virtual clock.
    "apply": Lazy("gputwin.cli.emulator:apply",
                  "Create or update objects from manifests (`-f -`: standard input), then reconcile at the "
                  "current virtual time."),
    "get": Lazy("gputwin.cli.get:get",
                "Show objects like `kubectl get`: KIND is a kind, plural, short name (gpuj), `gputwin` for all, "
                "or a comma-separated list of them."),
    "describe": Lazy("gputwin.cli.describe:describe",
                     "Show objects in detail, like `kubectl describe`: spec, conditions, events, and for a "
                     "waiting GPUJob why it waits (queue position, GPUs free against GPUs requested)."),
    "delete": Lazy("gputwin.cli.emulator:delete",
                   "Delete objects named in manifests (-f) or as KIND NAME…, then reconcile."),
    "run": Lazy("gputwin.cli.emulator:run",
                "Advance virtual time event by event until no GPUJob is Queued or Running."),
    "events": Lazy("gputwin.cli.emulator:events",
                   "List the events the reconcilers posted, oldest first (times on the virtual clock)."),
    "operator": Lazy("gputwin.cli.operator_cmd:operator", "Run the gputwin operator (kopf) until interrupted."),
    "forecast": Lazy("gputwin.cli.forecast:forecast",
                     "Forecast when each pending job starts (p50/p90) and ends, and when each partition's queue "
                     "drains."),
    "whatif": Lazy("gputwin.cli.whatif:whatif",
                   "Compare the current policy with proposed ones (and drains, added nodes, submissions) from now on."),
    "slurm": Lazy("gputwin.cli.slurm:slurm",
                  "SLURM (SLURM_CONF selects the cluster): read job history, compile policies, apply them safely."),
    "trace": Lazy("gputwin.cli.trace:trace",
                  "Work on trace files: convert any readable trace to SWF or to the Helios CSV."),
    "export": Lazy("gputwin.cli.export:export",
                   "Write a declared cluster for another system: Kueue's ClusterQueues, Cohorts, LocalQueues and flavors."),
    "estimator": Lazy("gputwin.cli.estimator:estimator",
                      "Measure run-time estimators on a trace, or train the learned one for live use."),
    # What compare's slurm and kubernetes executors run on each node.
    "sweep-task": Lazy("gputwin.cli.sweep:sweep_task",
                       "Run one candidate of the sweep in FOLDER (INDEX, else $SLURM_ARRAY_TASK_ID or "
                       "$JOB_COMPLETION_INDEX)."),
}  # fmt: skip


# Commands that stand in for kubectl's own: their errors exit 1, kubectl's status for every error.
KUBECTL_SHAPED = frozenset({"apply", "get", "describe", "delete", "events"})


class UserErrorGroup(LazyGroup):
    """Turns a user's mistake into one clear line and exit status 2 (1 for the kubectl-shaped commands)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            report(exc)
            ctx.exit(_status(ctx, 2))
        except click.UsageError as exc:
            if _status(ctx, 2) == 2:
                raise
            exc.show()  # as click itself shows it, with kubectl's status
            ctx.exit(1)


def _status(ctx: click.Context, usual: int) -> int:
    return 1 if ctx.invoked_subcommand in KUBECTL_SHAPED else usual


@click.group(cls=UserErrorGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@version_option
def cli() -> None:
    """A digital twin for GPU-cluster scheduling.

    Replay job history through per-partition queues, GPU placement and sizing policies, and
    compare them by job completion time, queueing delay and utilisation.
    """


def main() -> None:
    cli(prog_name="gputwin")


if __name__ == "__main__":  # pragma: no cover
    main()
