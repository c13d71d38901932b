"""Building blocks shared by every gputwin.io/v1alpha1 kind: base config, metadata, name types.

Every model is strict (YAML `"8"` is not the integer 8, `true` is not a string), forbids unknown
keys (a typo is an error, not a silently ignored field) and speaks camelCase on the wire while
Python code may use snake_case. The validators raise `PydanticCustomError` so the loader can
show their messages as they are, without pydantic's "Value error," prefix.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

import hostlist
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, WrapValidator
from pydantic.alias_generators import to_camel
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ValidatorFunctionWrapHandler

from gputwin.core.bounds import MAX_TEXT

GROUP = "gputwin.io"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"

DNS1123_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DNS1123_LABEL = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
# The policy vocabulary: SchedulingPolicy uses it, TraceReplay candidates search over it.
QueuePolicy = Literal["fifo", "sjf", "srtf", "las", "qssf", "priority"]
PlacementPolicy = Literal["first-fit", "consolidate", "topology-aware", "random"]
SizingPolicy = Literal["as-requested", "history"]

# SLURM shards per GPU (NodeGroup.shardsPerGpu): finer than the twin's milli-GPU would be shards
# no fraction can use. The core has no field for it: convert carries it to nodes as SHARDS_LABEL.
MAX_SHARDS_PER_GPU = 1000
SHARDS_LABEL = "gputwin.io/shards-per-gpu"
# Switch and node names end up as Kubernetes label values and SLURM names: same character set.
HOST_NAME = r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
# A task type routes a job (GPUJob spec.taskType, `sbatch --comment=task:<type>`) to the partition
# serving it. It is written into SLURM's job_submit.lua as a string literal, so the pattern is the
# SLURM renderer's name rule: no quote, bracket, space, `#`, `,` or newline can reach the script.
TASK_TYPE = r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}$"
TASK_TYPE_RULE = "1-64 of A-Z a-z 0-9 _ . -, not starting with . or -"
# A GPUPartition's `taskTypes` may also hold this alone: it catches jobs no other partition serves.
CATCH_ALL = "*"

# The most nodes one hostlist (or one VC table, or one trace record) may name: a hundred times the
# largest cluster in the shared traces, and small enough that expanding it takes well under a second.
# Hostlists are counted (arithmetically, from their ranges) before they are expanded.
MAX_NODES = 100_000
_MAX_HOSTLIST_CHARS = 1 << 16  # text of one hostlist; a range bound has at most _RANGE_DIGITS digits
_RANGE_DIGITS = 18
_RANGE = re.compile(r"([0-9]+)(?:-([0-9]+))?", re.ASCII)
_BRACKETS = re.compile(r"\[([^\]]*)\]")


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


def count_hostlist(text: str) -> int | None:
    """How many names `text` expands to (duplicates included), without expanding it.

    Follows python-hostlist's grammar (top-level commas split parts; each `[...]` group of a part
    multiplies its count by the group's size). None when the text is not a hostlist that grammar
    reads (the expansion then says why); a count above MAX_NODES may be reported as MAX_NODES + 1.
    """
    if len(text) > _MAX_HOSTLIST_CHARS:
        return MAX_NODES + 1
    total, depth = 0, 0
    part: list[str] = []
    for char in text + ",":
        if char == "," and depth == 0:
            size = _count_part("".join(part))
            if size is None:
                return None
            total, part = min(total + size, MAX_NODES + 1), []
            continue
        part.append(char)
        depth += (char == "[") - (char == "]")
        if not 0 <= depth <= 1:
            return None
    return None if depth else total


def _count_part(part: str) -> int | None:
    if not part:
        return 0
    size = 1
    for group in _BRACKETS.findall(part):
        ranges = 0
        for item in group.split(","):
            match = _RANGE.fullmatch(item)
            if match is None:
                return None
            low, high = match.group(1), match.group(2) or match.group(1)
            if max(len(low), len(high)) > _RANGE_DIGITS:
                return MAX_NODES + 1
            if int(high) < int(low):
                return None
            ranges += int(high) - int(low) + 1
        size = min(size * ranges, MAX_NODES + 1)
    return size


def _show(text: str) -> str:
    """A hostlist for an error message, cut short when long."""
    return repr(text) if len(text) <= 80 else f"{text[:60]!r}... ({len(text)} characters)"


def expand_hostlist(text: str) -> list[str]:
    """Expand a SLURM hostlist (`gpu[001-004],cpu7`) in declaration order; ValueError if it is bad.

    At most MAX_NODES names: the count is checked before anything is expanded.
    """
    count = count_hostlist(text)
    if count is not None and count > MAX_NODES:
        raise ValueError(f"hostlist {_show(text)} names more than {MAX_NODES:,} nodes")
    try:
        names: list[str] = hostlist.expand_hostlist(text, allow_duplicates=True)
    except hostlist.BadHostlist as exc:
        raise ValueError(f"bad hostlist {_show(text)}: {exc}") from None
    seen: set[str] = set()
    for name in names:
        if not re.fullmatch(HOST_NAME, name):
            raise ValueError(f"hostlist {_show(text)} yields {name!r}, which is not a valid node name")
        if name in seen:
            raise ValueError(f"hostlist {_show(text)} names {name!r} twice")
        seen.add(name)
    if not names:
        raise ValueError("hostlist is empty")
    return names


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
    "GROUP",
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
