"""Files shipped inside the gputwin package, found through importlib.resources."""

from __future__ import annotations

import atexit
from contextlib import ExitStack
from importlib.resources import as_file, files
from pathlib import Path

DEMO_CLUSTER = "demo-cluster.yaml"
DEMO_TRACE = "demo-trace.csv"

# Holds temporary copies made for zipped installs until the interpreter exits.
_extracted = ExitStack()
atexit.register(_extracted.close)


def demo_cluster_path() -> Path:
    """Path of the embedded demo cluster: 32 nodes x 8 GPUs, 4 leaves, 2 spines, 3 partitions."""
    return _data_path(DEMO_CLUSTER)


def demo_trace_path() -> Path:
    """Path of the embedded demo trace: 3,375 Philly-shaped jobs of task types train, dev, infer."""
    return _data_path(DEMO_TRACE)


def _data_path(name: str) -> Path:
    resource = files("gputwin").joinpath("data", name)
    if isinstance(resource, Path):  # a normal or editable install: the file itself
        return resource
    # Zipped install: callers expect a real path, so extract a copy that outlives this call.
    return Path(_extracted.enter_context(as_file(resource)))
