"""Manifests as `gputwin apply` and `gputwin delete -f` read them, with the API server's error style.

`read_manifests` turns files and folders (multi-document YAML, `kind: List` expanded; `-` for
standard input, located as `<stdin>`) into `Manifest`s located as `FILE:docN`; `schema_errors` validates each against its kind's model and
words every failure like kube-apiserver does (`The GPUJob "x" is invalid: spec.gpus: Invalid
value: 0: should be greater than or equal to 1`); `cluster_errors` runs the cross-object checks
over what the state would hold after the apply, and reports only problems the apply would add.

Besides the gputwin kinds, core/v1 ConfigMaps are accepted (a TraceReplay may read its trace from
one), validated minimally: a name, and `data` mapping string keys to string values.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from gputwin.api.bodies import Obj
from gputwin.api.crdgen import NAMES
from gputwin.api.meta import API_VERSION, GROUP
from gputwin.api.problems import Problem, field_path
from gputwin.api.v1alpha1 import KINDS
from gputwin.api.validate import Document, check_cluster
from gputwin.api.yamlfiles import Budget, YamlFileError, documents, list_files, read_stream, read_text

STDIN = Path("-")  # `-f -`: the manifests come on standard input (named `<stdin>` in errors)
STDIN_NAME = "<stdin>"
CLUSTER_KINDS = ("SwitchTopology", "GPUPartition", "SchedulingPolicy")
SERVER_FIELDS = ("creationTimestamp", "generation", "resourceVersion", "uid", "managedFields")
CONFIGMAP = "ConfigMap"  # the one core/v1 kind the emulator keeps (apiVersion v1, namespaced)
CONFIGMAP_KEY = re.compile(r"[-._a-zA-Z0-9]+")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class ManifestError(Exception):
    """User mistakes in manifests: one line per problem, nothing applied."""

    def __init__(self, lines: Sequence[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = tuple(lines)


@dataclass(frozen=True, slots=True)
class Manifest:
    """One object to apply or delete, as written (status and server-owned metadata left out)."""

    where: str
    obj: Obj

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def name(self) -> str:
        return _text(self._meta.get("name", ""))

    @property
    def namespace(self) -> str | None:
        namespace = self._meta.get("namespace")
        return _text(namespace) if namespace else None

    @property
    def _meta(self) -> Obj:
        # Not a Body view: a manifest is read before it is validated, so metadata may be anything.
        meta = self.obj.get("metadata")
        return meta if isinstance(meta, dict) else {}


def _text(value: Any) -> str:
    """A name as it goes into one line of output: printable, at most 80 characters (the schema
    refuses anything else; this only keeps the refusal on one line)."""
    text = value if isinstance(value, str) else _shown(value)
    text = text if text.isprintable() else json.dumps(text)[1:-1]
    return text if len(text) <= 80 else text[:80] + "..."


def resource(kind: str) -> str:
    """`gpujob.gputwin.io` (`configmap` for the core kind), as kubectl names a kind in its output."""
    return "configmap" if kind == CONFIGMAP else f"{kind.lower()}.{GROUP}"


def plural(kind: str) -> str:
    """`gpujobs.gputwin.io` (`configmaps`), as the API server names a resource in errors."""
    return "configmaps" if kind == CONFIGMAP else f"{NAMES[kind].plural}.{GROUP}"


def read_manifests(
    paths: Iterable[Path], default_namespace: str = "default", validate: bool = False
) -> list[Manifest]:
    """Every object in these files and folders (`*.yaml`, `*.yml`, `*.json`), in order.

    With `validate`, each is also checked against its kind's schema; all problems of all files
    are raised together as one ManifestError.
    """
    found: list[Manifest] = []
    errors: list[str] = []
    budget = Budget()
    for path in paths:
        for file in _files(Path(path), errors):
            found += _read_file(file, default_namespace, errors, budget)
    if validate:
        errors += schema_errors(found)
    if not found and not errors:
        errors.append("no objects found in the files given")
    if errors:
        raise ManifestError(errors)
    return found


def _files(path: Path, errors: list[str]) -> list[Path]:
    if path == STDIN:
        return [path]
    if path.is_dir():
        try:
            files = list_files(path, (".yaml", ".yml", ".json"))
        except YamlFileError as exc:
            errors.append(f"{path}: {exc}")
            return []
        except OSError as exc:
            errors.append(f"{path}: path: {exc.strerror or type(exc).__name__}")
            return []
        if not files:
            errors.append(f"{path}: no *.yaml, *.yml or *.json files in the directory")
        return files
    if not path.exists():
        errors.append(f'the path "{path}" does not exist')
        return []
    return [path]


def _read_file(file: Path, namespace: str, errors: list[str], budget: Budget) -> list[Manifest]:
    found: list[Manifest] = []
    name = STDIN_NAME if file == STDIN else str(file)
    try:
        text = read_stream(sys.stdin.buffer, budget) if file == STDIN else read_text(file, budget)
        for index, data in documents(text):
            if data is not None:
                found += _objects(f"{name}:doc{index}", data, namespace, errors)
    except YamlFileError as exc:
        errors.append(f"{name}{'' if exc.doc is None else f':doc{exc.doc}'}: {exc}")
    return found


def _objects(where: str, data: Any, namespace: str, errors: list[str]) -> list[Manifest]:
    """One document's objects: itself, or the items of a `kind: List`."""
    if isinstance(data, dict) and data.get("kind") == "List" and isinstance(data.get("items"), list):
        out: list[Manifest] = []
        for i, item in enumerate(data["items"]):
            out += _objects(f"{where}.items[{i}]", item, namespace, errors)
        return out
    if not isinstance(data, dict):
        errors.append(f"{where}: expected an object with apiVersion and kind, got {type(data).__name__}")
        return []
    kind, version = data.get("kind"), data.get("apiVersion")
    if not kind or not version:
        errors.append(f"{where}: {'kind' if not kind else 'apiVersion'} not set")
        return []
    core = kind == CONFIGMAP and version == "v1"
    if not core and (not isinstance(kind, str) or kind not in KINDS or version != API_VERSION):
        errors.append(f'{where}: no matches for kind "{kind}" in version "{version}" (gputwin knows '
                      f'{", ".join(sorted(KINDS))} in {API_VERSION}, and ConfigMap in v1)')  # fmt: skip
        return []
    obj = {k: v for k, v in data.items() if k != "status"}  # status is the controller's to write
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        meta = {k: v for k, v in meta.items() if k not in SERVER_FIELDS}
        if core or KINDS[kind].scope == "Namespaced":
            meta.setdefault("namespace", namespace)
        else:
            meta.pop("namespace", None)
        obj["metadata"] = meta
    return [Manifest(where, obj)]


