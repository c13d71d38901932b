"""The SchedulingPolicy kind and the parts of its spec (queue, preemption, placement, sizing,
estimator, fairness, params): how the partitions that reference it order, place and size jobs.
Re-exported by `gputwin.api.v1alpha1`, the one place the kinds are listed."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

from pydantic import Field, field_validator
from pydantic_core import PydanticCustomError

from gputwin.api.estimator import EstimatorSpec
from gputwin.api.meta import ApiModel, PlacementPolicy, QueuePolicy, ResourceBase, Scalar, SizingPolicy
from gputwin.api.status import SchedulingPolicyStatus
from gputwin.core.bounds import MAX_DURATION_SECONDS, MAX_JOB_GPUS, MAX_TENANTS
from gputwin.core.fairness import DEFAULT_HALF_LIFE, MAX_WEIGHT
from gputwin.core.plugins import TYPED_PARAMS, check_params

MAX_ALLOWED_GPUS = 64  # GPU counts history sizing may choose from

# --- SchedulingPolicy -----------------------------------------------------------------------------


class QueueSpec(ApiModel):
    """Which waiting job goes next."""

    policy: QueuePolicy = Field(
        default="fifo",
        description="fifo: submit order; sjf: shortest duration first; srtf: shortest remaining time, preemptive; "
        "las: least attained service, preemptive; qssf: shortest predicted service from history; "
        "priority: job priority, then submit order.",
    )
    backfill: bool = Field(
        default=False, description="Let later jobs start when they do not delay the head job."
    )


class PreemptionSpec(ApiModel):
    """Cost of preempting a running job (used by preemptive queue policies and priority tiers)."""

    checkpoint_seconds: float | None = Field(
        default=None,
        ge=0.0,
        le=MAX_DURATION_SECONDS,
        description="Seconds a preempted job loses to checkpoint and restore; 0 = free; unset = by job "
        "size as in the Helios reference: 7 s for 1 GPU, 30 s up to 8 GPUs, 60 s above; at most "
        f"{MAX_DURATION_SECONDS} (a year).",
    )


class PlacementSpec(ApiModel):
    """Which free GPUs a started job gets."""

    policy: PlacementPolicy = Field(
        default="first-fit",
        description="first-fit: any free GPUs in node order; consolidate: fewest nodes; "
        "topology-aware: fewest switch tiers, waiting up to maxWaitSeconds for a one-switch slot; "
        "random: idle GPUs drawn by a seeded generator (a baseline to compare against; SLURM has no "
        "random placement and runs it as first-fit).",
    )
    max_wait_seconds: float = Field(
        default=300.0,
        ge=0.0,
        le=MAX_DURATION_SECONDS,
        description="topology-aware only: longest wait for a compact slot before spreading; at most "
        f"{MAX_DURATION_SECONDS} (a year).",
    )


class SizingSpec(ApiModel):
    """How many GPUs a job is given (patent claim 3)."""

    policy: SizingPolicy = Field(
        default="as-requested",
        description="as-requested: the GPUs the job asked for; history: a count chosen from past jobs' "
        "completion and wait times.",
    )
    allowed_gpus: list[Annotated[int, Field(ge=1, le=MAX_JOB_GPUS)]] | None = Field(
        default=None,
        alias="allowedGPUs",
        min_length=1,
        max_length=MAX_ALLOWED_GPUS,
        description=f"GPU counts sizing may choose from, e.g. [1, 2, 4, 8], each 1 to {MAX_JOB_GPUS}, at most "
        f"{MAX_ALLOWED_GPUS} of them; unset = any.",
    )
    max_factor: float = Field(
        default=2.0, ge=1.0, le=64.0, description="history only: never more than this many times the request."
    )


class FairnessSpec(ApiModel):
    """Order among tenants, ahead of the queue policy's order within each (docs/tenancy.md)."""

    policy: Literal["none", "drf", "fairshare"] = Field(
        default="none",
        description="none: the queue policy alone; drf: fewest GPUs held over weight first (dominant "
        "resource fairness on GPUs, the only resource jobs carry); fairshare: least usage (GPU-seconds "
        "decayed with halfLifeSeconds) over weight first, as SLURM's classic fair-share factor orders. "
        "Tenants are the partition's quota accounts, or each user where it declares no quotas.",
    )
    half_life_seconds: float = Field(
        default=DEFAULT_HALF_LIFE,
        gt=0.0,
        le=MAX_DURATION_SECONDS,
        description="fairshare only: seconds after which usage counts half (SLURM's PriorityDecayHalfLife; "
        f"default 7 days); at most {MAX_DURATION_SECONDS} (a year).",
    )
    weights: dict[str, Annotated[float, Field(gt=0.0, le=MAX_WEIGHT)]] = Field(
        default_factory=dict,
        max_length=MAX_TENANTS,
        description=f"Weight (fair-share shares) per tenant, > 0 and at most {MAX_WEIGHT:.0f}; a tenant not "
        f"named weighs 1; at most {MAX_TENANTS} entries.",
    )


