"""The search space of `gputwin tune`: which policy knobs are searched, over which values.

A space maps knob names to dimensions. The knobs are what the core's PolicySpec really reads
(`gputwin.core.plugins`, `gputwin.core.policies`); each applies only when its condition holds, so
a trial never samples a knob its policy ignores:

    knob                  kind     applies when              default
    queue                 name     always                    every queue policy
    placement             name     always                    every deployable placer
    backfill              bool     queue is not preemptive   [true, false]
    sizing                name     always                    every sizing rule
    max_wait              float s  placement topology-aware  {low: 0, high: 3600}
    max_factor            float    sizing history            {low: 1, high: 4}
    min_samples           int      sizing history            {low: 1, high: 20}
    las_first_threshold   float s  queue las                 {low: 600, high: 36000, log: true}
    las_threshold_ratio   float    queue las                 {low: 2, high: 20, log: true}
    qssf_prior            float s  queue qssf                {low: 600, high: 36000, log: true}

(LAS gets two levels: the first threshold in attained GPU-seconds, the second that many times
later. `qssf_prior` is the run time QSSF predicts when its history has nothing to go on,
`gputwin.core.policies.qssf`; that history is the cluster's and falls back to every finished job,
so the prior only ranks the jobs submitted before the first one ends.)
Not searched: the preemption checkpoint cost is a fact of the cluster, not a choice.

A space file (YAML, read by the CLI; this module sees the parsed mapping) overrides the default
knob by knob; a knob it leaves out keeps its default dimension. Each value is one of:

    queue: [sjf, qssf, las]          a list: choose among these values
    backfill: true                   a single value: fixed, not searched
    max_wait: {low: 60, high: 1800}  a range (numeric knobs): optional `log: true`, `step: N`

Unknown knobs, names no plugin registers and ranges outside a knob's bounds are a `SpaceError`
whose message is `FILE: knob: reason`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from gputwin.core.policies import make_policy
from gputwin.sim.run import RunError

Value = str | bool | int | float
Kind = Literal["name", "bool", "float", "int"]


# What `gputwin tune` can optimise, and which way (a summary metric of `gputwin.sim.run.run`).

class SpaceError(RunError):
    """A space file that cannot be searched; `str()` is `FILE: knob: reason`."""


@dataclass(frozen=True, slots=True)
class Choice:
    """Pick one of `values` (one value: the knob is fixed)."""

    values: tuple[Value, ...]


@dataclass(frozen=True, slots=True)
class Range:
    """A number between `low` and `high`, inclusive; `log` samples on a log scale."""

    low: float
    high: float
    log: bool = False
    step: float | None = None


Dimension = Choice | Range


@dataclass(frozen=True, slots=True)
class Knob:
    """A tunable setting: its type, bounds, default dimension and when it applies."""

    name: str
    kind: Kind
    default: Dimension | None  # None: from the vocabulary (the registry's names)
    low: float = -math.inf
    high: float = math.inf
    needs: tuple[str, str] | None = None  # (knob, value) that must be chosen for this one to apply


KNOBS: tuple[Knob, ...] = (
    Knob("queue", "name", None),
    Knob("placement", "name", None),
    Knob("backfill", "bool", Choice((True, False))),
    Knob("sizing", "name", None),
    Knob("max_wait", "float", Range(0.0, 3600.0), low=0.0, needs=("placement", "topology-aware")),
    Knob("max_factor", "float", Range(1.0, 4.0), low=1.0, high=64.0, needs=("sizing", "history")),
    Knob("min_samples", "int", Range(1, 20), low=1, needs=("sizing", "history")),
    Knob("las_first_threshold", "float", Range(600.0, 36000.0, log=True), low=1.0, needs=("queue", "las")),
    Knob("las_threshold_ratio", "float", Range(2.0, 20.0, log=True), low=1.0, needs=("queue", "las")),
    Knob("qssf_prior", "float", Range(600.0, 36000.0, log=True), low=0.0, needs=("queue", "qssf")),
)  # fmt: skip
KNOB_NAMES = tuple(k.name for k in KNOBS)


@dataclass(frozen=True, slots=True)
class Space:
    """One dimension per knob, in KNOBS order."""

    dimensions: tuple[tuple[str, Dimension], ...]

    def get(self, name: str) -> Dimension:
        return dict(self.dimensions)[name]

    def applies(self, knob: Knob, chosen: Mapping[str, Value]) -> bool:
        """Whether `knob` matters given the values chosen so far (backfill: non-preemptive queues)."""
        if knob.name == "backfill":
            return not make_policy(str(chosen["queue"])).preemptive
        return knob.needs is None or chosen.get(knob.needs[0]) == knob.needs[1]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for name, dim in self.dimensions:
            if isinstance(dim, Choice):
                out[name] = list(dim.values)
            else:
                out[name] = {"low": dim.low, "high": dim.high, "log": dim.log, "step": dim.step}
        return out


def default_space(vocabulary: Mapping[str, Sequence[str]]) -> Space:
    """Every knob at its default; `vocabulary` gives the allowed names of queue, placement, sizing."""
    return Space(tuple((k.name, k.default or Choice(tuple(vocabulary[k.name]))) for k in KNOBS))


def parse_space(data: object, source: str, vocabulary: Mapping[str, Sequence[str]]) -> Space:
    """The default space with the knobs of `data` (a parsed space file) replaced; SpaceError if bad."""
    if data is None:
        return default_space(vocabulary)
    if not isinstance(data, Mapping):
        raise SpaceError(f"{source}: document: expected a mapping of knob names, got {type(data).__name__}")
    knobs = {k.name: k for k in KNOBS}
    chosen = dict(default_space(vocabulary).dimensions)
    for name, raw in data.items():
        knob = knobs.get(str(name))
        if knob is None:
            raise SpaceError(f"{source}: {name}: unknown knob; known: {', '.join(KNOB_NAMES)}")
        try:
            chosen[knob.name] = _dimension(knob, raw, vocabulary)
        except (ValueError, TypeError) as exc:
            raise SpaceError(f"{source}: {name}: {exc}") from None
    return Space(tuple((k.name, chosen[k.name]) for k in KNOBS))


def _dimension(knob: Knob, raw: object, vocabulary: Mapping[str, Sequence[str]]) -> Dimension:
    if isinstance(raw, Mapping):
        return _range(knob, raw)
    values = list(raw) if isinstance(raw, list) else [raw]
    if not values:
        raise ValueError("empty list")
    checked = tuple(_value(knob, v, vocabulary) for v in values)
    if len(set(checked)) != len(checked):
        raise ValueError("values repeat")
    return Choice(checked)


def _value(knob: Knob, value: object, vocabulary: Mapping[str, Sequence[str]]) -> Value:
    if knob.kind == "name":
        allowed = vocabulary[knob.name]
        if not isinstance(value, str) or value not in allowed:
            raise ValueError(f"unknown {knob.name} policy {value!r}; known: {', '.join(allowed)}")
        return value
    if knob.kind == "bool":
        if not isinstance(value, bool):
            raise ValueError(f"expected true or false, got {value!r}")
        return value
    number = _number(knob, value)
    return int(number) if knob.kind == "int" else number


def _number(knob: Knob, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"expected a number, got {value!r}")
    if knob.kind == "int" and value != int(value):
        raise ValueError(f"expected a whole number, got {value!r}")
    if not knob.low <= value <= knob.high:
        raise ValueError(f"{value!r} is outside [{knob.low:g}, {knob.high:g}]")
    return float(value)


def _range(knob: Knob, raw: Mapping[Any, Any]) -> Range:
    if knob.kind not in ("float", "int"):
        raise ValueError("a range needs a numeric knob; give a list of values")
    unknown = sorted(str(k) for k in raw if k not in ("low", "high", "log", "step"))
    if unknown:
        raise ValueError(f"unknown range field {unknown[0]!r}; known: low, high, log, step")
    if "low" not in raw or "high" not in raw:
        raise ValueError("a range needs low and high")
    low, high = _number(knob, raw["low"]), _number(knob, raw["high"])
    log, step = raw.get("log", False), raw.get("step")
    if not isinstance(log, bool):
        raise TypeError(f"log: expected true or false, got {log!r}")
    if low > high:
        raise ValueError(f"low {low:g} is above high {high:g}")
    if log and low <= 0:
        raise ValueError("a log range needs low > 0")
    if step is not None:
        if isinstance(step, bool) or not isinstance(step, int | float) or step <= 0:
            raise ValueError(f"step: expected a positive number, got {step!r}")
        if log:
            raise ValueError("a range takes log or step, not both")
        if knob.kind == "int" and step != int(step):
            raise ValueError(f"step: expected a whole number, got {step!r}")
    return Range(low, high, log, None if step is None else float(step))
