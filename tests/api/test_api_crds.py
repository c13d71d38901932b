"""The CRDs in crds/ are generated from the models, structural, described, and agree with the models.

A real kube-apiserver is not available here, so the structural-schema rules it applies are
re-checked by `structural_problems` (after apiextensions-apiserver's ValidateStructural and
ValidateCustomResourceDefinitionOpenAPISchema), and objects are validated with `jsonschema` against
the generated openAPIV3Schema, read the way the server reads it.
"""

from __future__ import annotations

import copy
import re
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from pydantic import BaseModel, Field, ValidationError

from gputwin.api.crdgen import HEADER, NAMES, crd_for, file_name, generate, main, schema_at
from gputwin.api.crdschema import SchemaError, structural_schema
from gputwin.api.problems import field_path
from gputwin.api.v1alpha1 import KINDS

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "crds"
SAMPLES = ROOT / "manifests" / "samples"
PRESERVE = "x-kubernetes-preserve-unknown-fields"
Schema = dict[str, Any]


@cache
def schema_of(kind: str) -> Schema:
    crd: Schema = crd_for(KINDS[kind])
    return crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]  # type: ignore[no-any-return]


# --- one source of truth --------------------------------------------------------------------------


def test_committed_crds_are_what_the_models_generate() -> None:
    expected = generate()
    generated = [*CRDS.glob("*.yaml"), CRDS / "Kustomization"]
    committed = {p.name: p.read_text(encoding="utf-8") for p in sorted(generated) if p.is_file()}
    assert committed.keys() == expected.keys(), "run scripts/gen-crds"
    for name, text in expected.items():
        assert committed[name] == text, f"crds/{name} is stale: run scripts/gen-crds"
    assert generate() == expected  # deterministic


def test_check_mode_reports_each_stale_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    jobs, topology = tmp_path / "gputwin.io_gpujobs.yaml", tmp_path / "gputwin.io_switchtopologies.yaml"
    jobs.write_text(jobs.read_text().replace("minimum: 1\n", "minimum: 0\n"))
    topology.unlink()
    (tmp_path / "gputwin.io_oldkinds.yaml").write_text(HEADER + "kind: CustomResourceDefinition\n")
    (tmp_path / "mine.yaml").write_text("kind: ConfigMap\n")  # not generated: never touched
    capsys.readouterr()
    assert main(["--out", str(tmp_path), "--check"]) == 1
    err = capsys.readouterr().err
    assert f"{jobs}: differs from the models" in err and "-                minimum: 0" in err
    assert f"{topology}: missing" in err
    assert "gputwin.io_oldkinds.yaml: generated for a kind that no longer exists" in err
    assert "run scripts/gen-crds" in err
    assert main(["--out", str(tmp_path)]) == 0
    assert main(["--out", str(tmp_path), "--check"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*generate(), "mine.yaml"])


def test_kustomization_lists_every_crd() -> None:
    kustomization = yaml.safe_load((CRDS / "Kustomization").read_text())
    assert kustomization["resources"] == sorted(file_name(m) for m in KINDS.values())


# --- names, scope, columns ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_crd_identity(kind: str) -> None:
    crd = yaml.safe_load((CRDS / file_name(KINDS[kind])).read_text())
    spec, names = crd["spec"], crd["spec"]["names"]
    assert crd["metadata"]["name"] == f"{names['plural']}.gputwin.io"
    assert (spec["group"], spec["scope"]) == ("gputwin.io", KINDS[kind].scope)
    assert (names["kind"], names["listKind"], names["singular"]) == (kind, f"{kind}List", kind.lower())
    assert names["categories"] == ["gputwin"]
    [version] = spec["versions"]
    assert (version["name"], version["served"], version["storage"]) == ("v1alpha1", True, True)
    assert version["subresources"] == {"status": {}}
    assert spec["scope"] == ("Namespaced" if kind in {"GPUJob", "TraceReplay"} else "Cluster")


def test_short_names_are_unique_and_not_builtin() -> None:
    short = [s for n in NAMES.values() for s in n.short_names]
    builtin = {
        "po",
        "svc",
        "deploy",
        "ns",
        "no",
        "pv",
        "pvc",
        "cm",
        "sa",
        "ep",
        "rs",
        "sts",
        "ds",
        "pc",
        "sc",
    }
    assert len(short) == len(set(short)) and not set(short) & builtin
    assert NAMES.keys() == KINDS.keys()


