"""LightGBM behind one function: fit the run-time model on feature rows (imports it lazily).

One thread and LightGBM's deterministic mode, so a seed fixes the model bit for bit; the first
columns of `features.FEATURES` are categories (integer codes).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gputwin.estimators.features import CATEGORICAL

if TYPE_CHECKING:
    from gputwin.estimators.online import LearnedConfig


def params(config: LearnedConfig) -> dict[str, Any]:
    return {
        "objective": "regression", "num_leaves": config.leaves, "learning_rate": 0.1,
        "min_data_in_leaf": 20, "num_threads": 1, "deterministic": True, "force_row_wise": True,
        "seed": config.seed, "verbose": -1, "max_cat_to_onehot": 16,
    }  # fmt: skip


def fit(rows: Sequence[Sequence[float]], targets: Sequence[float], config: LearnedConfig) -> Any:
    """A LightGBM Booster predicting log(1 + run seconds) from `rows`."""
    import lightgbm
    import numpy as np

    data = lightgbm.Dataset(np.asarray(rows, dtype=np.float64), np.asarray(targets, dtype=np.float64),
                            categorical_feature=list(CATEGORICAL), params={"verbose": -1})  # fmt: skip
    return lightgbm.train(params(config), data, num_boost_round=config.rounds)
