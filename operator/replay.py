"""TraceReplay: replay a trace on the declared cluster under candidate policies and pick the winner.

A plain, synchronous function of its inputs (`run_replay`), so the kopf layer can run it in a
worker thread, off the event loop, and the emulator can call it inline. The current policies are
always replayed too, as `current`: a candidate must beat them to win, and only a winner other
than `current` is ever promoted into the partitions' SchedulingPolicies.

With `spec.search` the replay also searches policy settings with the code of `gputwin tune`
(`gputwin.sim.tune`, optuna loaded only then), in memory, one trial after another (so a seed
always gives the same trials). The best RECORDED_TRIALS distinct policies join the ranking as
candidates named with their knobs; a winning trial is promoted whole (names, backfill, wait
bound, sizing factor, params), so the SchedulingPolicy then says exactly what was simulated.

A trace kept in a ConfigMap (`spec.trace.configMap`, always of the replay's own namespace) is
read from the store beforehand, on the thread that owns the store (`trace_source`), and handed to
`run_replay` as text. A file (`spec.trace.file`) is checked there too, by the sandbox of
`gputwin.operator.trace_files` (allowed folders, regular files, a size cap), and read by
`run_replay`. A missing ConfigMap, key or file fails the replay for that generation: fix it,
then edit or re-create the replay.

A live source (`spec.trace.live`) has no trace: the controller hands `run_replay` its present as
a `Snapshot` (`gputwin.operator.live_replay`), and the candidates are ranked on its forecast by the
same rule (ties to `current`, only a winner other than `current` promoted).

Neither a file nor a ConfigMap is written by whoever may create a TraceReplay, so no status or
Event quotes either: reader errors are `redacted`, and a reader that fails in any other way fails
the replay with its error's type only (never the command or the operator pass running it).
"""

from __future__ import annotations

import dataclasses
import logging
import tempfile
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, Literal, TypeAlias

from gputwin.adapters.traces import TraceError, read_trace
from gputwin.api.convert import candidate, candidate_patch, candidate_result, cluster_spec, policy_document
from gputwin.api.status import CandidateResult
from gputwin.api.v1alpha1 import (
    GPUPartition,
    Resource,
    SchedulingPolicy,
    SwitchTopology,
    TraceReplaySpec,
)
from gputwin.api.validate import Document, check_cluster
from gputwin.api.workloads import search_vocabulary
from gputwin.core.model import Candidate, ClusterSpec, JobSpec, PolicySpec
from gputwin.operator.cluster import ClusterView
from gputwin.operator.live_replay import NOTHING_QUEUED, live_message, live_scores
from gputwin.operator.store import Store
from gputwin.operator.trace_files import TraceAccess, TraceFile, TraceRefused, locate, opened, redacted
from gputwin.sim.evaluation import Scores, rank
from gputwin.sim.run import Overrides, RunError, run_summary
from gputwin.sim.space import Space, SpaceError, parse_space
from gputwin.twin.snapshot import Snapshot

CURRENT = "current"
# TraceSource.format -> the trace reader's format name (Philly traces are Helios-shaped CSVs).
FORMATS = {"philly": "helios"} | {f: f for f in ("auto", "helios", "alibaba", "sacct", "sacct-json", "helios-raw",
                                                 "swf", "philly-json", "pai")}  # fmt: skip
