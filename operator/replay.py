"""TraceReplay: replay a trace on the declared cluster under candidate policies and pick the winner.

A plain, synchronous function of its inputs (`run_replay`), so the kopf layer can run it in a
worker thread, off the event loop, and the emulator can call it inline. The current policies are
always replayed too, as `current`: a candidate must beat them to win, and only a winner other
than `current` is ever promoted into the partitions' SchedulingPolicies.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from gputwin.adapters.traces import TraceError, read_trace
from gputwin.api.convert import cluster_spec
from gputwin.api.status import CandidateResult, ReplayMetrics
from gputwin.api.v1alpha1 import (
    Candidate,
    GPUPartition,
    Resource,
    SchedulingPolicy,
    SwitchTopology,
    TraceReplaySpec,
)
from gputwin.api.validate import Document, check_cluster
from gputwin.core.model import ClusterSpec, JobSpec
from gputwin.operator.cluster import ClusterView
from gputwin.sim.run import Overrides, RunError, run

CURRENT = "current"
# TraceSource.format -> the trace reader's format name (Philly traces are Helios-shaped CSVs).
FORMATS = {"auto": "auto", "helios": "helios", "philly": "helios", "alibaba": "alibaba", "sacct": "sacct"}
METRICS = ("jobs", "avg_jct", "avg_queue", "p50_jct", "p99_jct", "p99_queue", "makespan")


@dataclass(frozen=True, slots=True)
class ReplayCluster:
    """What a replay runs on: the cluster, and the SchedulingPolicy of each of its partitions."""

    spec: ClusterSpec
    policies: Mapping[str, str | None]  # partition -> policy name (None: the built-in default)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of one replay, ready for the TraceReplay status."""

    phase: Literal["Pending", "Succeeded", "Failed"]
    reason: str
    message: str
    candidates: tuple[CandidateResult, ...] = ()
    winner: str | None = None
    promotions: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # policy -> spec patch


def label(candidate: Candidate) -> str:
    """`sjf/consolidate/as-requested+backfill`: how the status names a candidate."""
    backfill = "+backfill" if candidate.backfill else ""
    return f"{candidate.queue}/{candidate.placement}/{candidate.sizing}{backfill}"


def replay_cluster(view: ClusterView, spec: TraceReplaySpec) -> ReplayCluster | str:
    """The cluster to replay on (the topology and its chosen, else all, partitions), or why there is none."""
    topology = next(
        (
            d.model
            for d in view.of("SwitchTopology")
            if d.name == spec.topology and isinstance(d.model, SwitchTopology)
        ),
        None,
    )
    if topology is None:
        return f"spec.topology: no valid SwitchTopology {spec.topology!r}"
    partitions = [d.model for d in view.of("GPUPartition") if isinstance(d.model, GPUPartition)]
    if spec.partitions:
        missing = sorted(set(spec.partitions) - {p.metadata.name for p in partitions})
        if missing:
            return f"spec.partitions: no valid GPUPartition {', '.join(repr(m) for m in missing)}"
        partitions = [p for p in partitions if p.metadata.name in spec.partitions]
    partitions = [p for p in partitions if p.spec.topology == spec.topology]
    if not partitions:
        return f"spec.partitions: SwitchTopology {spec.topology!r} has no GPUPartition"
    policies = [d.model for d in view.of("SchedulingPolicy") if isinstance(d.model, SchedulingPolicy)]
    resources: list[Resource] = [topology, *partitions, *policies]
    docs = [Document(f"{r.kind}/{r.metadata.name}", r) for r in resources]
    problems = check_cluster(docs, "cluster")
    if problems:
        return str(problems[0])
    return ReplayCluster(
        cluster_spec(topology, partitions, policies), {p.metadata.name: p.spec.policy for p in partitions}
    )


def run_replay(spec: TraceReplaySpec, cluster: ReplayCluster) -> ReplayResult:
    """Replay the trace under `current` and every candidate; rank them by the objective."""
    if spec.trace.file is None:
        source = "configMap" if spec.trace.config_map is not None else "sacct"
        return ReplayResult(
            "Failed", "UnsupportedSource", f"spec.trace.{source}: only file traces can be replayed yet"
        )
    try:
        jobs = read_trace(Path(spec.trace.file), FORMATS[spec.trace.format]).jobs
    except (TraceError, OSError) as exc:
        return ReplayResult("Failed", "TraceUnreadable", f"spec.trace.file: {exc}")
    try:
        results = _candidates(spec.candidates, cluster.spec, jobs)
    except RunError as exc:
        return ReplayResult("Failed", "ReplayFailed", str(exc))
    ranked = sorted(results, key=lambda r: (getattr(r[1].metrics, spec.objective), r[0]))
    candidates = tuple(r[1] for r in ranked)
    winner = candidates[0]
    promotions = _promotions(spec, cluster, ranked[0][2]) if winner.name != CURRENT else {}
    return ReplayResult(
        "Succeeded", "Replayed", _message(spec, candidates), candidates, winner.name, promotions
    )


def _candidates(
    candidates: Sequence[Candidate], cluster: ClusterSpec, jobs: Sequence[JobSpec]
) -> list[tuple[int, CandidateResult, Candidate | None]]:
    """(rank tie-break, result, candidate) for `current` (first) and each candidate in order."""
    runs: list[tuple[str, Overrides, Candidate | None]] = [(CURRENT, Overrides(), None)]
    for c in candidates:
        runs.append((label(c), Overrides(c.queue, c.placement, c.sizing, c.backfill), c))
    out = []
    for index, (name, overrides, candidate) in enumerate(runs):
        summary, _ = run(cluster, jobs, overrides=overrides)
        metrics = ReplayMetrics.model_validate({k: summary[k] for k in METRICS})
        out.append((index, CandidateResult(name=name, metrics=metrics), candidate))
    return out


def _promotions(
    spec: TraceReplaySpec, cluster: ReplayCluster, winner: Candidate | None
) -> dict[str, dict[str, Any]]:
    if not spec.promote or winner is None:
        return {}
    patch = {
        "queue": {"policy": winner.queue, "backfill": winner.backfill},
        "placement": {"policy": winner.placement},
        "sizing": {"policy": winner.sizing},
    }
    return {policy: patch for policy in sorted({p for p in cluster.policies.values() if p is not None})}


def _message(spec: TraceReplaySpec, ranked: Sequence[CandidateResult]) -> str:
    objective = spec.objective
    best = ranked[0]
    current = next(c for c in ranked if c.name == CURRENT)
    value = getattr(best.metrics, objective)
    text = f"{best.name} wins on {objective}: {value:,.1f} s"
    if best.name != CURRENT:
        text += f" (current policies: {getattr(current.metrics, objective):,.1f} s)"
    return f"{text}; {best.metrics.jobs:,} jobs replayed under {len(ranked)} policies"


__all__ = ["CURRENT", "ReplayCluster", "ReplayResult", "label", "replay_cluster", "run_replay"]
