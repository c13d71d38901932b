"""The namespaced workload kinds of gputwin.io/v1alpha1: GPUJob and TraceReplay.

Both are deliberately small in v1alpha1 (the essentials of docs/architecture.md §3); the operator and the
tuner will grow them. Import them from `gputwin.api.v1alpha1`, which re-exports everything.
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal, Self, get_args

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import (
    TASK_TYPE_RULE,
    ApiModel,
    DnsName,
    PlacementPolicy,
    QueuePolicy,
    ResourceBase,
    SizingPolicy,
    TaskType,
)
from gputwin.api.status import GPUJobStatus, TraceReplayStatus
from gputwin.core.bounds import MAX_DURATION_SECONDS, MAX_JOB_GPUS, MAX_PRIORITY, MAX_TEXT
from gputwin.core.plugins import known
from gputwin.core.sharing import profile_milli, profile_slices

# --- GPUJob ---------------------------------------------------------------------------------------


class GPUJobSpec(ApiModel):
    """One GPU job: what it is (task type routes it to a partition) and what it asks for."""

    task_type: TaskType = Field(
        description=f"Task type ({TASK_TYPE_RULE}); picks the partition that serves it."
    )
    gpus: int = Field(
        ge=1,
        le=MAX_JOB_GPUS,
        description=f"GPUs requested, 1 to {MAX_JOB_GPUS} (sizing policies may change the count).",
    )
    user: str = Field(
        default="",
        max_length=MAX_TEXT,
        description="Submitting user; history-based policies group jobs by it.",
    )
    job_name: str = Field(
        default="",
        max_length=MAX_TEXT,
        description="Job name as the user knows it; history matches on it.",
    )
    duration_seconds: float | None = Field(
        default=None,
        ge=0.0,
        le=MAX_DURATION_SECONDS,
        description="Simulated runs only: how long the job runs on its requested GPUs; at most "
        f"{MAX_DURATION_SECONDS} s (a year).",
    )
    gpu_model: str = Field(
        default="",
        max_length=MAX_TEXT,
        description="GPU model the job must run on, e.g. a100 (a node group's model); empty = any. "
        "Ignored by partitions whose nodes declare no models.",
    )
    gpu_fraction: float | None = Field(
        default=None,
        ge=0.001,
        le=0.999,
        description="A share of one GPU, 0.001 to 0.999 (KAI scheduler's and Run:ai's gpu-fraction), "
        "with gpus 1: packed with other shares onto one GPU, none ever over a whole GPU; counted in "
        "milli-GPU (rounded to 0.001). Unset: whole GPUs (docs/tenancy.md).",
    )
    gpu_profile: str = Field(
        default="",
        max_length=MAX_TEXT,
        pattern=r"^([1-7]g\.[1-9][0-9]{0,3}gb(\+me)?)?$",
        description="A MIG profile as NVIDIA names it, e.g. 1g.10gb (the number before g: compute slices "
        "out of 7), with gpus 1 and gpuModel set: the job takes that many slices of one MIG-partitioned "
        "GPU of the model, which must declare the profile (SwitchTopology migProfiles); not with "
        "gpuFraction. Empty: none (docs/tenancy.md).",
    )
    priority: int = Field(
        default=0,
        ge=-MAX_PRIORITY,
        le=MAX_PRIORITY,
        description=f"Job priority, -{MAX_PRIORITY} to {MAX_PRIORITY} (Kubernetes' PriorityClass range); "
        "higher first under the priority queue policy.",
    )
    pod_template: dict[str, Any] | None = Field(
        default=None,
        description="Kubernetes backend only: the pod to run (a PodTemplateSpec); GPUs are set from gpus.",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


    @model_validator(mode="after")
    def _fraction_of_one_gpu(self) -> Self:
        if self.gpu_fraction is not None and self.gpus != 1:
            raise PydanticCustomError("gpu_fraction", "gpuFraction is a share of one GPU: set gpus to 1")
        return self

    @model_validator(mode="after")
    def _profile_of_one_gpu_of_a_model(self) -> Self:
        if not self.gpu_profile:
            return self
        if self.gpu_fraction is not None:
            raise PydanticCustomError("gpu_profile", "gpuProfile and gpuFraction exclude each other: set one")
        if self.gpus != 1 or not self.gpu_model:
            raise PydanticCustomError("gpu_profile", "gpuProfile is a MIG slice of one GPU: set gpus to 1 and gpuModel")
        return self

    @property
    def gpu_milli(self) -> int:
        """The core's request (`JobSpec.gpu_milli`): the fraction in thousandths (a MIG profile's:
        its slices' share, `gputwin.core.sharing.profile_milli`), 1000 for whole GPUs."""
        if self.gpu_profile:
            return profile_milli(profile_slices(self.gpu_profile))
        return 1000 if self.gpu_fraction is None else min(max(round(self.gpu_fraction * 1000), 1), 999)


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
    """A trace stored in a ConfigMap of the TraceReplay's namespace (no namespace field, on purpose:
    a replay reads only its own namespace's ConfigMaps; docs/security.md)."""

    name: DnsName = Field(description="ConfigMap name.")
    key: str = Field(min_length=1, description="Key of the ConfigMap entry holding the trace.")


