"""The typed `status` of every gputwin.io/v1alpha1 kind: written by the operator, read by people.

Status is a subresource: users never write it, the operator replaces it as a whole through
`/status`. It is typed (not a free-form map) because the CRD's printer columns point into it and
`kubectl explain` should describe it. Every kind carries `conditions` in the shape of
`metav1.Condition`, so `kubectl wait --for=condition=Ready` and generic tooling understand them.
Counters default to 0 and names to unset, so an operator may fill them in as it learns them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Literal, Self

from pydantic import AfterValidator, Field, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import ApiModel, DnsName, Hostlist, HostName

# The patterns of metav1.Condition, so conditions written here are valid Kubernetes conditions.
CONDITION_TYPE = (
    r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
    r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
)
CONDITION_REASON = r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
Backend = Literal["sim", "kubernetes", "slurm"]


def _check_time(value: str) -> str:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        parsed = None
    # A time without a zone means different instants on different machines.
    if parsed is None or parsed.tzinfo is None:
        raise PydanticCustomError(
            "date_time", "'{value}' is not an RFC 3339 time such as 2024-05-01T12:00:00Z", {"value": value}
        )
    return value


Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"}), AfterValidator(_check_time)]
Count = Annotated[int, Field(ge=0)]


# 9999-12-31T23:59:59Z, the latest time an RFC 3339 timestamp (and so a status) can show.
LATEST_TIME = 253402300799.0


def rfc3339(seconds: float) -> str:
    """Epoch seconds as a Timestamp: `2026-01-01T00:00:00Z`, `…:00.250Z` when there is a fraction."""
    whole = abs(seconds - round(seconds)) < 5e-4
    when = datetime.fromtimestamp(round(seconds) if whole else seconds, tz=UTC)
    return when.isoformat(timespec="seconds" if whole else "milliseconds").replace("+00:00", "Z")


def epoch_seconds(timestamp: str) -> float:
    """A Timestamp back to epoch seconds (ValueError if it is not one)."""
    return datetime.fromisoformat(timestamp).timestamp()


class Condition(ApiModel):
    """One observed aspect of the object's state, shaped like metav1.Condition."""

    type: str = Field(
        min_length=1,
        max_length=316,
        pattern=CONDITION_TYPE,
        description="Condition type in CamelCase, e.g. Ready, Valid, Deployed; unique within the list.",
    )
    status: Literal["True", "False", "Unknown"] = Field(description="Whether the condition holds.")
    reason: str = Field(
        min_length=1,
        max_length=1024,
        pattern=CONDITION_REASON,
        description="Machine-readable CamelCase reason for the last transition, e.g. NodeInTwoPartitions.",
    )
    message: str = Field(default="", max_length=32768, description="Human-readable details.")
    last_transition_time: Timestamp = Field(
        description="When status last changed, RFC 3339 (2024-05-01T12:00:00Z)."
    )
    observed_generation: Count | None = Field(
        default=None, description="The metadata.generation this condition was computed from."
    )


class StatusBase(ApiModel):
    """What every kind's status has: the generation it describes and its conditions."""

    observed_generation: Count | None = Field(
        default=None, description="The metadata.generation this status was computed from."
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        description="Current conditions, at most one per type.",
        # A map keyed by type, as for metav1.Condition lists: server-side apply merges by type.
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )

    @model_validator(mode="after")
    def _one_condition_per_type(self) -> Self:
        types = [c.type for c in self.conditions]
        twice = sorted({t for t in types if types.count(t) > 1})
        if twice:
            raise PydanticCustomError(
                "condition_type", "conditions repeat type {types}", {"types": ", ".join(twice)}
            )
        return self


class SwitchTopologyStatus(StatusBase):
    """Size of the validated topology; a Valid condition reports what is wrong with it."""

    nodes: Count = Field(default=0, description="Nodes under the leaf switches.")
    gpus: Count = Field(default=0, description="GPUs on those nodes.")
    switches: Count = Field(default=0, description="Switches in the tree, all tiers.")


