"""Turn a pydantic model's JSON schema into a Kubernetes structural schema (openAPIV3Schema).

The API server accepts a CRD only if its schema is *structural*: every field has a `type` (or is
explicitly free-form), no `$ref`, no `definitions`, no `type: null`, no `properties` next to
`additionalProperties`, arrays have `items`, and the root is a plain object whose `metadata` is
`{type: object}`. pydantic emits JSON Schema 2020-12, so `structural_schema` rewrites it:

- every `$ref` is inlined from `$defs`; the field's own description wins over the class docstring;
- `anyOf: [X, {type: null}]` (an `Optional`) becomes X with `nullable: true`;
- `const` (a single-value `Literal`) becomes a one-value `enum`, and `exclusiveMinimum: N` (`gt=N`)
  becomes OpenAPI 3.0's `minimum: N` with `exclusiveMinimum: true`;
- `title`, `default: null` and `additionalProperties: false` go (unknown fields are pruned, and
  `kubectl --validate=strict` rejects them, so `false` adds nothing and the server forbids it
  next to `properties`);
- a field marked `x-kubernetes-preserve-unknown-fields` is kept as a free-form value.

Anything else that has no structural form (a union of several types, a key the server does not
know) raises `SchemaError` naming the field: it is better to fail here than in `kubectl apply`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

Schema = dict[str, Any]

PRESERVE = "x-kubernetes-preserve-unknown-fields"
# Keys copied as they are: what OpenAPI v3 and the API server understand and pydantic emits.
PLAIN_KEYS = (
    "description",
    "type",
    "format",
    "enum",
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "x-kubernetes-list-type",
    "x-kubernetes-list-map-keys",
    "x-kubernetes-map-type",
    "x-kubernetes-int-or-string",
)
NESTED_KEYS = ("required", "items", "properties", "additionalProperties")
# Output order of a node's keys (the file is read by people); properties are sorted by name.
KEY_ORDER = (*PLAIN_KEYS[:2], "nullable", *PLAIN_KEYS[2:], *NESTED_KEYS, PRESERVE)
# Handled by the converter itself rather than copied.
SPECIAL_KEYS = frozenset({"nullable", "const", "title", "$defs"})


class SchemaError(ValueError):
    """A model field has no structural-schema form; the message names the field path."""


def structural_schema(model: type[BaseModel]) -> Schema:
    """The model's validation JSON schema (camelCase names) as a structural schema."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _convert(raw, raw.get("$defs", {}), model.__name__)


def _convert(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    node = _resolve(node, defs, path)
    if node.get(PRESERVE):
        return _free_form(node)
    unknown = node.keys() - set(PLAIN_KEYS) - set(NESTED_KEYS) - SPECIAL_KEYS
    if unknown:
        raise SchemaError(f"{path}: no structural form for schema keys {sorted(unknown)}")
    out: Schema = {k: node[k] for k in PLAIN_KEYS if k in node}
    if "const" in node:
        out["enum"] = [node["const"]]
    if "default" in out and out["default"] is None:
        del out["default"]  # Optional fields: absent already means None
    for bound in ("minimum", "maximum"):
        # JSON Schema's `exclusiveMinimum: 0` (pydantic gt=0) is OpenAPI 3.0's minimum plus a flag.
        flag = "exclusive" + bound.capitalize()
        if flag in out and not isinstance(out[flag], bool):
            out[bound], out[flag] = out[flag], True
    _convert_nested(node, out, defs, path)
    return _ordered(out)


def _resolve(node: Schema, defs: dict[str, Schema], path: str) -> Schema:
    """Inline a `$ref` and fold an Optional's `anyOf` into its one non-null branch."""
    if "$ref" in node:
        target = defs[node["$ref"].rsplit("/", 1)[-1]]
        # Field-level keys (description, default) override the referenced class's own.
        node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    if "anyOf" not in node:
        return node
    branches = [b for b in node["anyOf"] if b != {"type": "null"}]
    outer = {k: v for k, v in node.items() if k != "anyOf"}
    if len(branches) == 1:
        merged = {**_resolve(branches[0], defs, path), **outer}
        if len(branches) < len(node["anyOf"]):
            merged["nullable"] = True
        return merged
    if outer.get(PRESERVE):
        return outer
    raise SchemaError(
        f"{path}: a union of {len(branches)} types has no structural form; "
        f"mark the field {PRESERVE} or give it one type"
    )


def _free_form(node: Schema) -> Schema:
    # Nothing below a preserved field is validated by the server, so its inner schema is dropped.
    out: Schema = {k: node[k] for k in ("description", "type") if k in node}
    if node.get("nullable"):
        out["nullable"] = True
    out[PRESERVE] = True
    return _ordered(out)


def _convert_nested(node: Schema, out: Schema, defs: dict[str, Schema], path: str) -> None:
    if node.get("nullable"):
        out["nullable"] = True
    if node.get("required"):
        out["required"] = sorted(node["required"])
    if "items" in node:
        out["items"] = _convert(node["items"], defs, f"{path}[]")
    if "properties" in node:
        out["properties"] = {
            name: _convert(sub, defs, f"{path}.{name}") for name, sub in sorted(node["properties"].items())
        }
    extra = node.get("additionalProperties")
    if isinstance(extra, dict):
        if "properties" in node:
            raise SchemaError(f"{path}: properties and a schema for additional keys cannot be combined")
        out["additionalProperties"] = _convert(extra, defs, f"{path}.*")
    elif extra is True:
        raise SchemaError(f"{path}: a free-form map needs {PRESERVE} or a value type")
    if out.get("type") == "array" and "items" not in out:
        raise SchemaError(f"{path}: an array needs an item type")
    if "type" not in out:
        raise SchemaError(f"{path}: no type")


def _ordered(node: Schema) -> Schema:
    return {k: node[k] for k in KEY_ORDER if k in node}


__all__ = ["SchemaError", "structural_schema"]
