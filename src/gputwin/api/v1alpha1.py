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
    MAX_SHARDS_PER_GPU,
    SHARDS_LABEL,
    HostName,
    ResourceBase,
    ServedTaskType,
    SlurmName,
    SlurmObjectMeta,
    count_hostlist,
)
from gputwin.api.estimator import EstimatorSpec
from gputwin.api.policy import (
    MAX_ALLOWED_GPUS,
    FairnessSpec,
    PlacementSpec,
    PreemptionSpec,
    QueueSpec,
    RESERVED_PARAMS,
    SchedulingPolicy,
    SchedulingPolicySpec,
    SizingSpec,
)
from gputwin.api.status import GPUPartitionStatus, SwitchTopologyStatus
from gputwin.api.tenancy import TenantQuota
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
    MAX_JOB_GPUS,
    MAX_NODE_GPUS,
    MAX_TENANTS,
)
from gputwin.core.plugins import PARAMS

# Task types one partition may serve, GPU counts history sizing may choose from: far more than any
# real cluster declares, and a bound on how much one resource may ask the scheduler to track.
MAX_TASK_TYPES = 256
MAX_SPEED = 100.0  # a GPU model at most this many times as fast as speed 1
# As traces and SLURM's typed GRES write models (V100M32, a100): case kept, no spaces or ':'.
GpuModel = Annotated[str, Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$", max_length=63)]
# NVIDIA's MIG profile names: <compute slices out of 7>g.<memory>gb, +me with the media engines.
MigProfile = Annotated[str, Field(pattern=r"^[1-7]g\.[1-9][0-9]{0,3}gb(\+me)?$", max_length=16)]
MAX_PROFILES = 32  # NVIDIA's GPUs offer at most about ten each

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
    shards_per_gpu: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SHARDS_PER_GPU,
        description="Deploy GPU fractions to SLURM (GRES sharding, gres/shard): each GPU of these nodes is "
        f"split into this many shards, 1 to {MAX_SHARDS_PER_GPU}; a fraction f of a GPU asks for "
        "ceil(f x shardsPerGpu) shards. Unset = not shared in SLURM (a fraction there takes a whole GPU). "
        "The simulator packs fractions in milli-GPU on any GPU either way.",
    )

    @field_validator("labels")
    @classmethod
    def _no_shards_label(cls, labels: dict[str, str]) -> dict[str, str]:
        if SHARDS_LABEL in labels:  # the field's carrier to the core: set only from shardsPerGpu
            raise PydanticCustomError("labels", "label {key} is set from shardsPerGpu; use that field",
                                      {"key": SHARDS_LABEL})  # fmt: skip
        return labels


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
    mig_profiles: dict[str, Annotated[list[MigProfile], Field(min_length=1, max_length=MAX_PROFILES)]] = Field(
        default_factory=dict,
        max_length=MAX_TASK_TYPES,
        description="The MIG profiles each GPU model's GPUs may be split into, as NVIDIA names them "
        "(a100-40gb: [1g.5gb, 2g.10gb, 3g.20gb, 4g.20gb, 7g.40gb]); a profile takes the compute slices "
        "its name starts with, out of 7. GPUJobs of that model may ask for one (gpuProfile); a model "
        "not named has no MIG profiles. See docs/tenancy.md for what is simplified.",
    )

    @model_validator(mode="after")
    def _speeds_of_declared_models(self) -> Self:
        declared = {g.model for g in self.node_groups if g.model}
        unknown = sorted(set(self.model_speeds) - declared)
        if unknown:
            raise PydanticCustomError("model_speeds", "modelSpeeds names {models}, which no node group has",
                                      {"models": ", ".join(unknown)})  # fmt: skip
        unknown = sorted(set(self.mig_profiles) - declared)
        if unknown:
            raise PydanticCustomError("mig_profiles", "migProfiles names {models}, which no node group has",
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


# --- all kinds ------------------------------------------------------------------------------------

Resource = SwitchTopology | GPUPartition | SchedulingPolicy | GPUJob | TraceReplay
KINDS: dict[str, type[Resource]] = {
    cls.__name__: cls for cls in (SwitchTopology, GPUPartition, SchedulingPolicy, GPUJob, TraceReplay)
}

__all__ = [
    "API_VERSION",
    "KINDS",
    "MAX_ALLOWED_GPUS",
    "MAX_SHARDS_PER_GPU",
    "MAX_TASK_TYPES",
    "PARAMS",
    "SHARDS_LABEL",
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
    "RESERVED_PARAMS",
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