RESERVED_PARAMS = TYPED_PARAMS  # set by the typed fields; the core reads them from params


class SchedulingPolicySpec(ApiModel):
    """Queue order, preemption, placement and GPU sizing of the partitions that reference it."""

    queue: QueueSpec = Field(default_factory=QueueSpec, description="Queue ordering and backfill.")
    preemption: PreemptionSpec = Field(default_factory=PreemptionSpec, description="Preemption cost.")
    placement: PlacementSpec = Field(default_factory=PlacementSpec, description="GPU placement.")
    sizing: SizingSpec = Field(default_factory=SizingSpec, description="GPU-count sizing.")
    estimator: EstimatorSpec = Field(default_factory=EstimatorSpec, description="Run-time estimator (qssf, srtf).")
    fairness: FairnessSpec = Field(default_factory=FairnessSpec, description="Order among tenants.")
    params: dict[str, Scalar] = Field(
        default_factory=dict,
        description="Policy-specific knobs (strings of at most 256 characters, numbers or booleans), "
        "documented by each policy: qssf_prior (qssf: seconds a job is predicted to run when the history "
        "has nothing to go on, i.e. before any job has finished; 0 to a year, default 3600), "
        "las_thresholds (las: attained GPU-seconds per level, each > 0, 1 to 16 levels, e.g. "
        "\"3600,36000\"), min_samples (history sizing: finished jobs of a size before it is chosen, a "
        "whole number, default 5). Any other key is refused. max_wait, allowed_gpus and max_factor are "
        "set by the typed fields above.",
        # A map of mixed scalar types has no structural CRD schema: the API server keeps it as is,
        # the Scalar type above checks it when gputwin reads the object.
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )

    @field_validator("params")
    @classmethod
    def _known_params(cls, params: dict[str, str | bool | int | float]) -> dict[str, str | bool | int | float]:
        # The loader folds the typed fields into the core's params under these keys: no silent override.
        clash = sorted(RESERVED_PARAMS & params.keys())
        if clash:
            raise PydanticCustomError(
                "reserved_param", "may not set {keys}: use the typed fields", {"keys": ", ".join(clash)}
            )
        try:  # checked here so a typo or bad value is a line about this file, not a silent no-op
            check_params(params)
        except ValueError as exc:
            raise PydanticCustomError("param", "{reason}", {"reason": str(exc)}) from None
        return params


class SchedulingPolicy(ResourceBase):
    """A named scheduling policy that partitions reference (cluster-scoped)."""

    scope: ClassVar[str] = "Cluster"
    kind: Literal["SchedulingPolicy"] = Field(description="SchedulingPolicy.")
    spec: SchedulingPolicySpec = Field(
        description="Queue, preemption, placement, sizing and free-form params."
    )
    status: SchedulingPolicyStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


__all__ = [
    "MAX_ALLOWED_GPUS",
    "FairnessSpec",
    "PlacementSpec",
    "PreemptionSpec",
    "QueueSpec",
    "RESERVED_PARAMS",
    "SchedulingPolicy",
    "SchedulingPolicySpec",
    "SizingSpec",
]
