"""One simulation run as users ask for it: a cluster, a trace, optional policy overrides.

`run` is what `gputwin simulate`, `gputwin demo` and the benchmarks call. It applies command-line
overrides to every partition's policy, checks the combination (compat mode has rules of its own),
replays the trace and returns the typed summary (`run_summary`; `run` gives its JSON object, the
`--json` output) with the raw outcome. A table of per-job estimates (`estimates`, from
`simulate --estimates`) replaces the learnt history as qssf's estimator; compat mode reproduces
the reference's qssf only with one, as its QSSF ranks by such a table.
"""

from __future__ import annotations

import dataclasses
import gc
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from gputwin.core.history import Estimator, TableEstimator
from gputwin.core.model import Candidate, ClusterSpec, JobSpec, PolicySpec, policy_label
from gputwin.core.plugins import known
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.errors import InputError
from gputwin.sim.engine import SimOutcome, Simulator
from gputwin.sim.evaluation import Summary
from gputwin.sim.metrics import jain_index, summarize, tenant_metrics, utilization_series
from gputwin.sim.shares import share_metrics

HELIOS_QUEUES = ("fifo", "sjf", "srtf")
HELIOS_PLACERS = ("consolidate", "random")


class RunError(InputError, ValueError):
    """A combination of options that cannot run; the message says which and why."""


@dataclass(frozen=True, slots=True)
class Overrides:
    """Policy settings given on the command line; None keeps what the cluster file says."""

    queue: str | None = None
    placement: str | None = None
    sizing: str | None = None
    backfill: bool | None = None

    def apply(self, policy: PolicySpec) -> PolicySpec:
        changes = {k: v for k, v in dataclasses.asdict(self).items() if v is not None}
        return dataclasses.replace(policy, **changes) if changes else policy


def with_overrides(cluster: ClusterSpec, overrides: Overrides | Candidate) -> ClusterSpec:
    parts = tuple(dataclasses.replace(p, policy=overrides.apply(p.policy)) for p in cluster.partitions)
    return dataclasses.replace(cluster, partitions=parts)


def check(cluster: ClusterSpec, compat: str | None, estimates: bool = False) -> None:
    """Refuse unknown plugin names and what compat mode cannot reproduce, before running;
    `estimates`: a per-job estimate table is given (only qssf reads one)."""
    names = known()
    if estimates and not any(part.policy.queue == "qssf" for part in cluster.partitions):
        raise RunError("--estimates: only the qssf queue policy reads run-time estimates, and no partition "
                       "runs qssf (add --policy qssf)")  # fmt: skip
    for part in cluster.partitions:
        pol = part.policy
        for kind, value in (("queue", pol.queue), ("placement", pol.placement), ("sizing", pol.sizing)):
            if value not in names[kind]:
                known_names = ", ".join(names[kind])
                raise RunError(f"partition {part.name}: unknown {kind} policy {value!r}; known: {known_names}")
        if compat == "helios":
            _check_helios(cluster, part.name, pol, estimates)


def _check_helios(cluster: ClusterSpec, name: str, pol: PolicySpec, estimates: bool) -> None:
    if pol.queue == "qssf" and not estimates:
        raise RunError("--compat helios reproduces qssf only with --estimates FILE (the reference ranks "
                       f"by a per-job estimate table, `jobname,priority`); partition {name} has qssf")  # fmt: skip
    if (pol.queue not in HELIOS_QUEUES and pol.queue != "qssf") or pol.placement not in HELIOS_PLACERS:
        raise RunError(
            f"--compat helios reproduces queue policies {'/'.join(HELIOS_QUEUES)} (and qssf with --estimates) "
            f"with placers {'/'.join(HELIOS_PLACERS)}; partition {name} has {pol.queue}/{pol.placement}"
        )
    if pol.backfill or pol.sizing != "as-requested":
        raise RunError(f"--compat helios has no backfill or GPU sizing (partition {name})")
    sizes = {n.gpus for n in cluster.topology.nodes}
    if sizes != {8}:
        raise RunError(f"--compat helios needs 8-GPU nodes; this cluster has {sorted(sizes)}")


