"""The gputwin.io/v1alpha1 custom resources as pydantic models: the one source of truth.

The cluster kinds (SwitchTopology, GPUPartition, SchedulingPolicy) are complete: the simulator and
the SLURM compiler read them now. The workload kinds (GPUJob, TraceReplay) live in
`gputwin.api.workloads` and are re-exported here. The CRD schemas in `crds/` are generated from
these classes, so every field carries a description (`kubectl explain`), enums are `Literal`s and
bounds are `ge`/`le`. Wire names are camelCase (`nodeGroups`, `gpusPerNode`).

Cross-object rules (references resolve, no node in two partitions, the tree is a tree) need more
than one object and are checked by `gputwin.api.validate`.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar, Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from gputwin.api.meta import (
    API_VERSION,
    ApiModel,
    DnsName,
    Hostlist,
    MAX_NODES,
    HostName,
    PlacementPolicy,
    QueuePolicy,
    ResourceBase,
    Scalar,
    ServedTaskType,
    SizingPolicy,
    SlurmName,
    SlurmObjectMeta,
    count_hostlist,
)
from gputwin.api.estimator import EstimatorSpec
from gputwin.api.status import GPUPartitionStatus, SchedulingPolicyStatus, SwitchTopologyStatus
from gputwin.api.workloads import (
    Candidate,
    ConfigMapRef,
    GPUJob,
    GPUJobSpec,
    SacctWindow,
    TraceReplay,
    TraceReplaySpec,
    TraceSource,
)
from gputwin.core.bounds import (
    MAX_DURATION_SECONDS,
    MAX_JOB_GPUS,
    MAX_NODE_GPUS,
    MAX_QUOTA_GPUS,
    MAX_TENANT_USERS,
    MAX_TENANTS,
    MAX_TEXT,
)
from gputwin.core.fairness import DEFAULT_HALF_LIFE, MAX_WEIGHT
from gputwin.core.plugins import PARAMS, TYPED_PARAMS, check_params

# Task types one partition may serve, GPU counts history sizing may choose from: far more than any
# real cluster declares, and a bound on how much one resource may ask the scheduler to track.
MAX_TASK_TYPES = 256
MAX_ALLOWED_GPUS = 64
MAX_SPEED = 100.0  # a GPU model at most this many times as fast as speed 1
# As traces and SLURM's typed GRES write models (V100M32, a100): case kept, no spaces or ':'.
GpuModel = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=63)]

# --- SwitchTopology -------------------------------------------------------------------------------


class Switch(ApiModel):
    """One switch of the tree; the root has no parent."""

    name: HostName = Field(description="Switch name, unique in the topology.")
    parent: HostName | None = Field(
        default=None,
        description="Name of the switch one tier up (leaf -> spine -> core); unset for the root.",
    )


class NodeGroup(ApiModel):
    """Nodes hanging off one leaf switch, all with the same GPU count and labels."""

    switch: HostName = Field(
        description="The leaf switch these nodes connect to (a switch with no child switches)."
    )
    nodes: Hostlist = Field(
        description="Node names in SLURM hostlist syntax, e.g. gpu[001-016],gpu020; declaration order is kept."
    )
    gpus_per_node: int = Field(
        default=8, ge=0, le=MAX_NODE_GPUS, description=f"GPUs on each node of the group, at most {MAX_NODE_GPUS}."
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="Labels of every node in the group; GPUPartition nodeSelectors match them.",
    )
    model: GpuModel | None = Field(
        default=None,
        description="GPU model of the group's nodes (letters, digits, '.', '_', '-'; at most 63), e.g. a100 (SLURM's typed GRES gres/gpu:a100, a Kueue "
        "ResourceFlavor); jobs asking for a model run on its nodes only; unset = not declared.",
    )


class CommOverhead(ApiModel):
    """How much longer a job runs when its GPUs are spread out (patent claim 5).

    The duration is multiplied by 1 + crossNode * [job spans more than one node] + perTier * tiers,
    where tiers is 0 under one leaf switch, 1 when the job's leaves meet at a spine, and so on.
    """

    per_tier: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="Extra run-time fraction per switch tier crossed (0.1 = +10%).",
    )
    cross_node: float = Field(
        default=0.0,
        ge=0.0,
        le=10.0,
        description="Extra run-time fraction once a job spans more than one node.",
    )


class SwitchTopologySpec(ApiModel):
    """The switch tree (leaf -> spine -> ...) and the GPU nodes under its leaves."""

    switches: list[Switch] = Field(
        min_length=1, description="Every switch, each naming its parent; one root."
    )
    node_groups: list[NodeGroup] = Field(
        min_length=1,
        description="Nodes per leaf switch; node order across groups is the cluster's node order.",
    )
    comm_overhead: CommOverhead = Field(
        default_factory=CommOverhead,
        description="Communication-overhead model for jobs spanning nodes or switches.",
    )
    model_speeds: dict[str, Annotated[float, Field(gt=0.0, le=MAX_SPEED)]] = Field(
        default_factory=dict,
        max_length=MAX_TASK_TYPES,
        description="How fast each GPU model runs a job relative to speed 1, the speed trace durations are "
        f"taken at: a job runs duration / speed on it (2 = twice as fast), the slowest model of its GPUs "
        f"setting the pace; above 0 and at most {MAX_SPEED:.0f}; a model not named runs at 1.",
    )

    @model_validator(mode="after")
    def _speeds_of_declared_models(self) -> Self:
        declared = {g.model for g in self.node_groups if g.model}
        unknown = sorted(set(self.model_speeds) - declared)
        if unknown:
            raise PydanticCustomError("model_speeds", "modelSpeeds names {models}, which no node group has",
                                      {"models": ", ".join(unknown)})  # fmt: skip
        return self

    @field_validator("node_groups", mode="before")
    @classmethod
    def _count_before_expanding(cls, groups: Any) -> Any:
        # Each group's hostlist is expanded when it is validated: count them all first, so ten
        # groups of 99,999 nodes are refused without a million names being made and checked.
        total = 0
        for g, group in enumerate(groups if isinstance(groups, list) else ()):
            nodes = group.get("nodes") if isinstance(group, dict) else None
            count = (count_hostlist(nodes) or 0) if isinstance(nodes, str) else 0
            total += count
            if total > MAX_NODES:
                which = f"nodeGroups[{g}].nodes names" if count == total else f"nodeGroups[0..{g}] name"
                raise PydanticCustomError(
                    "too_many_nodes", "{which} more than {n} nodes in all", {"which": which, "n": f"{MAX_NODES:,}"}
                )
        return groups


class SwitchTopology(ResourceBase):
    """The network: switches, nodes and GPUs (cluster-scoped; exactly one per cluster)."""

    scope: ClassVar[str] = "Cluster"
    kind: Literal["SwitchTopology"] = Field(description="SwitchTopology.")
    metadata: SlurmObjectMeta = Field(description="Standard object metadata; `name` is required.")
    spec: SwitchTopologySpec = Field(description="Switch tree, nodes and overhead model.")
    status: SwitchTopologyStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


# --- GPUPartition ---------------------------------------------------------------------------------


class LabelSelector(ApiModel):
    """Select nodes by their node-group labels (all must match); empty selects every node."""

    match_labels: dict[str, str] = Field(
        default_factory=dict, description="Labels a node must carry, all of them, to join the partition."
    )


UserName = Annotated[str, Field(min_length=1, max_length=MAX_TEXT)]


class TenantQuota(ApiModel):
    """A tenant's (an account's) guaranteed GPUs in this partition, and what it may borrow and lend
    within its cohort (Kueue's nominalQuota, borrowingLimit, lendingLimit; SLURM's GrpTRES=gres/gpu=N).
    See docs/tenancy.md."""

    tenant: SlurmName = Field(description="The tenant (account) the quota is granted to; unique in the partition.")
    users: list[UserName] | None = Field(
        default=None,
        min_length=1,
        max_length=MAX_TENANT_USERS,
        description='Job users that belong to the tenant; "*" = every user no other quota of the partition '
        f"names; unset = the user named like the tenant; at most {MAX_TENANT_USERS}.",
    )
    gpus: int = Field(
        ge=0, le=MAX_QUOTA_GPUS, description="GPUs guaranteed to the tenant here (its nominal quota)."
    )
    cohort: SlurmName | None = Field(
        default=None,
        description="Quotas of one cohort lend their idle GPUs to each other; unset = no borrowing or lending.",
    )
    borrowing_limit: int | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA_GPUS,
        description="Most GPUs the tenant may hold above its guarantee, borrowed in its cohort; unset = no limit.",
    )
    lending_limit: int | None = Field(
        default=None,
        ge=0,
        le=MAX_QUOTA_GPUS,
        description="Most GPUs of its guarantee the tenant lends to its cohort while idle, at most gpus; "
        "unset = all of them.",
    )

    @model_validator(mode="after")
    def _limits(self) -> Self:
        if self.lending_limit is not None and self.lending_limit > self.gpus:
            raise PydanticCustomError("lending_limit", "lendingLimit may not exceed gpus ({gpus})", {"gpus": self.gpus})
        if self.cohort is None and (self.borrowing_limit is not None or self.lending_limit is not None):
            raise PydanticCustomError("cohort", "borrowingLimit and lendingLimit need a cohort")
        return self


class GPUPartitionSpec(ApiModel):
    """Nodes grouped by the task types they serve (patent claims 2 and 4)."""

    topology: SlurmName = Field(description="Name of the SwitchTopology the nodes belong to.")
    task_types: list[ServedTaskType] = Field(
        min_length=1,
        max_length=MAX_TASK_TYPES,
        description="Job task types routed here (each 1-64 of A-Z a-z 0-9 _ . -, not starting with . or -; "
        f'at most {MAX_TASK_TYPES}); "*" catches jobs whose task type no other partition serves. No two '
        'partitions serve one task type, and only one serves "*".',
    )
    nodes: Hostlist | None = Field(
        default=None,
        description="The partition's nodes as a SLURM hostlist; set this or nodeSelector, not both.",
    )
    node_selector: LabelSelector | None = Field(
        default=None, description="Pick nodes by label instead of listing them; set this or nodes, not both."
    )
    policy: DnsName | None = Field(
        default=None,
        description="Name of the SchedulingPolicy to use; unset = fifo, first-fit, as-requested.",
    )
    priority_tier: int = Field(
        default=0,
        ge=0,
        le=65533,
        description="Higher tiers are scheduled first and may preempt lower ones (SLURM PriorityTier).",
    )
    max_gpus_per_job: int = Field(
        default=0,
        ge=0,
        le=MAX_JOB_GPUS,
        alias="maxGPUsPerJob",
        description=f"Largest GPU request accepted; 0 = no limit; at most {MAX_JOB_GPUS} (the largest job "
        "gputwin takes).",
    )
    quotas: list[TenantQuota] = Field(
        default_factory=list,
        max_length=MAX_TENANTS,
        description="Tenants' guaranteed GPUs here (their sum at most the partition's GPUs); a job runs under "
        f"the quota naming its user. Empty = no quotas: every job may use any GPU. At most {MAX_TENANTS}.",
    )

    @field_validator("quotas")
    @classmethod
    def _distinct_tenants(cls, quotas: list[TenantQuota]) -> list[TenantQuota]:
        tenants: set[str] = set()
        users: dict[str, str] = {}
        for q in quotas:
            if q.tenant in tenants:
                raise PydanticCustomError("tenant", "tenant '{t}' has two quotas", {"t": q.tenant})
            tenants.add(q.tenant)
            for user in q.users or [q.tenant]:
                other = users.setdefault(user, q.tenant)
                if other != q.tenant:
                    raise PydanticCustomError(
                        "user", "user '{u}' is in the quotas of '{a}' and '{b}'", {"u": user, "a": other, "b": q.tenant}
                    )
        return quotas

    @model_validator(mode="after")
    def _one_node_source(self) -> Self:
        if (self.nodes is None) == (self.node_selector is None):
            raise PydanticCustomError("node_source", "set exactly one of nodes or nodeSelector")
        return self


class GPUPartition(ResourceBase):
    """A set of nodes with its own queue and policy (cluster-scoped)."""

    scope: ClassVar[str] = "Cluster"
    kind: Literal["GPUPartition"] = Field(description="GPUPartition.")
    metadata: SlurmObjectMeta = Field(description="Standard object metadata; `name` is required.")
    spec: GPUPartitionSpec = Field(description="Topology, served task types, nodes, policy and limits.")
    status: GPUPartitionStatus | None = Field(
        default=None, description="Written by the operator through the status subresource, never by users."
    )


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


# --- all kinds ------------------------------------------------------------------------------------

Resource = SwitchTopology | GPUPartition | SchedulingPolicy | GPUJob | TraceReplay
KINDS: dict[str, type[Resource]] = {
    cls.__name__: cls for cls in (SwitchTopology, GPUPartition, SchedulingPolicy, GPUJob, TraceReplay)
}

__all__ = [
    "API_VERSION",
    "KINDS",
    "MAX_ALLOWED_GPUS",
    "MAX_TASK_TYPES",
    "PARAMS",
    "Candidate",
    "CommOverhead",
    "EstimatorSpec",
    "ConfigMapRef",
    "FairnessSpec",
    "GPUJob",
    "GPUJobSpec",
    "GPUPartition",
    "GPUPartitionSpec",
    "LabelSelector",
    "NodeGroup",
    "PlacementSpec",
    "PreemptionSpec",
    "QueueSpec",
    "Resource",
    "SacctWindow",
    "SchedulingPolicy",
    "SchedulingPolicySpec",
    "SizingSpec",
    "Switch",
    "SwitchTopology",
    "SwitchTopologySpec",
    "TenantQuota",
    "TraceReplay",
    "TraceReplaySpec",
    "TraceSource",
]
