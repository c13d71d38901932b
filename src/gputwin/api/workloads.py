"""The namespaced workload kinds of gputwin.io/v1alpha1: GPUJob and TraceReplay.

Both are deliberately small in v1alpha1 (the essentials of DESIGN.md §3); the operator and the
tuner will grow them. Import them from `gputwin.api.v1alpha1`, which re-exports everything.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import ApiModel, DnsName, PlacementPolicy, QueuePolicy, ResourceBase, SizingPolicy
from gputwin.api.status import GPUJobStatus, TraceReplayStatus

# --- GPUJob ---------------------------------------------------------------------------------------


class GPUJobSpec(ApiModel):
    """One GPU job: what it is (task type routes it to a partition) and what it asks for."""

    task_type: str = Field(min_length=1, description="Task type; picks the partition that serves it.")
    gpus: int = Field(ge=1, le=4096, description="GPUs requested (sizing policies may change the count).")
    user: str = Field(default="", description="Submitting user; history-based policies group jobs by it.")
    job_name: str = Field(default="", description="Job name as the user knows it; history matches on it.")
    duration_seconds: float | None = Field(
        default=None, ge=0.0, description="Simulated runs only: how long the job runs on its requested GPUs."
    )
    priority: int = Field(
        default=0, description="Job priority; higher first under the priority queue policy."
    )
    pod_template: dict[str, Any] | None = Field(
        default=None,
        description="Kubernetes backend only: the pod to run (a PodTemplateSpec); GPUs are set from gpus.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class GPUJob(ResourceBase):
    """A GPU job submitted to the gputwin scheduler (namespaced)."""

    scope: ClassVar[str] = "Namespaced"
    kind: Literal["GPUJob"] = Field(description="GPUJob.")
    spec: GPUJobSpec = Field(description="Task type, GPUs, user, name, duration and pod template.")
    status: GPUJobStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


# --- TraceReplay ----------------------------------------------------------------------------------


class ConfigMapRef(ApiModel):
    """A trace stored in a ConfigMap of the TraceReplay's namespace."""

    name: DnsName = Field(description="ConfigMap name.")
    key: str = Field(min_length=1, description="Key of the ConfigMap entry holding the trace.")


class SacctWindow(ApiModel):
    """Jobs read from SLURM accounting (`sacct`) over a time window."""

    start: str = Field(
        min_length=1, description="Window start in sacct time syntax, e.g. 2024-05-01 or now-7days."
    )
    end: str = Field(default="now", min_length=1, description="Window end in sacct time syntax.")


class TraceSource(ApiModel):
    """Where the replayed jobs come from: exactly one of file, configMap or sacct."""

    file: str | None = Field(
        default=None, min_length=1, description="Path of a trace file readable by the replayer."
    )
    config_map: ConfigMapRef | None = Field(default=None, description="A trace inside a ConfigMap.")
    sacct: SacctWindow | None = Field(default=None, description="A window of SLURM accounting history.")
    format: Literal["auto", "helios", "philly", "alibaba", "sacct"] = Field(
        default="auto", description="Trace format; auto guesses from the file's header."
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if sum(x is not None for x in (self.file, self.config_map, self.sacct)) != 1:
            raise PydanticCustomError("trace_source", "set exactly one of file, configMap or sacct")
        return self


class Candidate(ApiModel):
    """One policy combination to replay the trace under."""

    queue: QueuePolicy = Field(description="Queue policy (see SchedulingPolicy spec.queue.policy).")
    placement: PlacementPolicy = Field(default="first-fit", description="Placement policy.")
    backfill: bool = Field(default=False, description="Backfill on or off.")
    sizing: SizingPolicy = Field(default="as-requested", description="GPU sizing policy.")


class TraceReplaySpec(ApiModel):
    """Replay a trace under candidate policies, rank them by an objective, optionally promote the winner."""

    trace: TraceSource = Field(description="The jobs to replay.")
    topology: DnsName = Field(description="SwitchTopology to replay on.")
    partitions: list[DnsName] = Field(
        default_factory=list, description="GPUPartitions to replay; empty = every partition of the topology."
    )
    candidates: list[Candidate] = Field(
        default_factory=list, description="Policy combinations to compare; empty = only the current policies."
    )
    objective: Literal["avg_jct", "avg_queue", "p50_jct", "p99_jct", "p99_queue", "makespan"] = Field(
        default="avg_jct", description="Metric to minimise when ranking candidates."
    )
    promote: bool = Field(
        default=False,
        description="Write the winner into the partitions' SchedulingPolicies when it beats them.",
    )


class TraceReplay(ResourceBase):
    """A what-if experiment over a job trace (namespaced)."""

    scope: ClassVar[str] = "Namespaced"
    kind: Literal["TraceReplay"] = Field(description="TraceReplay.")
    spec: TraceReplaySpec = Field(description="Trace, cluster, candidates, objective and promotion.")
    status: TraceReplayStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


__all__ = [
    "Candidate",
    "ConfigMapRef",
    "GPUJob",
    "GPUJobSpec",
    "SacctWindow",
    "TraceReplay",
    "TraceReplaySpec",
    "TraceSource",
]