# --- validation -----------------------------------------------------------------------------------


def schema_errors(manifests: Sequence[Manifest]) -> list[str]:
    """Each object against its kind's model, and no object twice; API-server-style lines."""
    errors: list[str] = []
    first: dict[tuple[str, str | None, str], str] = {}
    for m in manifests:
        if m.kind == CONFIGMAP:
            causes = _configmap_causes(m.obj)
            if causes:
                body = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
                errors.append(f'{m.where}: The {m.kind} "{m.name}" is invalid: {body}')
                continue
        else:
            try:
                KINDS[m.kind].model_validate(m.obj)
            except ValidationError as exc:
                causes = [_cause(err) for err in exc.errors()]
                body = causes[0] if len(causes) == 1 else "[" + ", ".join(causes) + "]"
                errors.append(f'{m.where}: The {m.kind} "{m.name}" is invalid: {body}')
                continue
        key = (m.kind, m.namespace, m.name)
        if key in first:
            errors.append(f'{m.where}: The {m.kind} "{m.name}" is invalid: metadata.name: Duplicate value: '
                          f'"{m.name}": also in {first[key]}')  # fmt: skip
        first.setdefault(key, m.where)
    return errors


def _configmap_causes(obj: Obj) -> list[str]:
    """A ConfigMap's problems, worded like the API server's: a valid name, string data only."""
    causes = []
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    if not name:
        causes.append("metadata.name: Required value: name or generateName is required")
    elif not isinstance(name, str) or len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
        causes.append(f"metadata.name: Invalid value: {_shown(name)}: a lowercase RFC 1123 subdomain must "
                      "consist of lower case alphanumeric characters, '-' or '.'")  # fmt: skip
    data = obj.get("data")
    if data is not None and not isinstance(data, dict):
        causes.append(f"data: Invalid value: {_shown(data)}: must be a map of strings")
    for key, value in (data or {}).items() if isinstance(data, dict) else ():
        if not isinstance(key, str) or not CONFIGMAP_KEY.fullmatch(key):
            causes.append(f"data[{key}]: Invalid value: {_shown(key)}: a valid config key must consist of "
                          "alphanumeric characters, '-', '_' or '.'")  # fmt: skip
        elif not isinstance(value, str):
            causes.append(f"data[{key}]: Invalid value: {_shown(value)}: must be a string")
    return causes