COLUMN_TYPES = {
    "integer": {"integer"},
    "number": {"number", "integer"},
    "string": {"string"},
    "boolean": {"boolean"},
}


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_printer_columns_point_at_typed_fields(kind: str) -> None:
    schema = schema_of(kind)
    columns = crd_for(KINDS[kind])["spec"]["versions"][0]["additionalPrinterColumns"]
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    for column in columns[:-1]:
        node = schema_at(schema, column["jsonPath"])
        assert node is not None, f"{column['jsonPath']} is not in the schema"
        assert node["type"] in COLUMN_TYPES[column["type"]], column
        assert column["description"] == node["description"]
    assert len({c["name"] for c in columns}) == len(columns)


# --- structural schema ----------------------------------------------------------------------------

ROOT_KEYS = {"description", "type", "required", "properties"}
NODE_KEYS = {
    *("description", "type", "format", "enum", "default", "nullable", "pattern", "multipleOf"),
    *("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "minLength", "maxLength"),
    *("minItems", "maxItems", "minProperties", "maxProperties", "required", "items", "properties"),
    *("additionalProperties", PRESERVE, "x-kubernetes-int-or-string", "x-kubernetes-map-type"),
    *("x-kubernetes-list-type", "x-kubernetes-list-map-keys"),
}
PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "object": (dict,),
    "array": (list,),
}


def structural_problems(root: Schema) -> list[str]:
    """What the API server would refuse in an openAPIV3Schema (the subset of rules that can apply here)."""
    problems = [f"root: {key} is not allowed at the root" for key in sorted(root.keys() - ROOT_KEYS)]
    if root.get("type") != "object":
        problems.append("root: type must be object")
    properties = root.get("properties", {})
    # Anything but {type: object} (even a description) restricts metadata, which the server forbids.
    if properties.get("metadata") != {"type": "object"}:
        problems.append("metadata: must be exactly {type: object}")
    for name in ("apiVersion", "kind"):
        if properties.get(name, {"type": "string"}).get("type") != "string":
            problems.append(f"{name}: type must be string")
    for name, node in properties.items():
        if name != "metadata":
            _walk(node, name, problems)
    return problems


def _walk(node: Any, path: str, problems: list[str]) -> None:
    if not isinstance(node, dict):
        problems.append(f"{path}: must be a schema object, got {node!r}")
        return
    problems.extend(f"{path}: {key} is not structural" for key in sorted(node.keys() - NODE_KEYS))
    problems.extend(_node_problems(node, path))
    for name, sub in node.get("properties", {}).items():
        _walk(sub, f"{path}.{name}", problems)
    if "items" in node:
        _walk(node["items"], f"{path}[]", problems)
    if isinstance(node.get("additionalProperties"), dict):
        _walk(node["additionalProperties"], f"{path}.*", problems)


def _node_problems(node: Schema, path: str) -> list[str]:
    kind = node.get("type")
    free = node.get(PRESERVE) is True or node.get("x-kubernetes-int-or-string") is True
    out = []
    if kind is None and not free:
        out.append(f"{path}: type must be set")
    if kind is not None and kind not in PYTHON_TYPES:
        out.append(f"{path}: type {kind!r} is not an OpenAPI type")
    if PRESERVE in node and node[PRESERVE] is not True:
        out.append(f"{path}: {PRESERVE} must be true or absent")
    if kind == "array" and not isinstance(node.get("items"), dict):
        out.append(f"{path}: an array needs one items schema")
    if ("properties" in node or "additionalProperties" in node) and kind != "object":
        out.append(f"{path}: properties need type object")
    if "properties" in node and "additionalProperties" in node:
        out.append(f"{path}: properties and additionalProperties are mutually exclusive")
    if "additionalProperties" in node and not isinstance(node["additionalProperties"], dict):
        out.append(f"{path}: additionalProperties must be a schema")
    if not set(node.get("required", [])) <= node.get("properties", {}).keys():
        out.append(f"{path}: required names a missing property")
    if kind in PYTHON_TYPES and not all(isinstance(v, PYTHON_TYPES[kind]) for v in node.get("enum", [])):
        out.append(f"{path}: enum values must be of type {kind}")
    if "pattern" in node:
        re.compile(node["pattern"])
    return out + _default_problems(node, path) + _list_map_problems(node, path)


