"""Where a sweep's simulations run: `--executor` options, and `gputwin sweep-task` that each task runs.

`gputwin compare --executor local|slurm|kubernetes` writes a sweep folder (`OUT/sweep`: the
inputs, the candidates, a result file per candidate) and hands its tasks to the executor; the
results are gathered from the folder the same way for all three. `gputwin sweep-task FOLDER
[INDEX]` is the task itself: on SLURM the index comes from `SLURM_ARRAY_TASK_ID`, in an Indexed
Job from `JOB_COMPLETION_INDEX`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from gputwin.adapters.sweeps import DEFAULT_IMAGE, EXECUTORS, Executor, SweepError, run_task
from gputwin.adapters.sweeps.local import LocalExecutor
from gputwin.adapters.slurm.sweeps import SlurmExecutor
from gputwin.cli.params import FiniteRange

F = TypeVar("F", bound=Callable[..., Any])
INDEX_VARIABLES = ("SLURM_ARRAY_TASK_ID", "JOB_COMPLETION_INDEX")


def executor_options(func: F) -> F:
    """--executor and the settings of the slurm and kubernetes executors."""
    options = (
        click.option("--executor", default="local", show_default=True, type=click.Choice(EXECUTORS),
                     help="Where the candidates run: processes here, a SLURM job array, a Kubernetes Indexed Job."),
        click.option("--partition", default=None, help="slurm: the partition the array runs in."),
        click.option("--namespace", default="default", show_default=True, help="kubernetes: the Job's namespace."),
        click.option("--image", default=DEFAULT_IMAGE, show_default=True, help="kubernetes: the gputwin image."),
        click.option("--volume-claim", default=None,
                     help="kubernetes: a PersistentVolumeClaim holding --out (default: --out as a hostPath, "
                          "for one-node clusters such as kind)."),
        click.option("--timeout", "sweep_timeout", default=3600.0, show_default=True, type=FiniteRange(1),
                     help="slurm/kubernetes: seconds to wait for the tasks."),
    )  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def make_executor(executor: str, workers: int, partition: str | None, namespace: str, image: str,
                  volume_claim: str | None, sweep_timeout: float) -> Executor:  # fmt: skip
    """The executor the options name (`workers`: local processes, or tasks at once elsewhere)."""
    if executor == "slurm":
        return SlurmExecutor(partition=partition, parallel=workers, timeout=sweep_timeout)
    if executor == "kubernetes":
        from gputwin.adapters.kube.sweeps import KubernetesExecutor  # the client takes 0.3 s to import

        return KubernetesExecutor(namespace=namespace, image=image, parallel=workers, claim=volume_claim,
                                  host_path=volume_claim is None, timeout=sweep_timeout)  # fmt: skip
    return LocalExecutor(workers)


@click.command("sweep-task")
@click.argument("folder", type=click.Path(path_type=Path, file_okay=False, exists=True))
@click.argument("index", type=int, required=False)
def sweep_task(folder: Path, index: int | None) -> None:
    """Run one candidate of the sweep in FOLDER (INDEX, else $SLURM_ARRAY_TASK_ID or $JOB_COMPLETION_INDEX)."""
    if index is None:
        found = next((os.environ[v] for v in INDEX_VARIABLES if os.environ.get(v, "").isdigit()), None)
        if found is None:
            raise SweepError(f"no INDEX given and none of {', '.join(INDEX_VARIABLES)} is set")
        index = int(found)
    path = run_task(folder, index)
    click.echo(str(path))
