"""Run-time estimators beyond the core's running mean: a learned one (LightGBM) and the oracle.

`factory(name, jobs, seed)` is what the simulator injects through `SchedulerOptions.estimator`;
`ESTIMATORS` names the choices of `gputwin simulate --estimator`. Nothing heavy is imported here:
numpy and LightGBM load when a model is first fitted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from gputwin.core.history import Estimator, HistoryEstimator
from gputwin.core.model import JobSpec

if TYPE_CHECKING:
    from gputwin.estimators.online import LearnedConfig

ESTIMATORS = ("history", "learned", "oracle")


def factory(name: str, jobs: Sequence[JobSpec] = (), seed: int = 0, origin: float = 0.0,
            record: bool = False, config: LearnedConfig | None = None) -> Callable[[], Estimator]:  # fmt: skip
    """A builder of a fresh estimator `name` (one of ESTIMATORS); `jobs` is the trace to be replayed,
    which the learned estimator reads for submit-time fields only, to predict in batches; `origin`
    is the epoch time of the trace's 0 (`TraceResult.origin`), for the submit hour and weekday;
    `record` keeps every prediction of the learned estimator (`LearnedEstimator.prediction`);
    `config` is the learned one's (default `LearnedConfig(seed=seed)`)."""
    if name == "history":
        return HistoryEstimator
    if name == "oracle":
        from gputwin.estimators.online import OracleEstimator

        return OracleEstimator
    if name == "learned":
        from gputwin.estimators.online import LearnedConfig, LearnedEstimator

        chosen = LearnedConfig(seed=seed) if config is None else config
        return lambda: LearnedEstimator(chosen, upcoming=jobs, record=record, origin=origin)
    raise ValueError(f"unknown estimator {name!r}; known: {', '.join(ESTIMATORS)}")
