"""What the scheduler has learnt from finished jobs: run-time and wait statistics.

One `JobHistory` feeds both learning-based decisions of the patent:
* QSSF (claim 6) asks `predict(job)`: the mean run time of earlier jobs of the same user and job
  name, falling back to the same user and name stem (`train-7` -> `train-`), the user, the task
  type, then everything seen. When nothing has been seen yet the estimator answers `UNKNOWN`
  (unless built with a `prior` of its own) and the qssf policy of the job's partition supplies
  its prior (`qssf_prior`, default `DEFAULT_PRIOR`): the history is learnt once for the whole
  cluster, the guess for the unknown is a per-partition setting.
* GPU sizing (claim 3) asks `run_stats` / `wait_stats` per partition, task type and GPU count.

Estimators are pluggable through the `Estimator` protocol; `HistoryEstimator` is the built-in one.
A trained model can implement `predict` and `observe` and be passed to the scheduler instead.
`TableEstimator` answers from a fixed table by job name (the reference simulator's estimate files,
read outside the core) and learns nothing.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Mapping, Protocol, Sequence

from gputwin.core.frozen import Frozen
from gputwin.core.model import JobSpec

_DIGITS = re.compile(r"\d+$")

# The run time, in seconds, QSSF assumes for a job like none seen before, unless the partition's
# policy sets `qssf_prior` (the value the core always used, so default results are unchanged).
DEFAULT_PRIOR = 3600.0
# What `predict` answers when it has nothing to go on (NaN: no real prediction ever equals it).
UNKNOWN = math.nan


def or_prior(predicted: float, prior: float) -> float:
    """`predicted`, or `prior` when it is `UNKNOWN`."""
    return prior if math.isnan(predicted) else predicted


class Mean:
    """A running mean (count and average), updated in O(1). A plain class, not a dataclass: one is
    made per group a job is the first of, and a dataclass's __init__ stays interpreted compiled."""

    __slots__ = ("count", "mean")

    def __init__(self, count: int = 0, mean: float = 0.0) -> None:
        self.count = count
        self.mean = mean

    def add(self, value: float) -> None:
        self.count += 1
        self.mean += (value - self.mean) / self.count


class Estimator(Protocol):
    """Predicts a job's run time (seconds on its requested GPUs) and learns from finished jobs.

    `predict` may answer `UNKNOWN` when it has nothing to go on; the caller then uses its prior.
    """

    def predict(self, job: JobSpec) -> float: ...

    def observe(self, job: JobSpec, run_seconds: float) -> None: ...


class HistoryEstimator:
    """Mean run time over the most specific group of earlier jobs that has any, else `prior`.

    The default prior is `UNKNOWN`, so each partition's qssf policy decides what an unknown job
    costs; a number here overrides every partition's `qssf_prior`.
    """

    def __init__(self, prior: float = UNKNOWN) -> None:
        self.prior = prior
        self._groups: dict[tuple[str, ...], Mean] = {}
        # A (user, name, task type)'s groups, most specific first: their keys never change, and
        # building them was most of the cost. `predict` makes empty groups too (a count of 0 is
        # skipped as a missing group was), so both calls share one lookup per job.
        self._means: dict[tuple[str, str, str], tuple[Mean, ...]] = {}

    def _means_of(self, job: JobSpec) -> tuple[Mean, ...]:
        return self._means_by((job.user, job.name, job.task_type))

    def predict(self, job: JobSpec) -> float:
        return self.predict_from(self._means_of(job))

    def means_of(self, job: JobSpec) -> tuple[Mean, ...]:
        """The groups `predict` and `observe` read for `job`, most specific first: the same objects
        for every job of its (user, name, task type), so a caller may keep them from the one call
        to the other (`Scheduler` keeps them on the job: one lookup a job instead of two)."""
        ident = (job.user, job.name, job.task_type)
        means = self._means.get(ident)  # `_means_by`'s look-up, here: a call less per job queued
        return self._means_by(ident) if means is None else means

    def predict_from(self, means: tuple[Mean, ...]) -> float:
        """`predict` of a job whose groups are `means` (`means_of`)."""
        for group in means:
            if group.count:
                return group.mean
        return self.prior

    def predict_group(self, idents: Sequence[tuple[str, str, str]]) -> list[float]:
        """`predict` of a job of each (user, name, task type), in order: the same numbers, without
        a `JobSpec` per job (a dataclass's __init__ stays interpreted compiled: a forecast's plan
        built one per pending job to ask). Learnt nothing yet, every answer is the prior."""
        if not self._groups:  # `observe` makes groups; `predict` makes them too, all of count 0
            return [self.prior] * len(idents)
        out, prior, means_of = [], self.prior, self._means_by
        for ident in idents:
            value = prior
            for group in means_of(ident):
                if group.count:
                    value = group.mean
                    break
            out.append(value)
        return out

    def _means_by(self, ident: tuple[str, str, str]) -> tuple[Mean, ...]:
        """`_means_of` by (user, name, task type)."""
        means = self._means.get(ident)
        if means is None:
            user, name, task_type = ident
            stem = _DIGITS.sub("", name)
            keys = (("name", user, name), ("stem", user, stem), ("user", user), ("type", task_type), ("all",))
            means = self._means[ident] = tuple(self._groups.setdefault(k, Mean()) for k in keys)
        return means

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        observe_means(self._means_of(job), run_seconds)


def observe_means(means: tuple[Mean, ...], run_seconds: float) -> None:
    """`HistoryEstimator.observe` of a job whose groups are `means` (`HistoryEstimator.means_of`)."""
    for mean in means:  # `Mean.add`, inlined: five groups per finished job
        mean.count += 1
        mean.mean += (run_seconds - mean.mean) / mean.count


@dataclass(frozen=True, eq=False)
class TableEstimator(Frozen):
    """Fixed run-time estimates by job name; `UNKNOWN` for a name the table lacks.

    Stateless (`observe` learns nothing), so one table can be shared by every run that uses it.
    """

    by_name: Mapping[str, float]

    def predict(self, job: JobSpec) -> float:
        return self.by_name.get(job.name, UNKNOWN)

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        return None


class Points:
    """Each job's point by job id, frozen: a forecast's replays rank by its estimator's points and
    learn nothing (`gputwin.twin.forecast`). Here, compiled: the scheduler asks it once per job
    queued and tells it once per job ended, every replay (interpreted, ~4 % of a replay)."""

    def __init__(self, points: dict[str, float]) -> None:
        self.points = points

    def predict(self, job: JobSpec) -> float:
        return self.points.get(job.job_id, UNKNOWN)

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        return None


class JobHistory:
    """Run and wait statistics by (partition, task type, GPU count), for GPU sizing."""

    def __init__(self) -> None:
        self._run: dict[tuple[str, str, int], Mean] = {}
        self._wait: dict[tuple[str, str, int], Mean] = {}

    def record(self, partition: str, job: JobSpec, gpus: int, run_seconds: float, wait: float) -> None:
        key = (partition, job.task_type, gpus)
        self._run.setdefault(key, Mean()).add(run_seconds)
        self._wait.setdefault(key, Mean()).add(wait)

    def run_stats(self, partition: str, task_type: str, gpus: int) -> Mean:
        return self._run.get((partition, task_type, gpus), Mean())

    def wait_stats(self, partition: str, task_type: str, gpus: int) -> Mean:
        return self._wait.get((partition, task_type, gpus), Mean())