def _cause(err: ErrorDetails) -> str:
    """One pydantic error as kube-apiserver's field.ErrorList would word it."""
    path = field_path(err["loc"])
    if err["type"] == "missing":
        return f"{path}: Required value"
    if err["type"] == "extra_forbidden":
        return f'{path}: Invalid value: unknown field "{path}"'
    shown = _shown(err.get("input")) or "null"
    message = err["msg"].removeprefix("Value error, ")
    message = (
        message[6:] if message.startswith("Input should") else message
    )  # "should be …", as the server says
    return f"{path}: Invalid value: {shown}: {message}"


def cluster_errors(stored: Sequence[Obj], manifests: Sequence[Manifest]) -> list[str]:
    """Cross-object problems the apply would add to the stored cluster (none if it adds no cluster kind)."""
    if not any(m.kind in CLUSTER_KINDS for m in manifests):
        return []
    before = {str(p) for p in _check(_stored_docs(stored))} if stored else set()
    applied = {(m.kind, m.name) for m in manifests}
    docs = [d for d in _stored_docs(stored) if tuple(d.where.split("/", 1)) not in applied]
    docs += [
        Document(m.where, KINDS[m.kind].model_validate(m.obj)) for m in manifests if m.kind in CLUSTER_KINDS
    ]
    names = {m.where: (m.kind, m.name) for m in manifests}
    objects = {m.where: m.obj for m in manifests} | {
        f"{o['kind']}/{o['metadata']['name']}": o for o in stored
    }
    lines = []
    for problem in _check(docs):
        if str(problem) in before:
            continue  # already there before this apply: not this apply's fault
        if problem.document == "cluster":
            lines.append(problem.reason)
            continue
        kind, _, name = problem.document.partition("/")
        kind, name = names.get(problem.document, (kind, name))
        # The offending value, as the server quotes it; `kind` and `metadata.name` speak for themselves.
        plain = problem.field in ("kind", "metadata.name")
        value = "" if plain else _shown(_value_at(objects.get(problem.document), problem.field))
        cause = f"{problem.field}: Invalid value: {value}: " if value else f"{problem.field}: "
        lines.append(f'{problem.document}: The {kind} "{name}" is invalid: {cause}{problem.reason}')
    return lines


def _value_at(obj: Obj | None, field: str) -> Any:
    """The value a dotted field path (`spec.nodeGroups[0].nodes`) points at in `obj`, or None."""
    value: Any = obj
    for part in re.findall(r"[^.\[\]]+", field):
        if isinstance(value, list) and part.isdigit() and int(part) < len(value):
            value = value[int(part)]
        elif isinstance(value, dict):
            value = value.get(part)
        else:
            return None
    return value


def _shown(value: Any) -> str:
    """A value as the API server quotes it in errors: JSON, `"object"` or `"array"`."""
    if isinstance(value, dict):
        return '"object"'
    if isinstance(value, list):
        return '"array"'
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**40:
        return '"a number of more than 40 digits"'  # json.dumps fails past 4300 digits
    shown = "" if value is None else json.dumps(value, default=repr)
    return shown if len(shown) <= 80 else shown[:80] + "..."  # an error stays one short line


def _stored_docs(stored: Sequence[Obj]) -> list[Document]:
    docs = []
    for obj in stored:
        try:
            model = KINDS[obj["kind"]].model_validate({k: v for k, v in obj.items() if k != "status"})
        except ValidationError:
            continue  # the controller reports it on the object itself
        docs.append(Document(f"{obj['kind']}/{obj['metadata']['name']}", model))
    return docs


def _check(docs: list[Document]) -> list[Problem]:
    return check_cluster(docs, "cluster")


__all__ = [
    "STDIN",
    "STDIN_NAME",
    "Manifest",
    "ManifestError",
    "cluster_errors",
    "plural",
    "read_manifests",
    "resource",
    "schema_errors",
]
