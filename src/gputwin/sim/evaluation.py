"""Evaluation, written once: the metric names, the typed run summary, and the one ranking.

`gputwin simulate`, `compare`, `tune`, `demo` and a TraceReplay all judge a policy by the same
`Summary` of a run (`gputwin.sim.run.run_summary`): overall metrics, per-partition metrics and the
run's counts. Its `to_json()` is the summary object those commands print and write (keys and
values as README documents them); `from_json` reads one back (a sweep's task results).

`METRICS` names every metric an evaluation knows, with the direction that makes it better;
`TENANCY_METRICS` the cluster-wide ones measured only on some clusters (Jain's index with tenants,
fragmentation when a job asks for more than one GPU), which a summary, a table and a trial's scores
carry only when the cluster has tenants, so a cluster without them prints what it always did. The
`OBJECTIVES` are those a search or a ranking may optimise. `rank` orders results by one objective,
best first, ties broken by each result's own `tiebreak` (a name, a trial number, a listing order),
so the order never depends on which run finished first.

A candidate (one policy combination) is `gputwin.core.model.Candidate`; its wire format in a
TraceReplay is `gputwin.api.workloads.Candidate`, converted in `gputwin.api.convert`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import Field, dataclass, field, fields
from typing import Any, Literal, Protocol, TypeVar

from gputwin.core.model import Candidate

Direction = Literal["minimize", "maximize"]

# Every metric of a run, in the order tables list them, and which way is better.
METRICS: dict[str, Direction] = {
    "jobs": "maximize", "avg_jct": "minimize", "p50_jct": "minimize", "p95_jct": "minimize",
    "p99_jct": "minimize", "avg_queue": "minimize", "p99_queue": "minimize", "gpu_utilization": "maximize",
    "avg_overhead": "minimize", "preemptions": "minimize", "makespan": "minimize",
}  # fmt: skip
# Cluster-wide, measured only on some clusters (module doc); shown with tenants.
TENANCY_METRICS: dict[str, Direction] = {"jain": "maximize", "fragmented_gpus": "minimize"}
DIRECTIONS: dict[str, Direction] = {**METRICS, **TENANCY_METRICS}
# What `gputwin tune --objective` and a TraceReplay's spec.objective may optimise.
OBJECTIVES: dict[str, Direction] = {
    k: METRICS[k]
    for k in ("avg_jct", "p50_jct", "p95_jct", "p99_jct", "avg_queue", "p99_queue", "makespan",
              "gpu_utilization")  # fmt: skip
} | TENANCY_METRICS
# The columns of a ranked table (compare's table and CSV, the demo, the HTML report), in order.
TABLE_METRICS = ("jobs", "avg_jct", "p99_jct", "avg_queue", "p99_queue", "gpu_utilization", "avg_overhead",
                 "preemptions")  # fmt: skip
Scores = dict[str, float]  # metric name -> value, as a tune trial stores them


@dataclass(frozen=True, slots=True)
class JobMetrics:
    """Count, mean and percentile JCT and queueing delay, overhead and preemptions of some jobs."""

    jobs: int = 0
    avg_jct: float = 0.0
    avg_queue: float = 0.0
    p50_jct: float = 0.0
    p95_jct: float = 0.0
    p99_jct: float = 0.0
    p99_queue: float = 0.0
    preemptions: int = 0
    avg_overhead: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True)
class PartitionMetrics(JobMetrics):
    """One partition's jobs' metrics, its GPUs and their utilisation over the run's makespan."""

    gpus: int = 0
    gpu_utilization: float = 0.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartitionMetrics:
        return cls(**_numbers(data, fields(cls)))


@dataclass(frozen=True, slots=True)
class TenantMetrics(JobMetrics):
    """One tenant's jobs' metrics and the service its quotas got (docs/tenancy.md), over every
    partition where it has a quota: GPU-hours used, of them borrowed (above its guarantee), its
    guaranteed GPUs, and the share of its guarantee delivered while it had demand for it."""

    gpu_hours: float = 0.0
    borrowed_gpu_hours: float = 0.0
    guaranteed_gpus: int = 0
    quota_delivered: float = 1.0

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TenantMetrics:
        return cls(**_numbers(data, fields(cls)))