class SacctWindow(ApiModel):
    """Jobs read from SLURM accounting (`sacct`) over a time window."""

    start: str = Field(
        min_length=1, description="Window start in sacct time syntax, e.g. 2024-05-01 or now-7days."
    )
    end: str = Field(default="now", min_length=1, description="Window end in sacct time syntax.")


# A live replay runs (candidates + 1) x samples replays of the present queue inside the operator, on
# its replay thread: these bounds keep one from asking for hours of CPU (a replay of a few thousand
# queued jobs over a week takes ~0.1-1 s). Longer looks ahead belong to `gputwin whatif`.
MAX_LIVE_HORIZON = 30 * 86400.0
MAX_LIVE_SAMPLES = 64
MAX_LIVE_CANDIDATES = 16


class LiveQueue(ApiModel):
    """The operator's present instead of a trace: the GPUJobs running and queued now, and the nodes out
    of service, forked and replayed forward (`gputwin whatif`'s machinery) once per candidate.

    A field beside file, configMap and sacct, not a `source: live` switch: each of the four says
    where the jobs come from and carries its own settings (here the look ahead), so "exactly one of"
    stays the one rule, and a live replay reads as `trace: {live: {horizonSeconds: 86400}}`. The
    run times nobody knows yet are drawn `samples` times from `seed` (a job's durationSeconds is its
    estimate), every candidate on the same draws: the same present and seed give the same ranking.
    """

    horizon_seconds: float = Field(
        default=86400.0,
        gt=0.0,
        le=MAX_LIVE_HORIZON,
        description=f"How far ahead to replay the present, in seconds; at most {MAX_LIVE_HORIZON:,.0f} (30 "
        "days). A job not ended by then counts as ending there.",
    )
    samples: int = Field(
        default=8,
        ge=1,
        le=MAX_LIVE_SAMPLES,
        description=f"Seeded draws of the unknown run times, 1 to {MAX_LIVE_SAMPLES}; each candidate's "
        "metrics are the mean over them.",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description="Seed of the draws: the same present and seed, the same ranking.",
    )


class TraceSource(ApiModel):
    """Where the replayed jobs come from: exactly one of file, configMap, sacct or live."""

    file: str | None = Field(
        default=None, min_length=1, max_length=4096,  # PATH_MAX
        description="A regular trace file: in a cluster under the operator's GPUTWIN_TRACE_DIR (relative "
        "to it; unset, file sources are refused), in the emulator under the manifest's folder (relative "
        "to it) or GPUTWIN_TRACE_DIR; symlinks and .. must not lead out. See docs/security.md.",
    )
    config_map: ConfigMapRef | None = Field(default=None, description="A trace inside a ConfigMap.")
    sacct: SacctWindow | None = Field(default=None, description="A window of SLURM accounting history.")
    live: LiveQueue | None = Field(
        default=None,
        description="The live queue now (running and queued GPUJobs, nodes out of service), replayed "
        "forward: a promote decided on the present's forecast, not on history.",
    )
    format: Literal[
        "auto", "helios", "philly", "alibaba", "sacct", "sacct-json", "helios-raw", "swf", "philly-json", "pai"
    ] = Field(
        default="auto",
        description="Trace format (the readers of `gputwin simulate --format`; philly is the Helios-shaped "
        "CSV); auto guesses from the file's header. Not read by a live source.",
    )

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if sum(x is not None for x in (self.file, self.config_map, self.sacct, self.live)) != 1:
            raise PydanticCustomError("trace_source", "set exactly one of file, configMap, sacct or live")
        return self


class Candidate(ApiModel):
    """One policy combination to replay the trace under."""

    queue: QueuePolicy = Field(description="Queue policy (see SchedulingPolicy spec.queue.policy).")
    placement: PlacementPolicy = Field(default="first-fit", description="Placement policy.")
    backfill: bool = Field(default=False, description="Backfill on or off.")
    sizing: SizingPolicy = Field(default="as-requested", description="GPU sizing policy.")


# A search runs inside the operator, one replay of the trace per trial: this bound keeps a custom
# resource from asking for days of CPU (a trial on the Philly trace takes 0.5-6 s). Larger
# searches belong to `gputwin tune`, which resumes and runs trials in parallel.
MAX_SEARCH_TRIALS = 100


