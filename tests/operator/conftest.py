"""The real control plane for the operator's end-to-end tests: `kube`, `kubectl`, `k8s_bin`.

The fixtures are those of `tests/k8s/conftest.py`, loaded from that file (a conftest is not an
importable module: tests/ has no packages) and re-exported, so there is one definition of how the
control plane starts, skips and stops. Pytest keys fixtures by where they are exposed: a session
running both tests/k8s and tests/operator starts one control plane for each directory (about 6 s
and 0.5 GB more). If a third directory needs it, move these fixtures to tests/conftest.py.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _load_k8s_conftest() -> ModuleType:
    path = Path(__file__).resolve().parents[1] / "k8s" / "conftest.py"
    spec = importlib.util.spec_from_file_location("gputwin_tests_k8s_fixtures", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_k8s = _load_k8s_conftest()
k8s_bin = _k8s.k8s_bin
kube = _k8s.kube
kubectl = _k8s.kubectl