class Quantiles(ApiModel):
    """A forecast value at two quantiles over the twin's sampled replays; unset: beyond the horizon."""

    p50: float | None = Field(default=None, ge=0.0, description="The median over the samples.")
    p90: float | None = Field(default=None, ge=0.0, description="Met in 90 % of the samples.")


class TimeQuantiles(ApiModel):
    """A forecast time at two quantiles over the twin's sampled replays; unset: beyond the horizon."""

    p50: Timestamp | None = Field(default=None, description="The median over the samples, RFC 3339.")
    p90: Timestamp | None = Field(default=None, description="Met in 90 % of the samples, RFC 3339.")


class ForecastBase(ApiModel):
    """When and how a forecast was made (by the twin, replaying the cluster from a snapshot)."""

    computed_at: Timestamp = Field(description="When the snapshot the forecast replays was taken.")
    horizon_seconds: float = Field(gt=0.0, description="How far ahead the twin replayed.")
    samples: int = Field(ge=1, description="Seeded replays the quantiles are taken over.")


class GPUJobForecast(ForecastBase):
    """When a waiting job is forecast to start; unset once it runs or ends."""

    start_time: TimeQuantiles = Field(description="The forecast start, p50 and p90.")


class GPUPartitionForecast(ForecastBase):
    """How long until every job waiting in the partition now has started."""

    drain_seconds: Quantiles = Field(description="Seconds from computedAt until the current queue drains.")


class GPUPartitionStatus(StatusBase):
    """The partition's capacity and queue right now."""

    nodes: Count = Field(default=0, description="Nodes in the partition.")
    total_gpus: Count = Field(default=0, alias="totalGPUs", description="GPUs on those nodes.")
    free_gpus: Count = Field(default=0, alias="freeGPUs", description="GPUs not allocated to a running job.")
    queued: Count = Field(default=0, description="Jobs waiting in the partition's queue.")
    running: Count = Field(default=0, description="Jobs running on the partition's GPUs.")
    forecast: GPUPartitionForecast | None = Field(
        default=None, description="When the current queue drains, as the twin forecasts it (operator's period)."
    )


class DeployResult(ApiModel):
    """The outcome of the last attempt to put the policy into effect on a backend."""

    backend: Backend = Field(description="The backend deployed to.")
    result: Literal["Succeeded", "Failed", "RolledBack"] = Field(
        description="Succeeded; Failed (nothing changed); RolledBack (applied, failed verification, "
        "previous configuration restored)."
    )
    time: Timestamp = Field(description="When the attempt finished, RFC 3339.")
    message: str = Field(default="", description="Details, e.g. the scontrol error.")


class SchedulingPolicyStatus(StatusBase):
    """Where the policy runs and how its last deployment went."""

    backends: list[Backend] = Field(
        default_factory=list, description="Backends currently scheduling with this policy."
    )
    partitions: list[DnsName] = Field(
        default_factory=list, description="GPUPartitions that reference this policy."
    )
    last_deploy: DeployResult | None = Field(default=None, description="The most recent deployment.")


GPUJobPhase = Literal["Pending", "Queued", "Running", "Succeeded", "Failed", "Rejected"]


class Slot(ApiModel):
    """GPUs taken on one node."""

    node: HostName = Field(description="Node name, as declared in the SwitchTopology.")
    gpus: int = Field(ge=1, description="GPUs of that node given to the job.")


class Allocation(ApiModel):
    """The job's current run: exactly which GPUs, since when, for how long.

    The operator rebuilds its GPU accounting from this after a restart (nothing is placed twice),
    and a simulated backend re-arms the run's end from `since + runSeconds`.
    """

    slots: list[Slot] = Field(min_length=1, description="GPUs per node, in placement order.")
    since: Timestamp = Field(description="When this run started (after a preemption: when it resumed).")
    run_seconds: float = Field(
        ge=0.0, description="How long this run lasts, communication overhead included (simulated runs)."
    )


