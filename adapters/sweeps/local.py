"""The `local` executor: a sweep's tasks in processes on this machine.

The sweep's inputs are loaded once, here, before the worker processes start: forked workers
share the parsed trace instead of each parsing it again (where processes are spawned instead,
each worker loads it once). Workers run task after task through `run_task`, so the results land
in the sweep folder exactly as a SLURM or Kubernetes task would write them. The slowest-looking
candidates go first (`expected_cost`), so no worker is left finishing a long run alone at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.sim.compare import expected_cost

from .plan import load_inputs, read_plan, run_task

Progress = Callable[[int], None]

_WORKER: dict[str, Any] = {}  # per worker process: the folder and its loaded inputs


def _init_worker(folder: Path) -> None:
    if _WORKER.get("folder") != folder:  # a forked worker has the parent's copy already
        _WORKER.update(folder=folder, inputs=load_inputs(folder, read_plan(folder)))


def _run(index: int) -> int:
    run_task(_WORKER["folder"], index, _WORKER["inputs"])
    return index


Inputs = tuple[ClusterSpec, tuple[JobSpec, ...]]


class LocalExecutor:
    """Runs tasks in `workers` processes (1: in this process, no pool).

    `inputs`, when given, are the sweep's inputs already loaded by the caller (who has checked
    they are what the sweep folder holds: `plan.same_inputs`), so they are not loaded again.
    """

    name = "local"

    def __init__(self, workers: int = 1, inputs: Inputs | None = None) -> None:
        self.workers = workers
        self.inputs = inputs

    def run(self, folder: Path, indices: Sequence[int], progress: Progress | None = None) -> None:
        if not indices:
            return
        if self.workers <= 1 or len(indices) == 1:
            inputs = self.inputs or load_inputs(folder, read_plan(folder))
            for index in indices:
                run_task(folder, index, inputs)
                if progress is not None:
                    progress(index)
            return
        plan = read_plan(folder)
        slow_first = sorted(indices, key=lambda i: (-expected_cost(plan.candidates[i]), i))
        _WORKER.update(folder=folder, inputs=self.inputs or load_inputs(folder, plan))
        try:
            with ProcessPoolExecutor(min(self.workers, len(indices)), initializer=_init_worker,
                                     initargs=(folder,)) as pool:  # fmt: skip
                for future in as_completed([pool.submit(_run, i) for i in slow_first]):
                    index = future.result()
                    if progress is not None:
                        progress(index)
        finally:
            _WORKER.clear()  # the parsed trace is not kept alive after the sweep
