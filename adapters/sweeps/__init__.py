"""Sweeps of simulations, run where there is room: this machine, a SLURM cluster, a Kubernetes cluster.

A sweep is a folder (`plan`): the inputs, the candidates, and one result file per candidate.
An `Executor` runs some of its tasks somewhere; `run_sweep` runs the ones without a result and
gathers them all back, the same way for every executor:

    local       processes on this machine (`LocalExecutor`, `.local`)
    slurm       one job array, task i = candidate i (`SlurmExecutor`, `gputwin.adapters.slurm.sweeps`)
    kubernetes  one Indexed Job, completion index i = candidate i (`KubernetesExecutor`,
                `gputwin.adapters.kube.sweeps`)

Each backend's executor lives with the rest of that backend; `gputwin.cli.sweep` picks one by name.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Protocol

from gputwin.sim.compare import CandidateResult

from .plan import (BadResults, SweepError, SweepPlan, gather, pending, read_plan, result_path, run_task,
                   write_plan)

EXECUTORS = ("local", "slurm", "kubernetes")
DEFAULT_IMAGE = "gputwin:dev"  # the kubernetes executor's image: what the Dockerfile builds


class Executor(Protocol):
    """Runs tasks `indices` of the sweep in `folder`; each task writes its own result file."""

    name: str

    def run(self, folder: Path, indices: Sequence[int], progress: Callable[[int], None] | None = None) -> None:
        ...


def run_sweep(folder: Path, executor: Executor, progress: Callable[[int], None] | None = None,
              warn: Callable[[str], None] | None = None) -> list[CandidateResult]:  # fmt: skip
    """Run every task that has no result yet, then gather all of them (index order).

    A result file that cannot be read (`BadResults`) is deleted and its task run again, once; `warn`
    hears which. A sweep is a cache of simulations: running one again costs time, never a result."""
    plan = read_plan(folder)
    executor.run(folder, pending(folder, plan), progress)
    try:
        return gather(folder, plan)
    except BadResults as exc:
        if warn is not None:
            warn(f"{exc}; running {'that candidate' if len(exc.indices) == 1 else 'those candidates'} again")
        for index in exc.indices:
            result_path(folder, index).unlink(missing_ok=True)
        executor.run(folder, list(exc.indices), progress)
    return gather(folder, plan)


__all__ = [
    "BadResults",
    "DEFAULT_IMAGE",
    "EXECUTORS",
    "Executor",
    "SweepError",
    "SweepPlan",
    "gather",
    "pending",
    "read_plan",
    "run_sweep",
    "run_task",
    "write_plan",
]
