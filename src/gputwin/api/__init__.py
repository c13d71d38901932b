"""The gputwin.io/v1alpha1 API: typed custom resources and the loader that turns them into a cluster.

    from gputwin.api import load_cluster
    cluster = load_cluster(Path("manifests/samples/two-leaf.yaml"))   # -> gputwin.core.model.ClusterSpec

Models live in `gputwin.api.v1alpha1`; cross-object checks in `gputwin.api.validate`.

The names below are imported on first use (PEP 562 `__getattr__`): importing a light submodule
(`gputwin.api.limits`, `gputwin.api.files`, `gputwin.api.helios`) imports this package first, and
an eager import here would build every pydantic model on the way (~0.3-0.5 s), which
`gputwin simulate` of a CSV cluster never uses (issue 17; tests/cli/test_cli_startup.py).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gputwin.api.loader import load_cluster, load_documents, read_documents
    from gputwin.api.problems import ClusterError, Problem
    from gputwin.api.resources import demo_cluster_path
    from gputwin.api.validate import Document, check_cluster

# name -> the submodule it comes from
_WHERE = {
    "ClusterError": "gputwin.api.problems",
    "Document": "gputwin.api.validate",
    "Problem": "gputwin.api.problems",
    "check_cluster": "gputwin.api.validate",
    "demo_cluster_path": "gputwin.api.resources",
    "load_cluster": "gputwin.api.loader",
    "load_documents": "gputwin.api.loader",
    "read_documents": "gputwin.api.loader",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups find it without calling back here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})
