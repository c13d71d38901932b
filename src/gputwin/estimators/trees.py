"""LightGBM behind one function: fit the run-time model on feature rows (imports it lazily).

One thread and LightGBM's deterministic mode, so a seed fixes the model bit for bit; the first
columns of `features.FEATURES` are categories (integer codes). A leaf needs LightGBM's default 20
rows, or a 20th of a training set under 400 rows (`min_leaf`): on a small site's first fit (100
jobs on the SLURM test cluster's sacct history) the fixed 20 could not split off the dozen slow
jobs, and the online model lost to the running mean (Spearman 0.42 against 0.54; 0.55 with it).
Fits on 400 rows or more, every Philly and Alibaba fit among them, are unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from gputwin.estimators.features import CATEGORICAL

if TYPE_CHECKING:
    from gputwin.estimators.online import LearnedConfig


# LightGBM's optional integrations: `lightgbm.compat` imports each one that is installed, and
# gputwin uses only `train` and `Booster`. scikit-learn alone (with what it pulls in) took 2.9 s of
# the 4.3 s `import lightgbm` on this host, load ~5 (1.3 s without it): more than the whole QSSF
# replay of the Philly-shaped trace with the history estimator.
OPTIONAL = ("sklearn", "pandas", "dask", "pyarrow", "datatable", "graphviz", "matplotlib")


def lightgbm_module() -> Any:
    """`lightgbm`, imported without the integrations in OPTIONAL unless they are loaded already.

    A `None` in `sys.modules` makes an import raise ImportError (the import system's documented
    rule), which is how `lightgbm.compat` learns a package is absent; the entries are removed
    again at once, so a later `import sklearn` in the same process works as usual."""
    if "lightgbm" in sys.modules:
        return sys.modules["lightgbm"]
    hidden = [name for name in OPTIONAL if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]
    try:
        import lightgbm
    finally:
        for name in hidden:
            if name in sys.modules and sys.modules[name] is None:
                del sys.modules[name]
    return lightgbm


def params(config: LearnedConfig) -> dict[str, Any]:
    return {
        "objective": "regression", "num_leaves": config.leaves, "learning_rate": 0.1,
        "min_data_in_leaf": 20, "num_threads": 1, "deterministic": True, "force_row_wise": True,
        "seed": config.seed, "verbose": -1, "max_cat_to_onehot": 16,
    }  # fmt: skip


def min_leaf(rows: int) -> int:
    """LightGBM's default 20 rows a leaf from 400 rows up; a 20th of the rows (at least 5) below."""
    return min(20, max(5, rows // 20))


def fit(rows: Sequence[Sequence[float]] | Any, targets: Sequence[float] | Any, config: LearnedConfig) -> Any:
    """A LightGBM Booster predicting log(1 + run seconds) from `rows` (lists, or a 2-D numpy array);
    its training Dataset stays attached (`booster.train_set`: the bins a warm refit may reuse)."""
    lightgbm = lightgbm_module()

    data = _dataset(rows, targets, None)
    # keep_training_booster: the same trees without the text round trip train() otherwise makes.
    # A leaf needs 20 jobs, or a 20th of a small training set: a small site's first fit (100 jobs,
    # a dozen of them slow) could otherwise not split its rare long jobs off (see `min_leaf`).
    settings = {**params(config), "min_data_in_leaf": min_leaf(len(targets))}
    return lightgbm.train(settings, data, num_boost_round=config.rounds, keep_training_booster=True)


def boost(booster: Any, rows: Any, targets: Any, config: LearnedConfig, bins: Any = None) -> Any:
    """A new Booster: `booster`'s trees and `config.warm_rounds` more fitted to the residuals of its
    predictions on `rows` (a warm refit; LightGBM's `init_model`). With `bins` (a Dataset that `fit`
    built) the rows are binned by its bin mappers: no bin finding. Not LightGBM's in-place
    `Booster.update(train_set=...)`, which would spare the re-scoring of the window (LightGBM
    predicts it with every tree for `init_model`): resetting a booster's training data corrupted its
    memory here, on windows of the same size too (LightGBM 4.7: "Check failed:
    (best_split_info.right_count) > (0)", then a crash in malloc, on both shared traces)."""
    lightgbm = lightgbm_module()

    settings = {**params(config), "min_data_in_leaf": min_leaf(len(targets))}
    data = _dataset(rows, targets, bins)
    return lightgbm.train(settings, data, num_boost_round=config.warm_rounds, init_model=booster,
                          keep_training_booster=True)  # fmt: skip


def _dataset(rows: Any, targets: Any, bins: Any) -> Any:
    import numpy as np

    lightgbm = lightgbm_module()
    x, y = np.asarray(rows, dtype=np.float64), np.asarray(targets, dtype=np.float64)
    return lightgbm.Dataset(x, y, categorical_feature=list(CATEGORICAL), params={"verbose": -1},
                            reference=bins)  # fmt: skip