def run_summary(
    cluster: ClusterSpec,
    jobs: Iterable[JobSpec],
    *,
    overrides: Overrides | Candidate = Overrides(),
    compat: str | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    util_interval: float = 3600.0,
    estimates: TableEstimator | None = None,
    estimator: str | Callable[[], Estimator] = "history",
    origin: float = 0.0,
) -> tuple[Summary, SimOutcome]:
    """Replay `jobs` (`overrides`: command-line settings or a Candidate); return the typed summary
    and the outcome (finished jobs, ...); `jobs` may be an iterator, read as the replay reaches
    each (sorted by submit: a long trace need not be resident). `estimator` names the run-time estimator QSSF uses
    (`gputwin.estimators.ESTIMATORS`; "history" is the core's own) or builds it; `origin` is the
    epoch time of the trace's 0 (`TraceResult.origin`: a named estimator's submit hour and weekday);
    `estimates`, a fixed table (the reference simulator's), takes the place of the history."""
    cluster = with_overrides(cluster, overrides)
    check(cluster, compat, estimates is not None)
    if estimates is not None and estimator != "history":
        raise RunError("--estimates gives qssf a fixed table; it cannot be combined with --estimator")
    if compat == "helios":
        options = SchedulerOptions.helios(seed, estimates)
    else:
        options = SchedulerOptions(seed=seed, estimates=estimates)
    if callable(estimator):
        options = dataclasses.replace(options, estimator=estimator)
    elif estimator != "history":
        from gputwin.estimators import factory  # numpy and LightGBM stay off the default path

        jobs = jobs if isinstance(jobs, Sequence) else list(jobs)  # a learned estimator reads them all
        options = dataclasses.replace(options, estimator=factory(estimator, jobs, seed, origin))
    started = time.perf_counter()
    outcome, scheduler = _simulate(cluster, jobs, options, progress, util_interval)
    wall = time.perf_counter() - started
    series = utilization_series(outcome.busy, sorted(outcome.busy.totals))
    summary = dataclasses.replace(
        summarize(outcome.finished, outcome.busy), wall_seconds=round(wall, 3),
        rejected=_count(r.reason for r in outcome.rejected), resized=outcome.resized,
        policies=_policies(cluster), compat=compat,
        utilization_series=tuple((p["t"], p["gpu_utilization"]) for p in series),
    )  # fmt: skip
    if any(part.quotas for part in cluster.partitions):
        summary = _with_tenants(summary, outcome, scheduler)
    if outcome.fragmented is not None and summary.makespan > 0:
        summary = dataclasses.replace(summary, fragmented_gpus=round(outcome.fragmented / summary.makespan, 3))
    if scheduler.saw_shares:  # GPU shares (gputwin.sim.shares)
        summary = dataclasses.replace(summary, sharing=share_metrics(outcome, scheduler.partitions, summary.makespan))
    return summary, outcome


def _simulate(
    cluster: ClusterSpec, jobs: Iterable[JobSpec], options: SchedulerOptions,
    progress: Callable[[int], None] | None, util_interval: float,
) -> tuple[SimOutcome, Scheduler]:  # fmt: skip
    """`gputwin.sim.engine.simulate`, keeping the scheduler: its quotas hold the tenants' service."""
    simulator = Simulator(cluster, options, util_interval)
    enabled = gc.isenabled()
    gc.disable()  # as `simulate` does: reference counting frees the run's acyclic objects
    try:
        return simulator.run(jobs, progress), simulator.scheduler
    finally:
        if enabled:
            gc.enable()


def _with_tenants(summary: Summary, outcome: SimOutcome, scheduler: Scheduler) -> Summary:
    end = max(outcome.finished.end, default=0.0)

    def tenant_of(partition: str, spec: JobSpec) -> str | None:
        quota = scheduler.partitions[partition].quota
        if quota is None:
            return None
        tenant = quota.tenant(spec.user)
        return None if tenant is None else quota.pool(tenant, spec.model)  # what `quota.tenant_of` reads

    tenants = tenant_metrics(outcome.finished, scheduler.tenant_usage(end), tenant_of)
    return dataclasses.replace(summary, tenants=tenants, jain=jain_index(tenants))


def run(
    cluster: ClusterSpec,
    jobs: Iterable[JobSpec],
    *,
    overrides: Overrides | Candidate = Overrides(),
    compat: str | None = None,
    seed: int = 0,
    progress: Callable[[int], None] | None = None,
    util_interval: float = 3600.0,
    estimates: TableEstimator | None = None,
    estimator: str | Callable[[], Estimator] = "history",
) -> tuple[dict[str, Any], SimOutcome]:
    """`run_summary` with the summary as its JSON object (the `--json` output)."""
    summary, outcome = run_summary(cluster, jobs, overrides=overrides, compat=compat, seed=seed, progress=progress,
                                   util_interval=util_interval, estimates=estimates, estimator=estimator)  # fmt: skip
    return summary.to_json(), outcome


def _count(reasons: Any) -> dict[str, int]:
    counts: dict[str, int] = {}
    for reason in reasons:
        counts[reason] = counts.get(reason, 0) + 1
    return counts


def _policies(cluster: ClusterSpec) -> Mapping[str, str]:
    return {
        part.name: policy_label(part.policy.queue, part.policy.placement, part.policy.sizing, part.policy.backfill)
        for part in cluster.partitions
    }
