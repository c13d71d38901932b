"""Read gputwin resources from YAML files and turn a declared cluster into the core's ClusterSpec.

`load_documents` parses a file or a directory of `*.yaml`/`*.yml` (multi-document) into typed
resources. `load_cluster` does that, runs the cross-object checks of `gputwin.api.validate`, and
converts; given a `.csv` it reads a Helios VC table instead. Every user mistake becomes a
`ClusterError` whose lines read `FILE[:docN]: field.path: reason`; none surfaces as a traceback.
"""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import ValidationError

from gputwin.api.convert import cluster_spec
from gputwin.api.helios import load_vc_table
from gputwin.api.problems import ClusterError, Problem, validation_problems
from gputwin.api.v1alpha1 import KINDS, GPUPartition, Resource, SchedulingPolicy, SwitchTopology
from gputwin.api.validate import Document, check_cluster
from gputwin.core.model import ClusterSpec

R = TypeVar("R", SwitchTopology, GPUPartition, SchedulingPolicy)


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
    documents = read_documents(path)
    problems = check_cluster(documents, str(path))
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
    for file in _yaml_files(path):
        found, bad = _read_file(file)
        documents += found
        problems += bad
    if problems:
        raise ClusterError(problems)
    return documents


def _only(documents: list[Document], kind: type[R]) -> list[R]:
    return [d.resource for d in documents if isinstance(d.resource, kind)]


def _require_file(path: Path) -> None:
    if not path.is_file():
        reason = "is a directory, expected a file" if path.is_dir() else "no such file"
        raise ClusterError([Problem(str(path), "path", reason)])


def _yaml_files(path: Path) -> list[Path]:
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".yaml", ".yml") and p.is_file())
        if not files:
            raise ClusterError([Problem(str(path), "path", "directory holds no *.yaml or *.yml files")])
        return files
    _require_file(path)
    return [path]


def _read_file(file: Path) -> tuple[list[Document], list[Problem]]:
    where = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        return [], [Problem(where, "encoding", f"not UTF-8 text ({exc.reason})")]
    except OSError as exc:
        return [], [Problem(where, "path", exc.strerror or str(exc))]
    documents: list[Document] = []
    problems: list[Problem] = []
    index = 0
    try:
        for index, data in enumerate(yaml.load_all(text, Loader=_StrictLoader), start=1):
            if data is None:  # a bare `---` or a comment-only document
                continue
            resource, bad = _parse(f"{where}:doc{index}", data)
            documents += [Document(f"{where}:doc{index}", resource)] if resource is not None else []
            problems += bad
    except yaml.YAMLError as exc:
        problems.append(_yaml_problem(f"{where}:doc{index + 1}", exc))
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
        got = "missing" if kind is None else f"unknown kind {kind!r}"
        return None, [Problem(where, "kind", f"{got}; expected one of {', '.join(sorted(KINDS))}")]
    try:
        return model.model_validate(data), []
    except ValidationError as exc:
        return None, validation_problems(where, exc)


def _yaml_problem(where: str, exc: yaml.YAMLError) -> Problem:
    """A syntax error located by line and column (1-based, as editors count)."""
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        at = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "yaml"
        return Problem(where, at, exc.problem or exc.context or "invalid YAML")
    return Problem(where, "yaml", str(exc))


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that rejects duplicate keys and leaves dates as strings.

    PyYAML keeps the last of two equal keys silently (a second `spec:` would erase the first), and
    turns `2024-05-01` into a date where the Kubernetes API server sees a string.
    """

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeLoader itself reports unhashable keys
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping",
                    node.start_mark,
                    f"found duplicate key {key!r}",
                    key_node.start_mark,
                )
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_StrictLoader.yaml_implicit_resolvers = {
    first: [(tag, regex) for tag, regex in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