class GPUJobStatus(StatusBase):
    """Where the job is in its life and where it runs."""

    phase: GPUJobPhase = Field(
        default="Pending",
        description="Pending: not yet routed; Queued: waiting in its partition; Running; Succeeded; "
        "Failed; Rejected: no partition serves its task type or it is larger than its partition.",
    )
    partition: DnsName | None = Field(default=None, description="The GPUPartition the job was routed to.")
    nodes: Hostlist | None = Field(
        default=None, description="Nodes the job runs on, in SLURM hostlist syntax (gpu[001-002])."
    )
    gpus: Count = Field(default=0, description="GPUs allocated; sizing policies may change the request.")
    switches: Count = Field(default=0, description="Leaf switches the job's nodes hang off.")
    overhead: float = Field(
        default=0.0, ge=0.0, description="Communication overhead applied to the run time (0.1 = +10%)."
    )
    submit_time: Timestamp | None = Field(default=None, description="When the scheduler received the job.")
    start_time: Timestamp | None = Field(
        default=None, description="When the job first started running (kept across preemptions)."
    )
    end_time: Timestamp | None = Field(default=None, description="When the job finished.")
    preemptions: Count = Field(default=0, description="How often a preemptive policy stopped the job.")
    allocation: Allocation | None = Field(
        default=None, description="The current run's GPUs and timing; unset while not running."
    )
    forecast: GPUJobForecast | None = Field(
        default=None, description="While waiting: when it starts, as the twin forecasts it (operator's period)."
    )


class ReplayMetrics(ApiModel):
    """One candidate's results over the replayed trace, in seconds."""

    jobs: Count = Field(description="Jobs replayed.")
    avg_jct: float = Field(ge=0.0, description="Average job completion time (submit to end).")
    avg_queue: float = Field(ge=0.0, description="Average queueing delay (submit to start).")
    p50_jct: float = Field(ge=0.0, description="Median job completion time.")
    p99_jct: float = Field(ge=0.0, description="99th-percentile job completion time.")
    p99_queue: float = Field(ge=0.0, description="99th-percentile queueing delay.")
    makespan: float = Field(ge=0.0, description="First submit to last end.")


class CandidateResult(ApiModel):
    """How one candidate policy did."""

    name: str = Field(
        min_length=1,
        description="current (the partitions' present policies) or queue/placement/sizing, with +backfill "
        "when on, e.g. sjf/consolidate/as-requested+backfill; a search trial adds the knobs that apply, "
        "e.g. sjf/topology-aware/as-requested max_wait=120.0.",
    )
    metrics: ReplayMetrics = Field(description="The candidate's results.")
    trial: Count | None = Field(
        default=None,
        description="The spec.search trial that found this policy; unset for current and the listed "
        "candidates.",
    )


class TraceReplayStatus(StatusBase):
    """Progress and outcome of the what-if experiment."""

    phase: Literal["Pending", "Running", "Succeeded", "Failed"] = Field(
        default="Pending", description="Pending, Running, Succeeded or Failed."
    )
    candidates: list[CandidateResult] = Field(
        default_factory=list,
        description="Results per candidate (current, the listed candidates, the search's best trials), "
        "best first by spec.objective.",
    )
    winner: str | None = Field(default=None, min_length=1, description="Name of the best candidate.")
    trials: Count = Field(
        default=0, description="Search trials run for spec.search (its best ones are among candidates)."
    )
    report: str | None = Field(
        default=None, min_length=1, description="Where the full report is, e.g. a ConfigMap name or a path."
    )
    promoted: bool = Field(
        default=False, description="Whether the winner was written into the partitions' SchedulingPolicies."
    )


__all__ = [
    "Allocation",
    "Backend",
    "CandidateResult",
    "Condition",
    "DeployResult",
    "ForecastBase",
    "GPUJobForecast",
    "GPUJobPhase",
    "GPUJobStatus",
    "GPUPartitionForecast",
    "GPUPartitionStatus",
    "Quantiles",
    "ReplayMetrics",
    "SchedulingPolicyStatus",
    "Slot",
    "StatusBase",
    "SwitchTopologyStatus",
    "Timestamp",
    "TimeQuantiles",
    "TraceReplayStatus",
    "epoch_seconds",
    "rfc3339",
]
