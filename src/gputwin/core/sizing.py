"""GPU sizing (patent claim 3): how many GPUs a job should get, from history.

`as-requested` keeps the job's own request. `history` picks, among the allowed sizes near the
request, the one with the smallest expected completion time:

    expected(s) = W(s) + R(s)

* W(s): the mean queueing delay of earlier jobs of size s in the same partition and task type;
* R(s): the job's run time scaled to s GPUs, divided by the speed of the GPU model it would run
  on (`model_speed`: history and durations are speed-1 seconds, waits are wall-clock, so on fast
  GPUs a size that waits less gains more than one that runs shorter). The scale comes from history when both sizes have
  been seen (mean run time at s / mean run time at the requested size g), clipped to what is
  physically plausible - never faster than linear speed-up, never slower than no speed-up -
  and otherwise from the scaling model `scaled_run(d, g, s)` below.

Candidates: the allowed sizes (default 1, 2, 4, 8, … up to the partition size) within
[g / max_factor, g * max_factor], no larger than the partition. A size other than the request
needs at least `min_samples` finished jobs of that size; the request itself always qualifies
(W = its mean wait, or 0 with no history). Ties go to the request, then to fewer GPUs, so the
rule is deterministic and never moves a job without evidence.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping, Protocol, Sequence

from gputwin.core.frozen import Frozen
from gputwin.core.history import JobHistory
from gputwin.core.model import JobSpec


def scaled_run(duration: float, requested: int, gpus: int, efficiency: float = 0.9) -> float:
    """Run time on `gpus` GPUs of a job that takes `duration` on `requested` GPUs.

    Fewer GPUs: the work is conserved (linear slow-down). More GPUs: speed-up is linear times
    `efficiency` per doubling, the usual sub-linear data-parallel scaling.
    """
    if gpus <= requested:
        return duration * requested / gpus
    doublings = math.log2(gpus / requested)
    return float(duration * requested / gpus / (efficiency**doublings))


def model_speed(model: str, speeds: Mapping[str, float], models: Iterable[str]) -> float:
    """The speed a job asking for `model` would run at in a partition of `models`: that model's
    speed; for a job asking for any model the slowest of the partition's (a placement spread
    over models runs at its slowest, and the rule should not count on the fast GPUs); 1 without
    models or speeds."""
    if model:
        return speeds.get(model, 1.0)
    return min((speeds.get(m, 1.0) for m in models), default=1.0)


@dataclass(frozen=True, slots=True)
class SizeChoice(Frozen):
    gpus: int
    duration: float


class Sizer(Protocol):
    name: str

    def size(self, job: JobSpec, partition: str, capacity: int, history: JobHistory, speed: float = 1.0
             ) -> SizeChoice: ...  # fmt: skip


class AsRequested:
    name = "as-requested"

    def size(self, job: JobSpec, partition: str, capacity: int, history: JobHistory, speed: float = 1.0
             ) -> SizeChoice:  # fmt: skip
        return SizeChoice(job.gpus, job.duration)


class HistorySizing:
    name = "history"

    def __init__(
        self,
        allowed: Sequence[int] = (),
        max_factor: float = 2.0,
        min_samples: int = 5,
        efficiency: float = 0.9,
    ) -> None:
        self.allowed = tuple(sorted(set(allowed)))
        self.max_factor = max(1.0, max_factor)
        self.min_samples = min_samples
        self.efficiency = efficiency

    def candidates(self, requested: int, capacity: int) -> list[int]:
        sizes = self.allowed or tuple(2**k for k in range(0, max(1, capacity).bit_length()))
        low, high = requested / self.max_factor, requested * self.max_factor
        picked = {s for s in sizes if low <= s <= high and s <= capacity}
        return sorted(picked | {requested})

    def size(self, job: JobSpec, partition: str, capacity: int, history: JobHistory, speed: float = 1.0
             ) -> SizeChoice:  # fmt: skip
        """The size of least expected completion; `speed`: of the model it would run on (`model_speed`).
        The duration chosen stays in speed-1 seconds (the scheduler divides by the placement's speed)."""
        g = job.gpus
        base_run = history.run_stats(partition, job.task_type, g)
        best: tuple[float, int, int, float] | None = None
        for s in self.candidates(g, capacity):
            run = history.run_stats(partition, job.task_type, s)
            wait = history.wait_stats(partition, job.task_type, s)
            if s != g and wait.count < self.min_samples:
                continue
            expected_run = self._expected_run(job.duration, g, s, base_run.mean, run.mean, run.count)
            score = (wait.mean + expected_run / speed, 0 if s == g else 1, s, expected_run)
            if best is None or score[:3] < best[:3]:
                best = score
        assert best is not None  # the request itself always qualifies
        s = best[2]
        return SizeChoice(s, job.duration if s == g else scaled_run(job.duration, g, s, self.efficiency))

    def _expected_run(
        self, duration: float, g: int, s: int, base_mean: float, mean: float, count: int
    ) -> float:
        if s == g:
            return duration
        model = scaled_run(duration, g, s, self.efficiency)
        if count < self.min_samples or base_mean <= 0:
            return model
        fastest, slowest = sorted((duration * g / s, duration))
        return min(max(duration * mean / base_mean, fastest), slowest)
