"""The real control plane for the watch tests: `kube`, `kubectl`, `k8s_bin`, loaded from
`tests/k8s/conftest.py` as `tests/operator/conftest.py` does (one definition of how it starts)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType


def _load_k8s_conftest() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "k8s" / "conftest.py"
    spec = importlib.util.spec_from_file_location("gputwin_tests_k8s_fixtures", path)
    assert spec is not None and spec.loader is not None
    if spec.name in sys.modules:  # tests/operator loaded it already in this session
        return sys.modules[spec.name]
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_k8s = _load_k8s_conftest()
k8s_bin = _k8s.k8s_bin
kube = _k8s.kube
kubectl = _k8s.kubectl
