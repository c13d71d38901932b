"""The scheduler's own knobs (`SchedulerOptions`): what is about the scheduler, not one partition.

`gputwin.core.cycle` reads them in every cycle; `gputwin.core.scheduler` re-exports the class,
where drivers import it from.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from gputwin.core.compat import helios_checkpoint_cost
from gputwin.core.frozen import Frozen
from gputwin.core.history import Estimator, TableEstimator


@dataclass(frozen=True, slots=True)
class SchedulerOptions(Frozen):
    """Knobs that are about the scheduler, not about one partition's policy.

    `release_lag` delays the end of preemptive jobs' runs (the reference simulator releases SRTF
    jobs one tick late); `wake_after_change` re-runs preemptive partitions one second after any
    change (its per-second loop does). `compat` selects compatibility placers and QSSF order
    ("helios"). `estimator` builds the run-time estimator of each Scheduler made with these options (a
    factory: an estimator learns, so two runs must not share one); else `estimates`, a fixed table;
    else `HistoryEstimator`.
    """

    checkpoint_cost: Callable[[int], float] = helios_checkpoint_cost
    release_lag: float = 0.0
    wake_after_change: bool = False
    backfill_depth: int = 256
    compat: str | None = None
    seed: int = 0
    estimates: TableEstimator | None = None
    estimator: Callable[[], Estimator] | None = None

    @staticmethod
    def helios(seed: int = 0, estimates: TableEstimator | None = None) -> SchedulerOptions:
        return SchedulerOptions(release_lag=1.0, wake_after_change=True, compat="helios", seed=seed,
                                estimates=estimates)  # fmt: skip
