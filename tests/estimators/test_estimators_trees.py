"""`trees.lightgbm_module`: LightGBM loads without its optional integrations, and they still import later."""

from __future__ import annotations

import subprocess
import sys


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