RECORDED_TRIALS = 5  # a search's best distinct policies shown in status (the rest: noise for readers)
# what a replay reads: a ConfigMap's text, a checked file, the live present, nothing yet
Trace: TypeAlias = str | TraceFile | Snapshot | None
log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ReplayCluster:
    """What a replay runs on: the cluster, and the SchedulingPolicy of each of its partitions."""

    spec: ClusterSpec
    policies: Mapping[str, str | None]  # partition -> policy name (None: the built-in default)
    # policy name -> the keys of its spec.params: a promoted search trial removes those it lacks
    params: Mapping[str, Collection[str]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """The outcome of one replay, ready for the TraceReplay status."""

    phase: Literal["Pending", "Succeeded", "Failed"]
    reason: str
    message: str
    candidates: tuple[CandidateResult, ...] = ()
    winner: str | None = None
    promotions: Mapping[str, dict[str, Any]] = field(default_factory=dict)  # policy -> spec patch
    trials: int = 0  # search trials run


@dataclass(frozen=True, slots=True)
class Ranked:
    """One replayed policy: its tie-break order, its result, and what promoting it would write."""

    order: int  # ties go to the earlier: current, then the candidates as listed, then search trials
    result: CandidateResult
    promotes: Candidate | PolicySpec | None  # None: current, nothing to promote

    def score(self, objective: str) -> float:
        return float(getattr(self.result.metrics, objective))

    @property
    def tiebreak(self) -> int:
        return self.order


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
        cluster_spec(topology, partitions, policies),
        {p.metadata.name: p.spec.policy for p in partitions},
        {p.metadata.name: tuple(p.spec.params) for p in policies},
    )


def trace_source(
    store: Store,
    namespace: str | None,
    spec: TraceReplaySpec,
    access: TraceAccess,
    annotations: Mapping[str, str] | None = None,
) -> Trace | ReplayResult:
    """What `run_replay` reads: a `configMap` source's text, a `file` source checked by the sandbox
    (None for other sources), or the Failed result saying why not. `annotations`: the replay's."""
    if spec.trace.file is not None:
        try:
            return locate(spec.trace.file, access, annotations)
        except TraceRefused as exc:
            return ReplayResult("Failed", exc.reason, exc.message)
    return trace_text(store, namespace, spec)


def trace_text(store: Store, namespace: str | None, spec: TraceReplaySpec) -> str | ReplayResult | None:
    """The trace of a `configMap` source (None for other sources), or the Failed result saying why not.

    Only the replay's own namespace is read (ConfigMapRef has no namespace field). A missing key
    does not list the keys there: a replay's author may not be allowed to read that ConfigMap.
    """
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
        return ReplayResult("Failed", "TraceNotFound", f"{where} has no key {ref.key}")
    return data[ref.key]


def run_replay(spec: TraceReplaySpec, cluster: ReplayCluster, trace: Trace = None) -> ReplayResult:
    """Replay the trace under `current`, every candidate and the search's trials; rank by the objective.

    `trace`: what `trace_source` returned: a `configMap` source's text, or the checked file.
    """
    try:
        space = None if spec.search is None else parse_space(spec.search.space, "spec.search.space",
                                                             search_vocabulary())  # fmt: skip
    except SpaceError as exc:
        return ReplayResult("Failed", "InvalidSearch", str(exc))
    if spec.trace.live is not None:
        return _live(spec, cluster, trace)
    jobs = _jobs(spec, trace)
    if isinstance(jobs, ReplayResult):
        return jobs
    try:
        runs, trials = _ranked(spec, space, cluster.spec, jobs)
    except RunError as exc:
        return ReplayResult("Failed", "ReplayFailed", str(exc))
    except Exception as exc:  # e.g. a trace value the simulator cannot handle: fail this replay only
        log.warning("TraceReplay simulation failed", exc_info=True)  # the details: for the operator's log
        return ReplayResult("Failed", "ReplayFailed", f"the simulation failed ({type(exc).__name__})")
    ranked = rank(runs, spec.objective)
    candidates = tuple(r.result for r in ranked)
    winner = candidates[0]
    promotions = _promotions(spec, cluster, ranked[0].promotes)
    message = _message(spec, candidates, trials)
    return ReplayResult("Succeeded", "Replayed", message, candidates, winner.name, promotions, trials)