def _default_problems(node: Schema, path: str) -> list[str]:
    # The server refuses a default that does not validate against its own schema.
    if "default" not in node:
        return []
    errors = list(validator_for(node).iter_errors(node["default"]))
    return [f"{path}: default {node['default']!r} is invalid: {e.message}" for e in errors]


def _list_map_problems(node: Schema, path: str) -> list[str]:
    if node.get("x-kubernetes-list-type") != "map":
        return []
    items = node.get("items", {})
    out = []
    for key in node.get("x-kubernetes-list-map-keys", []):
        field = items.get("properties", {}).get(key, {})
        if key not in items.get("required", []) and "default" not in field:
            out.append(f"{path}: list-map key {key} must be required or defaulted")
        if field.get("nullable") or field.get("type") in {"object", "array"}:
            out.append(f"{path}: list-map key {key} must be a non-nullable scalar")
    return out


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_schema_is_structural(kind: str) -> None:
    assert structural_problems(schema_of(kind)) == []


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (lambda s: s["properties"]["spec"].pop("type"), "spec: type must be set"),
        (lambda s: s["properties"]["spec"].update({"$ref": "#/x"}), "spec: $ref is not structural"),
        (lambda s: s["properties"]["spec"].update({"additionalProperties": False}), "mutually exclusive"),
        (lambda s: s["properties"]["metadata"].update({"description": "x"}), "metadata: must be exactly"),
        (lambda s: s.update({"additionalProperties": {"type": "string"}}), "root: additionalProperties"),
        (lambda s: s["properties"]["status"]["properties"]["conditions"].pop("items"), "one items schema"),
        (
            lambda s: s["properties"]["spec"]["properties"]["gpus"].update({"anyOf": [{"type": "string"}]}),
            "spec.gpus: anyOf is not structural",
        ),
        (lambda s: s["properties"]["spec"]["properties"]["gpus"].update({"default": -1}), "default -1"),
    ],
    ids=["no-type", "ref", "closed-object", "metadata", "root-map", "no-items", "any-of", "bad-default"],
)
def test_the_structural_checker_catches(edit: Any, problem: str) -> None:
    schema = copy.deepcopy(schema_of("GPUJob"))
    edit(schema)
    assert any(problem in p for p in structural_problems(schema)), structural_problems(schema)


def _properties(node: Schema, path: str) -> list[tuple[str, Schema]]:
    found = [(f"{path}.{n}", sub) for n, sub in node.get("properties", {}).items()]
    for sub_path, sub in list(found):
        found += _properties(sub, sub_path)
    for key, suffix in (("items", "[]"), ("additionalProperties", ".*")):
        if isinstance(node.get(key), dict):
            found += _properties(node[key], path + suffix)
    return found


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_every_property_is_described(kind: str) -> None:
    fields = _properties(schema_of(kind), kind)
    assert len(fields) > 10
    assert [p for p, node in fields if not node.get("description") and p != f"{kind}.metadata"] == []


class Unionish(BaseModel):
    value: int | str = Field(description="Either.")


class FreeForm(BaseModel):
    value: dict[str, Any] = Field(description="Anything.")


class Bounded(BaseModel):
    value: float = Field(gt=0, lt=1, description="Strictly between.")


def test_exclusive_bounds_use_the_openapi_3_0_form() -> None:
    value = structural_schema(Bounded)["properties"]["value"]
    assert value == {
        "description": "Strictly between.",
        "type": "number",
        "minimum": 0,
        "maximum": 1,
        "exclusiveMinimum": True,
        "exclusiveMaximum": True,
    }


@pytest.mark.parametrize(
    ("model", "message"),
    [
        (Unionish, "Unionish.value: a union of 2 types has no structural form"),
        (FreeForm, "FreeForm.value: a free-form map needs x-kubernetes-preserve-unknown-fields"),
    ],
)
def test_generator_refuses_what_has_no_structural_form(model: type[BaseModel], message: str) -> None:
    with pytest.raises(SchemaError, match=re.escape(message)):
        structural_schema(model)


# --- objects against the generated schema ---------------------------------------------------------


def _is_rfc3339(value: object) -> bool:
    # The API server checks format: date-time; jsonschema only does when told how.
    return not isinstance(value, str) or datetime.fromisoformat(value).tzinfo is not None


FORMATS = jsonschema.FormatChecker(formats=())
FORMATS.checks("date-time", raises=ValueError)(_is_rfc3339)


