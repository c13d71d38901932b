"""`trees.lightgbm_module`: LightGBM loads without its optional integrations, and they still import later;
`trees.fit`'s leaf size on small training sets (`min_leaf`)."""

from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from gputwin.estimators.online import LearnedConfig
from gputwin.estimators.trees import fit, min_leaf


def test_lightgbm_loads_without_its_integrations_which_still_import_afterwards() -> None:
    code = (
        "import sys, importlib.util\n"
        "from gputwin.estimators.trees import OPTIONAL, fit, lightgbm_module\n"
        "from gputwin.estimators.online import LearnedConfig\n"
        "lightgbm_module()\n"
        "assert not [n for n in OPTIONAL if n in sys.modules], [n for n in OPTIONAL if n in sys.modules]\n"
        "rows = [[float(i % 3), 0.0, 0.0] + [float(i)] * 12 for i in range(200)]\n"
        "booster = fit(rows, [float(i % 7) for i in range(200)], LearnedConfig(rounds=3))\n"
        "assert booster.num_feature() == 15\n"
        "if importlib.util.find_spec('sklearn') is not None:\n"
        "    import sklearn  # the hiding entries are gone\n"
        "print('ok')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


@pytest.mark.parametrize(
    ("rows", "leaf"),
    [pytest.param(50, 5, id="tiny-floor"), pytest.param(100, 5, id="small-site-first-fit"),
     pytest.param(360, 18, id="sacct-fixture"), pytest.param(400, 20, id="lightgbm-default-from-400"),
     pytest.param(10_000, 20, id="philly-window")],
)  # fmt: skip
def test_a_leaf_needs_a_20th_of_a_small_training_set_and_20_rows_from_400(rows: int, leaf: int) -> None:
    assert min_leaf(rows) == leaf


def test_a_first_fit_on_100_jobs_splits_off_its_12_slow_ones() -> None:
    """What the small-site first fit meets (benchmarks/estimator.py, sacct_testcluster): few slow
    jobs among the first 100 finished. With LightGBM's fixed 20 a leaf, 12 of them cannot be split
    off and every job is predicted the mean (about 4.5 s here)."""
    rows = [[0.0, 0.0, 0.0, float(i < 12)] + [0.0] * 11 for i in range(100)]
    targets = [math.log1p(25.0 if i < 12 else 2.0) for i in range(100)]
    predicted = fit(rows, targets, LearnedConfig()).predict(np.asarray(rows[:1] + rows[-1:]), num_threads=1)
    slow, fast = (math.expm1(float(v)) for v in predicted)
    assert 12.5 < slow < 50 and 1 < fast < 4
