"""Read gputwin resources from YAML files and turn a declared cluster into the core's ClusterSpec.

`load_documents` parses a file or a directory of `*.yaml`/`*.yml` (multi-document) into typed
resources. `load_cluster` does that, runs the cross-object checks of `gputwin.api.validate`, and
converts; given a `.csv` it reads a Helios VC table instead. Every user mistake becomes a
`ClusterError` whose lines read `FILE[:docN]: field.path: reason`; none surfaces as a traceback.

The YAML side (pydantic models, the cross-object checks) lives in `gputwin.api.documents` and is
imported on first use: `gputwin simulate` of a VC table never builds a model (issue 17, start-up).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from gputwin.api.helios import load_vc_table
from gputwin.api.problems import ClusterError, Problem
from gputwin.core.model import ClusterSpec

if TYPE_CHECKING:
    from gputwin.api.v1alpha1 import Resource
    from gputwin.api.validate import Document


def load_cluster(path: Path, *, gpus_per_node: int = 8, nodes_per_switch: int = 16) -> ClusterSpec:
    """The cluster declared at `path`: CR YAML (file or directory) or a Helios VC table (`.csv`).

    `gpus_per_node` and `nodes_per_switch` shape the CSV layout only; YAML declares its own.
    """
    path = Path(path)
    if path.suffix.lower() == ".csv":
        if gpus_per_node < 1 or nodes_per_switch < 1:
            raise ValueError("gpus_per_node and nodes_per_switch must be >= 1")
        _require_file(path)
        return load_vc_table(path, gpus_per_node=gpus_per_node, nodes_per_switch=nodes_per_switch)
    from gputwin.api.documents import yaml_cluster

    return yaml_cluster(path)


def load_documents(path: Path) -> list[Resource]:
    """Every resource in a YAML file or a directory of them, in file then document order."""
    from gputwin.api.documents import load_documents as load

    return load(path)


def read_documents(path: Path) -> list[Document]:
    """Like `load_documents`, keeping where each resource came from (`FILE:docN`)."""
    from gputwin.api.documents import read_documents as read

    return read(path)


def _require_file(path: Path) -> None:
    if not path.is_file():
        reason = "is a directory, expected a file" if path.is_dir() else "no such file"
        raise ClusterError([Problem(str(path), "path", reason)])
