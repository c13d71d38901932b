"""The `local` executor: a sweep's tasks in processes on this machine.

Each worker process loads the sweep's inputs once (the trace parse dominates a small candidate's
cost) and then runs task after task through `run_task`, so the results land in the sweep folder
exactly as a SLURM or Kubernetes task would write them. The slowest-looking candidates go first
(`expected_cost`), so no worker is left finishing a long run alone at the end.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any

from gputwin.sim.compare import expected_cost

from .plan import load_inputs, read_plan, run_task

Progress = Callable[[int], None]

_WORKER: dict[str, Any] = {}  # per worker process: the folder and its loaded inputs


def _init_worker(folder: Path) -> None:
    _WORKER.update(folder=folder, inputs=load_inputs(folder, read_plan(folder)))


def _run(index: int) -> int:
    run_task(_WORKER["folder"], index, _WORKER["inputs"])
    return index


class LocalExecutor:
    """Runs tasks in `workers` processes (1: in this process, no pool)."""

    name = "local"

    def __init__(self, workers: int = 1) -> None:
        self.workers = workers

    def run(self, folder: Path, indices: Sequence[int], progress: Progress | None = None) -> None:
        if not indices:
            return
        if self.workers <= 1 or len(indices) == 1:
            inputs = load_inputs(folder, read_plan(folder))
            for index in indices:
                run_task(folder, index, inputs)
                if progress is not None:
                    progress(index)
            return
        candidates = read_plan(folder).candidates
        slow_first = sorted(indices, key=lambda i: (-expected_cost(candidates[i]), i))
        with ProcessPoolExecutor(min(self.workers, len(indices)), initializer=_init_worker,
                                 initargs=(folder,)) as pool:  # fmt: skip
            for future in as_completed([pool.submit(_run, i) for i in slow_first]):
                index = future.result()
                if progress is not None:
                    progress(index)