def to_jsonschema(node: Schema) -> Schema:
    """Read an OpenAPI node as the API server does, in JSON Schema: nullable allows null, and unknown
    fields are errors (kubectl's default --validate=strict) except under preserve-unknown-fields."""
    out = {k: v for k, v in node.items() if k != "nullable" and not k.startswith("x-kubernetes-")}
    if "properties" in node:
        out["properties"] = {k: to_jsonschema(v) for k, v in node["properties"].items()}
        out["additionalProperties"] = False
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            out[key] = to_jsonschema(node[key])
    if node.get("nullable"):
        out["type"] = [node["type"], "null"]
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
    return out


def validator_for(node: Schema) -> jsonschema.Draft7Validator:
    return jsonschema.Draft7Validator(to_jsonschema(node), format_checker=FORMATS)


def crd_errors(document: Schema) -> list[tuple[str, str]]:
    """(field path, failed keyword) per error; a missing required field is named in the path."""
    out = []
    for error in validator_for(schema_of(document["kind"])).iter_errors(document):
        where = list(error.absolute_path)
        if error.validator == "required":
            missing = re.match(r"'(.+)' is a required property", error.message)
            where.append(missing.group(1) if missing else "?")
        out.append((field_path(where), str(error.validator)))
    return sorted(out)


@cache
def samples() -> tuple[tuple[str, Schema], ...]:
    """(id, document) for every document of manifests/samples/*.yaml."""
    return tuple(
        (f"{path.stem}-{doc['metadata']['name']}", doc)
        for path in sorted(SAMPLES.glob("*.yaml"))
        for doc in yaml.safe_load_all(path.read_text())
        if doc
    )


def sample_documents() -> list[Any]:
    return [pytest.param(copy.deepcopy(doc), id=name) for name, doc in samples()]


@pytest.mark.parametrize("document", sample_documents())
def test_samples_validate_against_the_crd(document: Schema) -> None:
    assert crd_errors(document) == []


CONDITION = {
    "type": "Ready",
    "status": "True",
    "reason": "Reconciled",
    "message": "",
    "lastTransitionTime": "2024-05-01T12:00:00Z",
}
METRICS = {
    "jobs": 3375,
    "avgJct": 351.3,
    "avgQueue": 90.3,
    "p50Jct": 60.0,
    "p99Jct": 9000.0,
    "p99Queue": 800.0,
    "makespan": 86400.0,
}
STATUSES: dict[str, Schema] = {
    "SwitchTopology": {
        "observedGeneration": 2,
        "conditions": [CONDITION],
        "nodes": 8,
        "gpus": 64,
        "switches": 3,
    },
    "GPUPartition": {
        "conditions": [CONDITION],
        "nodes": 4,
        "totalGPUs": 32,
        "freeGPUs": 8,
        "queued": 3,
        "running": 2,
        "forecast": {"computedAt": "2024-05-01T12:05:00Z", "horizonSeconds": 604800.0, "samples": 16,
                     "drainSeconds": {"p50": 1200.0, "p90": 2400.5}},
    },
    "SchedulingPolicy": {
        "conditions": [{**CONDITION, "type": "Deployed", "observedGeneration": 1}],
        "backends": ["sim", "slurm"],
        "partitions": ["train"],
        "lastDeploy": {"backend": "slurm", "result": "Succeeded", "time": "2024-05-01T12:00:00+02:00"},
    },
    "GPUJob": {
        "phase": "Running",
        "partition": "train",
        "nodes": "gpu[001-002]",
        "gpus": 16,
        "switches": 1,
        "overhead": 0.1,
        "submitTime": "2024-05-01T12:00:00Z",
        "startTime": "2024-05-01T12:05:00Z",
        "endTime": None,
        # the forecast it had while it waited (the forecaster clears it at its next round)
        "forecast": {"computedAt": "2024-05-01T12:01:00Z", "horizonSeconds": 604800.0, "samples": 16,
                     "startTime": {"p50": "2024-05-01T12:04:00Z", "p90": "2024-05-01T12:09:00Z"}},
    },
    "TraceReplay": {
        "phase": "Succeeded",
        "candidates": [
            {"name": "sjf/consolidate/as-requested+backfill", "metrics": METRICS},
            {"name": "sjf/topology-aware/as-requested max_wait=120.0", "metrics": {**METRICS}, "trial": 7},
        ],
        "winner": "sjf/consolidate/as-requested+backfill",
        "trials": 20,
        "report": "philly-what-if-report",
        "promoted": False,
    },
}