def search_vocabulary() -> dict[str, list[str]]:
    """The queue, placement and sizing names a search may choose: registered in the core AND
    expressible in a SchedulingPolicy (a winner must be deployable). Shared by `gputwin tune`."""
    api_names = {"queue": get_args(QueuePolicy), "placement": get_args(PlacementPolicy),
                 "sizing": get_args(SizingPolicy)}  # fmt: skip
    return {kind: [n for n in names if n in api_names[kind]] for kind, names in known().items()}


class ReplaySearch(ApiModel):
    """Search policy settings the way `gputwin tune` does (optuna's TPE sampler), on the replayed trace."""

    budget: int = Field(
        default=20,
        ge=1,
        le=MAX_SEARCH_TRIALS,
        description=f"Trials to run, each one replay of the trace; at most {MAX_SEARCH_TRIALS} (use "
        "`gputwin tune` for longer searches).",
    )
    seed: int = Field(
        default=0,
        ge=0,
        le=2**31 - 1,
        description="Seed of the sampler: the same seed, trace and cluster give the same trials.",
    )
    space: dict[str, Any] | None = Field(
        default=None,
        description="Knobs to search and their values, as in a `gputwin tune --space` file, e.g. "
        "{queue: [sjf, qssf], backfill: true, max_wait: {low: 0, high: 900}}; the knobs are those of the "
        "space file (queue, placement, backfill, sizing, max_wait, max_factor, min_samples, "
        "las_first_threshold, las_threshold_ratio, qssf_prior); a knob left out keeps tune's default; "
        "unset = tune's default space. The operator checks it: a bad knob fails the replay with reason InvalidSearch.",
        # A knob is a value, a list of values or a {low, high, log, step} range: no structural
        # schema says that, so the API server keeps it as is and gputwin.sim.space checks it.
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class TraceReplaySpec(ApiModel):
    """Replay a trace under candidate policies, rank them by an objective, optionally promote the winner.

    `candidates` and `search` may be used alone or together: the listed candidates, the search's
    best trials and `current` are ranked together, and the best of them all wins.
    """

    trace: TraceSource = Field(description="The jobs to replay.")
    topology: DnsName = Field(description="SwitchTopology to replay on.")
    partitions: list[DnsName] = Field(
        default_factory=list, description="GPUPartitions to replay; empty = every partition of the topology."
    )
    candidates: list[Candidate] = Field(
        default_factory=list,
        description="Policy combinations to compare; empty = only the current policies (and the search's "
        "best trials, with spec.search).",
    )
    search: ReplaySearch | None = Field(
        default=None,
        description="Also search policy settings (as gputwin tune does) and rank the best trials with the "
        "candidates; unset = only the listed candidates.",
    )
    objective: Literal["avg_jct", "avg_queue", "p50_jct", "p99_jct", "p99_queue", "makespan"] = Field(
        default="avg_jct", description="Metric to minimise when ranking candidates."
    )
    promote: bool = Field(
        default=False,
        description="Write the winner into the partitions' SchedulingPolicies when it beats them.",
    )

    @model_validator(mode="after")
    def _live_compares_candidates(self) -> Self:
        # A search asks for tens of trials, each (samples) replays of the present: past the bound
        # above; `gputwin tune` searches on a trace instead.
        if self.trace.live is not None and self.search is not None:
            raise PydanticCustomError(
                "live_search", "trace.live compares the listed candidates: remove search"
            )
        if self.trace.live is not None and len(self.candidates) > MAX_LIVE_CANDIDATES:
            raise PydanticCustomError(
                "live_candidates", f"trace.live compares at most {MAX_LIVE_CANDIDATES} candidates"
            )
        return self


class TraceReplay(ResourceBase):
    """A what-if experiment over a job trace (namespaced)."""

    scope: ClassVar[str] = "Namespaced"
    kind: Literal["TraceReplay"] = Field(description="TraceReplay.")
    spec: TraceReplaySpec = Field(description="Trace, cluster, candidates, objective and promotion.")
    status: TraceReplayStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


__all__ = [
    "MAX_LIVE_CANDIDATES",
    "MAX_LIVE_HORIZON",
    "MAX_LIVE_SAMPLES",
    "MAX_SEARCH_TRIALS",
    "Candidate",
    "ConfigMapRef",
    "GPUJob",
    "GPUJobSpec",
    "LiveQueue",
    "ReplaySearch",
    "SacctWindow",
    "TraceReplay",
    "TraceReplaySpec",
    "TraceSource",
    "search_vocabulary",
]
