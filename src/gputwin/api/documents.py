"""The YAML side of the loader: files of gputwin.io/v1alpha1 documents parsed into typed resources.

`read_documents` parses a file or a directory of `*.yaml`/`*.yml` (multi-document) into typed
resources (pydantic models), keeping where each came from; `yaml_cluster` checks them across
objects (`gputwin.api.validate`) and converts them to the core's ClusterSpec. `gputwin.api.loader`
imports this module only for a YAML cluster, so a CSV cluster loads no pydantic model (issue 17).
Every user mistake becomes a `ClusterError` whose lines read `FILE[:docN]: field.path: reason`.
Files are read within the bounds of `gputwin.api.yamlfiles` (regular files, size, depth).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from pydantic import ValidationError

from gputwin.api import yamlfiles
from gputwin.api.convert import cluster_spec
from gputwin.api.problems import ClusterError, Problem, validation_problems
from gputwin.api.v1alpha1 import KINDS, GPUPartition, Resource, SchedulingPolicy, SwitchTopology
from gputwin.api.validate import Document, check_cluster
from gputwin.api.yamlfiles import Budget, YamlFileError, list_files, read_text
from gputwin.core.model import ClusterSpec

R = TypeVar("R", SwitchTopology, GPUPartition, SchedulingPolicy)


def yaml_cluster(path: Path) -> ClusterSpec:
    """The cluster declared in CR YAML at `path` (a file or a directory), checked and converted."""
    documents = read_documents(path)
    problems = check_cluster(documents, str(path))
    if not any(isinstance(d.resource, GPUPartition) for d in documents):
        # A stored cluster may gain its partitions later; a cluster to run or render needs one now.
        problems.append(Problem(str(path), "kind", "no GPUPartition found; at least one is required"))
    if problems:
        raise ClusterError(problems)
    return cluster_spec(
        _only(documents, SwitchTopology)[0],
        _only(documents, GPUPartition),
        _only(documents, SchedulingPolicy),
    )


def load_documents(path: Path) -> list[Resource]:
    """Every resource in a YAML file or a directory of them, in file then document order."""
    return [d.resource for d in read_documents(Path(path))]


def read_documents(path: Path) -> list[Document]:
    """Like `load_documents`, keeping where each resource came from (`FILE:docN`)."""
    documents: list[Document] = []
    problems: list[Problem] = []
    budget = Budget()
    for file in _yaml_files(path):
        found, bad = _read_file(file, budget)
        documents += found
        problems += bad
    if problems:
        raise ClusterError(problems)
    return documents


def _only(documents: list[Document], kind: type[R]) -> list[R]:
    return [d.resource for d in documents if isinstance(d.resource, kind)]


def _yaml_files(path: Path) -> list[Path]:
    if path.is_dir():
        try:
            files = list_files(path, (".yaml", ".yml"))
        except (YamlFileError, OSError) as exc:
            raise ClusterError([Problem(str(path), "path", _reason(exc))]) from None
        if not files:
            raise ClusterError([Problem(str(path), "path", "directory holds no *.yaml or *.yml files")])
        return files
    if not path.exists():
        raise ClusterError([Problem(str(path), "path", "no such file")])
    return [path]


def _reason(exc: YamlFileError | OSError) -> str:
    return exc.reason if isinstance(exc, YamlFileError) else exc.strerror or type(exc).__name__


def _read_file(file: Path, budget: Budget) -> tuple[list[Document], list[Problem]]:
    where = str(file)
    documents: list[Document] = []
    problems: list[Problem] = []
    try:
        for index, data in yamlfiles.documents(read_text(file, budget)):
            if data is None:  # a bare `---` or a comment-only document
                continue
            resource, bad = _parse(f"{where}:doc{index}", data)
            documents += [Document(f"{where}:doc{index}", resource)] if resource is not None else []
            problems += bad
    except YamlFileError as exc:
        problems.append(Problem(where if exc.doc is None else f"{where}:doc{exc.doc}", exc.field, exc.reason))
    if not documents and not problems:
        problems.append(Problem(where, "documents", "no YAML documents found"))
    return documents, problems


def _parse(where: str, data: Any) -> tuple[Resource | None, list[Problem]]:
    """One YAML document as a typed resource, or the problems that stop it being one."""
    if not isinstance(data, dict):
        return None, [
            Problem(
                where, "document", f"expected a mapping (apiVersion, kind, ...), got {type(data).__name__}"
            )
        ]
    kind = data.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        got = "missing" if kind is None else f"unknown kind {kind!r:.80}"
        return None, [Problem(where, "kind", f"{got}; expected one of {', '.join(sorted(KINDS))}")]
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, validation_problems(where, exc)