def example(kind: str) -> Schema:
    """The first sample of `kind` with a full status, as `kubectl get -o yaml` would show it."""
    for _, document in samples():
        if document["kind"] == kind:
            return {**copy.deepcopy(document), "status": copy.deepcopy(STATUSES[kind])}
    raise AssertionError(f"no sample of {kind}")


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_full_status_validates_in_the_model_and_the_crd(kind: str) -> None:
    document = example(kind)
    assert crd_errors(document) == []
    status = KINDS[kind].model_validate(document).status
    assert status is not None
    assert status.model_dump(by_alias=True, exclude_unset=True) == STATUSES[kind]
    # Every printer column has something to show for a running object.
    for column in NAMES[kind].columns[:-1]:
        value: Any = document
        for part in column.json_path.strip(".").split("."):
            value = value[part]
        assert value is not None, column


def _edit(document: Schema, path: str, value: Any) -> None:
    *parents, last = path.split(".")
    for part in parents:
        document = document[int(part)] if part.isdigit() else document[part]  # type: ignore[index]
    if value is DELETE:
        del document[last]
    else:
        document[last] = value


DELETE = object()
BAD = [
    ("GPUJob", "spec.gpus", -1, ("spec.gpus", "minimum")),
    ("GPUJob", "spec.gpus", "4", ("spec.gpus", "type")),
    ("GPUJob", "spec", DELETE, ("spec", "required")),
    ("GPUJob", "spec.gpuz", 4, ("spec", "additionalProperties")),
    ("GPUJob", "status.phase", "Done", ("status.phase", "enum")),
    ("GPUJob", "status.startTime", "yesterday", ("status.startTime", "format")),
    ("SchedulingPolicy", "spec.queue.policy", "lifo", ("spec.queue.policy", "enum")),
    ("SchedulingPolicy", "status.conditions.0.status", "Yes", ("status.conditions[0].status", "enum")),
    ("SwitchTopology", "spec.nodeGroups.0.gpusPerNode", 65, ("spec.nodeGroups[0].gpusPerNode", "maximum")),
    ("SwitchTopology", "spec.switches.0.name", "spine 1", ("spec.switches[0].name", "pattern")),
    ("GPUPartition", "spec.taskTypes", [], ("spec.taskTypes", "minItems")),
    ("TraceReplay", "spec.objective", "fastest", ("spec.objective", "enum")),
    ("TraceReplay", "spec.search", {"budget": 101}, ("spec.search.budget", "maximum")),
    ("TraceReplay", "spec.search", {"seed": -1}, ("spec.search.seed", "minimum")),
    ("TraceReplay", "spec.search", {"space": ["sjf"]}, ("spec.search.space", "type")),
    (
        "TraceReplay",
        "status.candidates.0.metrics.avgJct",
        -1.0,
        ("status.candidates[0].metrics.avgJct", "minimum"),
    ),
]


@pytest.mark.parametrize(
    ("kind", "path", "value", "error"), BAD, ids=[f"{b[0]}-{b[3][1]}-{b[1]}" for b in BAD]
)
def test_bad_objects_fail_in_the_crd_and_the_model(kind: str, path: str, value: Any, error: Any) -> None:
    document = example(kind)
    _edit(document, path, value)
    assert crd_errors(document) == [error]
    with pytest.raises(ValidationError):
        KINDS[kind].model_validate(document)


# Rules a structural schema cannot state: the API server stores these, gputwin rejects them on read.
MODEL_ONLY = [
    ("SchedulingPolicy", "spec.params", {"estimator": {"nested": 1}}),
    ("GPUPartition", "spec.nodeSelector", {"matchLabels": {}}),  # next to spec.nodes
    ("SwitchTopology", "spec.nodeGroups.0.nodes", "gpu[1-"),
]


@pytest.mark.parametrize(("kind", "path", "value"), MODEL_ONLY, ids=[f"{m[0]}-{m[1]}" for m in MODEL_ONLY])
def test_rules_only_the_model_checks(kind: str, path: str, value: Any) -> None:
    document = example(kind)
    _edit(document, path, value)
    assert crd_errors(document) == []
    with pytest.raises(ValidationError):
        KINDS[kind].model_validate(document)
