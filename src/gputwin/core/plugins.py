"""The one explicit registry of placement and sizing plugins (queue policies: `policies.py`).

Names here are the names users write in a SchedulingPolicy and pass to `--placement` and
`--sizing`. Unknown names fail with the list of known ones.
"""

from __future__ import annotations

from typing import Callable, Mapping, TypeVar

from gputwin.core.compat import HeliosConsolidate
from gputwin.core.placement import Consolidate, FirstFit, Placer, RandomPlacer, TopologyAware
from gputwin.core.bounds import MAX_MIN_SAMPLES
from gputwin.core.policies import QUEUE_PARAMS, QUEUE_POLICIES, number_param
from gputwin.core.sizing import AsRequested, HistorySizing, Sizer

Params = Mapping[str, object]

PLACERS: dict[str, Callable[[Params, int], Placer]] = {
    "first-fit": lambda params, seed: FirstFit(),
    "consolidate": lambda params, seed: Consolidate(),
    "topology-aware": lambda params, seed: TopologyAware(_float(params, "max_wait", 300.0)),
    "random": lambda params, seed: RandomPlacer(seed),
}

# The reference simulator's placers under `--compat helios`: its "random" walks nodes in order.
HELIOS_PLACERS: dict[str, Callable[[Params, int], Placer]] = {
    "consolidate": lambda params, seed: HeliosConsolidate(),
    "random": lambda params, seed: FirstFit(),
    "first-fit": lambda params, seed: FirstFit(),
}

SIZERS: dict[str, Callable[[Params], Sizer]] = {
    "as-requested": lambda params: AsRequested(),
    "history": lambda params: HistorySizing(
        allowed=tuple(int(str(x)) for x in _list(params, "allowed_gpus")),
        max_factor=_float(params, "max_factor", 2.0),
        min_samples=min_samples(params),
    ),
}


def min_samples(params: Params) -> int:
    """The `min_samples` param of history sizing: finished jobs of a size needed before it is
    chosen, a whole number; ValueError naming the param otherwise. Unset: 5."""
    value = number_param(params, "min_samples", 5, MAX_MIN_SAMPLES, "a count of jobs")
    if not value.is_integer():
        raise ValueError(f"min_samples: expected a whole number of jobs, got {value:g}")
    return int(value)


# Every free-form param a SchedulingPolicy may set (spec.params), each with the reader that checks
# it: the queue policies' (`policies.QUEUE_PARAMS`) and history sizing's. The API refuses any
# other key, naming these.
PARAMS: dict[str, Callable[[Params], object]] = {**QUEUE_PARAMS, "min_samples": min_samples}
# Params the API sets from its typed fields (placement.maxWaitSeconds, sizing.allowedGPUs and
# sizing.maxFactor), read by the topology-aware placer and history sizing above.
TYPED_PARAMS = frozenset({"max_wait", "allowed_gpus", "max_factor"})


def check_params(params: Params) -> None:
    """ValueError for the first unknown or bad free-form param, naming it (and the known ones)."""
    for key in sorted(params):
        if key not in PARAMS:
            raise ValueError(f"{key}: unknown param; known: {', '.join(sorted(PARAMS))}")
        PARAMS[key](params)


def make_placer(name: str, params: Params, compat: str | None = None, seed: int = 0) -> Placer:
    registry = HELIOS_PLACERS if compat == "helios" else PLACERS
    return _lookup(registry, name, "placement")(params, seed)


def make_sizer(name: str, params: Params) -> Sizer:
    return _lookup(SIZERS, name, "sizing")(params)


T = TypeVar("T")


def known() -> dict[str, list[str]]:
    """Every registered plugin name, by kind (for --help and validation messages)."""
    return {"queue": list(QUEUE_POLICIES), "placement": list(PLACERS), "sizing": list(SIZERS)}


def _lookup(registry: Mapping[str, T], name: str, kind: str) -> T:
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {kind} policy {name!r}; known: {', '.join(registry)}") from None


def _float(params: Params, key: str, default: float) -> float:
    value = params.get(key, default)
    return float(value)  # type: ignore[arg-type]


def _list(params: Params, key: str) -> list[object]:
    value = params.get(key, ())
    if isinstance(value, str):
        return [v for v in value.split(",") if v.strip()]
    return list(value)  # type: ignore[call-overload,no-any-return]