def _live(spec: TraceReplaySpec, cluster: ReplayCluster, snap: Trace) -> ReplayResult:
    """Rank `current` and the candidates on the forecast of the live present `snap`."""
    if not isinstance(snap, Snapshot):  # a plan made without the controller's present
        return ReplayResult("Pending", "ClusterNotReady", "spec.trace.live: no live scheduler yet")
    if not snap.pending:  # Pending, not Failed: the replay runs once jobs queue
        return ReplayResult("Pending", "NothingQueued", NOTHING_QUEUED)
    try:
        scored = live_scores(spec, cluster.spec, snap)
    except Exception as exc:  # fail this replay only; the details go to the operator's log
        log.warning("live TraceReplay failed", exc_info=True)
        return ReplayResult("Failed", "ReplayFailed", f"the forecast failed ({type(exc).__name__})")
    runs = [Ranked(i, candidate_result(CURRENT if c is None else c.name, s), c)
            for i, (c, s) in enumerate(scored)]  # fmt: skip
    ranked = rank(runs, spec.objective)
    candidates = tuple(r.result for r in ranked)
    message = _message(spec, candidates, 0).split("; ")[0] + "; " + live_message(spec, snap, len(candidates))
    return ReplayResult("Succeeded", "Forecast", message, candidates, candidates[0].name,
                        _promotions(spec, cluster, ranked[0].promotes))  # fmt: skip


def _jobs(spec: TraceReplaySpec, trace: Trace) -> tuple[JobSpec, ...] | ReplayResult:
    """The trace's jobs, or the Failed result saying why they cannot be read (never quoting them)."""
    if spec.trace.sacct is not None:
        message = ("spec.trace.sacct: replaying SLURM accounting arrives with the SLURM issue; "
                   "use a file or configMap trace for now")  # fmt: skip
        return ReplayResult("Failed", "UnsupportedSource", message)
    fmt = FORMATS[spec.trace.format]
    ref = spec.trace.config_map
    if ref is not None:
        if not isinstance(trace, str):
            return ReplayResult("Failed", "TraceNotFound", "spec.trace.configMap: the trace was not read")
        text = trace
        return _read(f"spec.trace.configMap ({ref.name}/{ref.key})", lambda: _read_text(text, ref.key, fmt))
    if not isinstance(trace, TraceFile):  # a plan made without the sandbox: never read unchecked
        return ReplayResult("Failed", "TraceNotAllowed", "spec.trace.file: the file was not checked")
    return _read(f"spec.trace.file ({trace.shown})", lambda: _read_file(trace, fmt))


def _read(where: str, read: Callable[[], tuple[JobSpec, ...]]) -> tuple[JobSpec, ...] | ReplayResult:
    try:
        return read()
    except TraceRefused as exc:
        return ReplayResult("Failed", exc.reason, exc.message)
    except TraceError as exc:
        return ReplayResult("Failed", "TraceUnreadable", redacted(exc, where))
    except UnicodeError:
        return ReplayResult("Failed", "TraceUnreadable", f"{where}: not UTF-8 text")
    except OSError as exc:  # str(exc) would name /proc/self/fd/N or a temporary file
        return ReplayResult("Failed", "TraceUnreadable", f"{where}: {exc.strerror or 'cannot be read'}")
    except Exception as exc:  # a reader's failure on hostile input fails this replay, nothing else
        log.warning("TraceReplay trace reader failed", exc_info=True)
        return ReplayResult("Failed", "TraceUnreadable", f"{where}: the reader failed ({type(exc).__name__})")


def _read_file(trace: TraceFile, fmt: str) -> tuple[JobSpec, ...]:
    with opened(trace) as path:
        return tuple(read_trace(path, fmt).jobs)


def _read_text(text: str, key: str, fmt: str) -> tuple[JobSpec, ...]:
    """Read a trace held as text: written to a temporary file with its key's suffix (`jobs.csv`)."""
    suffix = PurePosixPath(key).suffix
    if suffix.lower() in (".gz", ".bz2", ".xz", ".zst"):  # ConfigMap data is text: never compressed
        suffix = PurePosixPath(PurePosixPath(key).stem).suffix
    with tempfile.TemporaryDirectory(prefix="gputwin-trace-") as folder:
        path = Path(folder) / f"trace{suffix}"
        path.write_text(text, encoding="utf-8")
        return tuple(read_trace(path, fmt).jobs)


