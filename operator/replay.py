"""TraceReplay: replay a trace on the declared cluster under candidate policies and pick the winner.

A plain, synchronous function of its inputs (`run_replay`), so the kopf layer can run it in a
worker thread, off the event loop, and the emulator can call it inline. The current policies are
always replayed too, as `current`: a candidate must beat them to win, and only a winner other
than `current` is ever promoted into the partitions' SchedulingPolicies.

A trace kept in a ConfigMap (`spec.trace.configMap`) is read from the store beforehand, on the
thread that owns the store (`trace_text`), and handed to `run_replay` as text. A missing
ConfigMap or key fails the replay for that generation: fix it, then edit or re-create the replay.
"""

from __future__ import annotations

import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
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
from gputwin.operator.store import Store
from gputwin.sim.run import Overrides, RunError, policy_label, run

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
    return policy_label(candidate.queue, candidate.placement, candidate.sizing, candidate.backfill)


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


def trace_text(store: Store, namespace: str | None, spec: TraceReplaySpec) -> str | ReplayResult | None:
    """The trace of a `configMap` source (None for other sources), or the Failed result saying why not."""
    ref = spec.trace.config_map
    if ref is None:
        return None
    namespace = namespace or "default"
    data = store.get_configmap(namespace, ref.name)
    where = f"spec.trace.configMap: ConfigMap {namespace}/{ref.name}"
    if data is None:
        fix = f"create it with the trace under key {ref.key}, then edit or re-create this TraceReplay"
        return ReplayResult("Failed", "TraceNotFound", f"{where} not found; {fix}")
    if ref.key not in data:
        keys = ", ".join(sorted(data)) or "none"
        return ReplayResult("Failed", "TraceNotFound", f"{where} has no key {ref.key} (its keys: {keys})")
    return data[ref.key]


def run_replay(spec: TraceReplaySpec, cluster: ReplayCluster, trace: str | None = None) -> ReplayResult:
    """Replay the trace under `current` and every candidate; rank them by the objective.

    `trace`: the text of a `configMap` source (see `trace_text`); file sources are read here.
    """
    if spec.trace.sacct is not None:
        message = ("spec.trace.sacct: replaying SLURM accounting arrives with the SLURM issue; "
                   "use a file or configMap trace for now")  # fmt: skip
        return ReplayResult("Failed", "UnsupportedSource", message)
    fmt = FORMATS[spec.trace.format]
    if spec.trace.config_map is not None:
        if trace is None:
            return ReplayResult("Failed", "TraceNotFound", "spec.trace.configMap: the trace was not read")
        where = f"spec.trace.configMap ({spec.trace.config_map.name}/{spec.trace.config_map.key})"
        try:
            jobs = _read_text(trace, spec.trace.config_map.key, fmt)
        except (TraceError, OSError, UnicodeError) as exc:
            return ReplayResult("Failed", "TraceUnreadable", f"{where}: {exc}")
    else:
        assert spec.trace.file is not None  # exactly one source is set (the model checks)
        try:
            jobs = read_trace(Path(spec.trace.file), fmt).jobs
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


def _read_text(text: str, key: str, fmt: str) -> tuple[JobSpec, ...]:
    """Read a trace held as text: written to a temporary file with its key's suffix (`jobs.csv`)."""
    suffix = PurePosixPath(key).suffix
    if suffix.lower() in (".gz", ".bz2", ".xz", ".zst"):  # ConfigMap data is text: never compressed
        suffix = PurePosixPath(PurePosixPath(key).stem).suffix
    with tempfile.TemporaryDirectory(prefix="gputwin-trace-") as folder:
        path = Path(folder) / f"trace{suffix}"
        path.write_text(text, encoding="utf-8")
        return tuple(read_trace(path, fmt).jobs)


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


__all__ = ["CURRENT", "ReplayCluster", "ReplayResult", "label", "replay_cluster", "run_replay", "trace_text"]
