"""Building blocks shared by every gputwin.io/v1alpha1 kind: base config, metadata, name types.

Every model is strict (YAML `"8"` is not the integer 8, `true` is not a string), forbids unknown
keys (a typo is an error, not a silently ignored field) and speaks camelCase on the wire while
Python code may use snake_case. The validators raise `PydanticCustomError` so the loader can
show their messages as they are, without pydantic's "Value error," prefix.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WrapValidator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from gputwin.api.names import (
    API_VERSION,
    CATCH_ALL,
    DNS1123_LABEL,
    DNS1123_SUBDOMAIN,
    GROUP,
    HOST_NAME,
    MAX_NODES,
    MAX_SHARDS_PER_GPU,
    SHARDS_LABEL,
    TASK_TYPE,
    TASK_TYPE_RULE,
    VERSION,
    count_hostlist,
    expand_hostlist,
)
from gputwin.core.bounds import MAX_TEXT

# The policy vocabulary: SchedulingPolicy uses it, TraceReplay candidates search over it.
QueuePolicy = Literal["fifo", "sjf", "srtf", "las", "qssf", "priority"]
PlacementPolicy = Literal["first-fit", "consolidate", "topology-aware", "random"]
SizingPolicy = Literal["as-requested", "history"]


class ApiModel(BaseModel):
    """Base of every spec object: camelCase aliases, strict types, unknown keys rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        strict=True,
        frozen=True,
        allow_inf_nan=False,
    )


def _matches(pattern: str, what: str) -> AfterValidator:
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            # repr: a newline or control character in the value stays on the error's one line.
            shown = repr(value) if len(value) <= 80 else repr(value[:80]) + "..."
            raise PydanticCustomError("name_pattern", "{name} is not a valid {what}", {"name": shown, "what": what})
        return value

    return AfterValidator(check)


# The pattern goes into the JSON schema (so the API server enforces it too) and is checked by a
# validator with a readable message instead of pydantic's "String should match pattern '^[a-z0…'".
DnsName = Annotated[
    str,
    Field(min_length=1, max_length=253, json_schema_extra={"pattern": DNS1123_SUBDOMAIN}),
    _matches(
        DNS1123_SUBDOMAIN, "DNS-1123 subdomain (lowercase letters, digits, '-' and '.'; alphanumeric ends)"
    ),
]
DnsLabel = Annotated[
    str,
    Field(min_length=1, max_length=63, json_schema_extra={"pattern": DNS1123_LABEL}),
    _matches(DNS1123_LABEL, "DNS-1123 label (lowercase letters, digits and '-'; alphanumeric ends)"),
]
HostName = Annotated[
    str,
    Field(min_length=1, max_length=63, json_schema_extra={"pattern": HOST_NAME}),
    _matches(HOST_NAME, "switch or node name (letters, digits, '-', '_' and '.'; alphanumeric ends)"),
]
TaskType = Annotated[
    str,
    Field(min_length=1, max_length=64, json_schema_extra={"pattern": TASK_TYPE}),
    _matches(TASK_TYPE, f"task type ({TASK_TYPE_RULE})"),
]
# What a partition serves: a task type, or "*" for every type no other partition serves.
_SERVED = rf"^(\{CATCH_ALL}|{TASK_TYPE[1:-1]})$"
ServedTaskType = Annotated[
    str,
    Field(min_length=1, max_length=64, json_schema_extra={"pattern": _SERVED}),
    _matches(_SERVED, f"task type ({TASK_TYPE_RULE}) or {CATCH_ALL!r} alone"),
]
# Names written into SLURM's files (partition and topology names): SLURM's renderer takes at most
# 64 characters, Kubernetes label values 63.
SlurmName = Annotated[DnsName, Field(max_length=63)]


def _check_hostlist(text: str) -> str:
    try:
        expand_hostlist(text)
    except ValueError as exc:
        raise PydanticCustomError("hostlist", str(exc)) from None
    return text


Hostlist = Annotated[str, Field(min_length=1), AfterValidator(_check_hostlist)]


def _one_scalar(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
    # One message instead of one error per union member (params.x.str, params.x.int, ...).
    try:
        checked = handler(value)
    except ValidationError:
        raise PydanticCustomError("scalar", "must be a string, number or boolean") from None
    if isinstance(checked, str) and len(checked) > MAX_TEXT:
        raise PydanticCustomError("scalar", "at most {n} characters", {"n": MAX_TEXT})
    return checked


Scalar = Annotated[str | bool | int | float, WrapValidator(_one_scalar)]


class ObjectMeta(BaseModel):
    """The Kubernetes metadata gputwin reads; server-filled keys (uid, resourceVersion…) are ignored."""

    model_config = ConfigDict(extra="ignore", strict=True, frozen=True)

    name: DnsName = Field(
        description="Object name, a DNS-1123 subdomain; other objects refer to it by this name."
    )
    namespace: DnsLabel | None = Field(
        default=None,
        description="Namespace of namespaced kinds (GPUJob, TraceReplay); unset for cluster-scoped kinds.",
    )
    labels: dict[str, str] = Field(default_factory=dict, description="Kubernetes labels.")
    annotations: dict[str, str] = Field(default_factory=dict, description="Kubernetes annotations.")


class SlurmObjectMeta(ObjectMeta):
    """Metadata of the kinds whose names SLURM gets (GPUPartition, SwitchTopology): at most 63 characters."""

    name: SlurmName = Field(
        description="Object name, a DNS-1123 subdomain of at most 63 characters (SLURM and label values "
        "take no more); other objects refer to it by this name."
    )


class ResourceBase(ApiModel):
    """Fields every kind shares; subclasses narrow `kind` and add `spec` and their typed `status`."""

    api_version: Literal["gputwin.io/v1alpha1"] = Field(description="Always gputwin.io/v1alpha1.")
    metadata: ObjectMeta = Field(description="Standard object metadata; `name` is required.")


__all__ = [
    "API_VERSION",
    "CATCH_ALL",
    "DNS1123_LABEL",
    "DNS1123_SUBDOMAIN",
    "GROUP",
    "HOST_NAME",
    "MAX_NODES",
    "MAX_SHARDS_PER_GPU",
    "SHARDS_LABEL",
    "TASK_TYPE",
    "TASK_TYPE_RULE",
    "VERSION",
    "ApiModel",
    "DnsLabel",
    "DnsName",
    "HostName",
    "Hostlist",
    "ObjectMeta",
    "PlacementPolicy",
    "QueuePolicy",
    "ResourceBase",
    "Scalar",
    "ServedTaskType",
    "SizingPolicy",
    "SlurmName",
    "SlurmObjectMeta",
    "TaskType",
    "count_hostlist",
    "expand_hostlist",
]