def _ranked(
    spec: TraceReplaySpec, space: Space | None, cluster: ClusterSpec, jobs: Sequence[JobSpec]
) -> tuple[list[Ranked], int]:
    """`current`, each candidate in order, then the search's best trials; and the trials run."""
    seed = 0 if spec.search is None else spec.search.seed  # one seed for every run: alike judged alike
    runs: list[Ranked] = []
    for c in map(candidate, spec.candidates):
        runs.append(Ranked(len(runs) + 1, candidate_result(c.name, _run(cluster, jobs, c, seed)), c))
    if spec.search is None or space is None:
        return [Ranked(0, candidate_result(CURRENT, _run(cluster, jobs, Overrides(), seed)), None), *runs], 0
    from gputwin.sim.tune import describe, tune  # optuna loads only when a replay searches

    found = tune(cluster, jobs, space, storage=None, objective=spec.objective, budget=spec.search.budget,
                 seed=seed)  # fmt: skip
    current = Ranked(0, candidate_result(CURRENT, found.baseline["tune"]), None)  # the search ran it already
    seen, listed = {CURRENT, *(r.result.name for r in runs)}, len(runs)
    for row in found.trials:  # best first; a policy tried twice, or listed, is shown once
        name = describe(row.policy)
        if len(runs) - listed == RECORDED_TRIALS:
            break
        if name not in seen:
            seen.add(name)
            runs.append(Ranked(len(runs) + 1, candidate_result(name, row.metrics, row.number), row.policy))
    return [current, *runs], len(found.trials)


def _run(cluster: ClusterSpec, jobs: Sequence[JobSpec], overrides: Overrides | Candidate, seed: int
         ) -> Scores:  # fmt: skip
    summary, _ = run_summary(cluster, jobs, overrides=overrides, seed=seed)
    return summary.scores()


def _promotions(
    spec: TraceReplaySpec, cluster: ReplayCluster, winner: Candidate | PolicySpec | None
) -> dict[str, dict[str, Any]]:
    """SchedulingPolicy name -> merge patch, for every policy of the replayed partitions."""
    if not spec.promote or winner is None:
        return {}
    names = sorted({p for p in cluster.policies.values() if p is not None})
    if isinstance(winner, Candidate):  # names only: the policies keep their knobs
        return {name: candidate_patch(winner) for name in names}
    return {name: _policy_patch(winner, cluster.params.get(name, ())) for name in names}


def _policy_patch(policy: PolicySpec, old_params: Collection[str]) -> dict[str, Any]:
    """The merge patch making a SchedulingPolicy convert to exactly `policy` (`policy_document`, its
    checkpoint cost kept, as the search kept each partition's): the typed knobs, and its params in
    place of the old ones (a key the policy lacks is deleted)."""
    patch = policy_document(dataclasses.replace(policy, checkpoint_seconds=None))
    params = patch["params"]
    patch["params"] = {**{k: None for k in old_params if k not in params}, **params}
    return patch


def _message(spec: TraceReplaySpec, ranked: Sequence[CandidateResult], trials: int) -> str:
    objective = spec.objective
    best = ranked[0]
    current = next(c for c in ranked if c.name == CURRENT)
    value = getattr(best.metrics, objective)
    text = f"{best.name} wins on {objective}: {value:,.1f} s"
    if best.name != CURRENT:
        text += f" (current policies: {getattr(current.metrics, objective):,.1f} s)"
    searched = f" ({trials} search trial{'' if trials == 1 else 's'})" if spec.search is not None else ""
    return f"{text}; {best.metrics.jobs:,} jobs replayed under {len(ranked)} policies{searched}"


__all__ = [
    "CURRENT",
    "RECORDED_TRIALS",
    "ReplayCluster",
    "ReplayResult",
    "replay_cluster",
    "Trace",
    "run_replay",
    "trace_source",
    "trace_text",
]