@dataclass(frozen=True, slots=True)
class Summary(JobMetrics):
    """One run: overall metrics, per-partition metrics (by name, sorted), and its counts."""

    makespan: float = 0.0  # first submit to last end
    gpu_utilization: float = 0.0
    partitions: Mapping[str, PartitionMetrics] = field(default_factory=dict)
    wall_seconds: float = 0.0
    rejected: Mapping[str, int] = field(default_factory=dict)  # reason -> jobs refused
    resized: int = 0  # jobs whose GPU count a sizing policy changed
    policies: Mapping[str, str] = field(default_factory=dict)  # partition -> policy label
    compat: str | None = None
    utilization_series: tuple[tuple[float, float], ...] = ()  # (t, busy fraction) per interval
    tenants: Mapping[str, TenantMetrics] = field(default_factory=dict)  # by name; empty without quotas
    jain: float | None = None  # Jain's fairness index over tenants with a guarantee
    fragmented_gpus: float | None = None  # time-averaged (gputwin.sim.metrics); None: not measured
    sharing: Mapping[str, float] | None = None  # GPU shares' figures (gputwin.sim.shares); None: no shares

    def to_json(self) -> dict[str, Any]:
        """The summary object of `gputwin simulate --json` (plus `utilization_series`)."""
        out = {f.name: getattr(self, f.name) for f in fields(JobMetrics)}
        series = [{"t": t, "gpu_utilization": u} for t, u in self.utilization_series]
        out.update(makespan=self.makespan, gpu_utilization=self.gpu_utilization,
                   partitions={name: m.to_json() for name, m in self.partitions.items()},
                   wall_seconds=self.wall_seconds, rejected=dict(self.rejected), resized=self.resized,
                   policies=dict(self.policies), compat=self.compat, utilization_series=series)  # fmt: skip
        if self.tenants:  # a cluster without quotas prints what it always did
            out.update(tenants={name: m.to_json() for name, m in self.tenants.items()}, jain=self.jain)
        if self.fragmented_gpus is not None:  # 1-GPU-only traces print what they always did
            out["fragmented_gpus"] = self.fragmented_gpus
        if self.sharing is not None:  # traces without GPU shares print what they always did
            out["sharing"] = dict(self.sharing)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Summary:
        """The summary `to_json` wrote; KeyError or TypeError if `data` is not one."""
        metrics = _numbers(data, (f for f in fields(cls) if f.name in METRICS))
        points = data.get("utilization_series", ())
        series = tuple((float(p["t"]), float(p["gpu_utilization"])) for p in points)
        partitions = {name: PartitionMetrics.from_json(m) for name, m in data["partitions"].items()}
        tenants = {name: TenantMetrics.from_json(m) for name, m in data.get("tenants", {}).items()}
        return cls(**metrics, partitions=partitions,
                   wall_seconds=data["wall_seconds"], rejected=dict(data["rejected"]),
                   resized=data.get("resized", 0), policies=dict(data["policies"]), compat=data.get("compat"),
                   utilization_series=series, tenants=tenants, jain=data.get("jain"),
                   fragmented_gpus=data.get("fragmented_gpus"), sharing=data.get("sharing"))  # fmt: skip

    def scores(self, names: Iterable[str] | None = None) -> Scores:
        """The named overall metrics; by default METRICS, and TENANCY_METRICS with tenants.

        Unmeasured tenancy metrics score as what they mean: no fragmentation is measured when
        every job asks for one GPU (any free GPU hosts it: 0), no Jain's index when no tenant
        used a GPU (0, the worst: a search must not prefer a policy that ran nothing)."""
        if names is None:
            names = [*METRICS, *(TENANCY_METRICS if self.tenants else ())]
        return {name: self._score(_metric(name)) for name in names}

    def _score(self, name: str) -> float:
        value: float | None = getattr(self, name)
        return 0.0 if value is None else value

    @property
    def tenancy_row(self) -> dict[str, Any]:
        """What a ranked row adds with tenants: the tenancy metrics and the per-tenant figures."""
        if not self.tenants:
            return {}
        return {"jain": self.jain, "fragmented_gpus": self.fragmented_gpus,
                "tenants": {name: m.to_json() for name, m in self.tenants.items()}}  # fmt: skip

    def partition_scores(self, partition: str, makespan: float, names: Iterable[str] = METRICS) -> Scores:
        """The named metrics of one partition's jobs alone (`makespan`: theirs, which no summary keeps)."""
        metrics = self.partitions[partition]
        return {name: makespan if name == "makespan" else getattr(metrics, _metric(name)) for name in names}


def _numbers(data: Mapping[str, Any], wanted: Iterable[Field[Any]]) -> dict[str, Any]:
    """The `wanted` fields of `data`; TypeError if one is not a number of its field's type."""
    out = {f.name: data[f.name] for f in wanted}
    for name, value in out.items():
        kind = int if name in ("jobs", "preemptions", "gpus", "guaranteed_gpus") else (int, float)
        if not isinstance(value, kind) or isinstance(value, bool):
            raise TypeError(f"{name}: not a number")
    return out


def _metric(name: str) -> str:
    if name not in DIRECTIONS:
        raise KeyError(f"unknown metric {name!r}; known: {', '.join(DIRECTIONS)}")
    return name


class Rankable(Protocol):
    """What `rank` orders: a metric's value, and how an equal one is ordered (lower first)."""

    def score(self, objective: str) -> float: ...

    @property
    def tiebreak(self) -> int | str: ...


R = TypeVar("R", bound=Rankable)


def rank(results: Iterable[R], objective: str) -> list[R]:
    """`results` best first by `objective` (its direction from DIRECTIONS); equal ones by tiebreak."""
    sign = -1.0 if DIRECTIONS[_metric(objective)] == "maximize" else 1.0
    return sorted(results, key=lambda r: (sign * r.score(objective), r.tiebreak))


def table_metrics(summaries: Iterable[Summary]) -> tuple[str, ...]:
    """The columns of a ranked table of `summaries`: TABLE_METRICS, then TENANCY_METRICS if some
    candidate's cluster has tenants."""
    return (*TABLE_METRICS, *(TENANCY_METRICS if any(s.tenants for s in summaries) else ()))


def table_row(name: str, summary: Summary) -> dict[str, Any]:
    """A ranked table's row: the candidate's name and TABLE_METRICS."""
    return {"candidate": name, **summary.scores(TABLE_METRICS)}


__all__ = [
    "Candidate",
    "DIRECTIONS",
    "Direction",
    "JobMetrics",
    "METRICS",
    "OBJECTIVES",
    "PartitionMetrics",
    "Rankable",
    "Scores",
    "Summary",
    "TABLE_METRICS",
    "TENANCY_METRICS",
    "TenantMetrics",
    "rank",
    "table_metrics",
    "table_row",
]

