"""Values the scheduling core speaks in: jobs, nodes, switches, partitions, policies, placements.

Everything here is a frozen dataclass: cheap to share between the simulator, the operator and the
SLURM adapter, impossible to mutate behind the scheduler's back, and pickled through their constructor
(`Frozen`: a worker process gets them in either build). Times are seconds as floats on
whatever clock the caller uses (virtual time in the simulator, epoch seconds live); the core never
reads a clock itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Mapping

from gputwin.core.frozen import Frozen

# --- jobs -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JobSpec(Frozen):
    """One GPU job as submitted: from a trace record, a GPUJob resource or a SLURM job.

    `seq` is the job's position in its source (file order); it is the final tie-break of every
    ordering, so equal keys always resolve the same way. `model` is the GPU model it asks for
    ("": any); `duration` is its run time on GPUs of speed 1 (`TopologySpec.speeds`).
    `gpu_milli` below 1000 asks for that share of one GPU (`gpus` is then 1), packed with other
    shares onto one GPU (`gputwin.core.sharing`); 1000, the default, means whole GPUs.
    `gpu_profile` names a MIG profile (e.g. 1g.10gb: the number before `g` is its compute slices,
    out of 7): the job takes that many slices of one MIG-partitioned GPU, and `gpu_milli` is then
    `sharing.profile_milli` of them (the fraction of the GPU it uses); "": no profile.
    `cpus` and `memory_mib` are what it asks for besides GPUs, where its source says (None: not
    given); the scheduler does not place by them, the learned run-time estimator reads them.
    """

    job_id: str
    submit: float
    duration: float
    gpus: int
    task_type: str
    user: str = ""
    name: str = ""
    state: str = "COMPLETED"
    priority: int = 0
    num_nodes: int = 0
    seq: int = 0
    model: str = ""
    gpu_milli: int = 1000
    gpu_profile: str = ""
    cpus: float | None = None
    memory_mib: float | None = None


# --- topology -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SwitchSpec(Frozen):
    """A network switch; `parent` is None for the root(s) of the tree."""

    name: str
    parent: str | None = None


@dataclass(frozen=True, slots=True)
class NodeSpec(Frozen):
    """A GPU node hanging off one leaf switch; `model` is its GPUs' model ("": not declared)."""

    name: str
    gpus: int
    switch: str
    labels: Mapping[str, str] = field(default_factory=dict)
    model: str = ""


@dataclass(frozen=True, slots=True)
class OverheadModel(Frozen):
    """Extra run time a job pays when its GPUs are spread out (patent claim 5).

    The job's duration is multiplied by `1 + fraction`, where
    `fraction = cross_node * [job spans > 1 node] + per_tier * (switch tiers crossed)`.
    Tiers crossed is 0 when every GPU sits under one leaf switch, 1 when the job's leaves meet at
    their parent (a spine), 2 one level higher, and so on.
    """

    per_tier: float = 0.0
    cross_node: float = 0.0

    def fraction(self, nodes: int, tiers: int) -> float:
        return (self.cross_node if nodes > 1 else 0.0) + self.per_tier * tiers


@dataclass(frozen=True, slots=True)
class TopologySpec(Frozen):
    """The switch tree and the nodes under its leaves, as declared by a SwitchTopology.

    `speeds`: how fast each GPU model runs a job relative to speed 1 (a model not named: 1). A job
    runs `duration / speed` on them, the slowest model of its placement setting the pace.
    `profiles`: the MIG profiles each GPU model's GPUs may be partitioned into (a model not named: none)."""

    name: str
    switches: tuple[SwitchSpec, ...]
    nodes: tuple[NodeSpec, ...]
    overhead: OverheadModel = OverheadModel()
    speeds: Mapping[str, float] = field(default_factory=dict)
    profiles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


# --- policies and partitions ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PolicySpec(Frozen):
    """How one partition schedules: queue order, placement, GPU sizing, preemption.

    `params` carries policy-specific knobs (for example `las_thresholds`, `qssf_prior`,
    `max_wait` of topology-aware); each plugin documents and validates the keys it reads.
    `fairness` (none, drf, fairshare) orders tenants ahead of the queue key, fairshare's usage
    decaying with `half_life` seconds; `weights` per tenant, 1 if not named (gputwin.core.fairness).
    """

    queue: str = "fifo"
    placement: str = "first-fit"
    sizing: str = "as-requested"
    backfill: bool = False
    checkpoint_seconds: float | None = None
    params: Mapping[str, object] = field(default_factory=dict)
    fairness: str = "none"
    half_life: float = 7 * 24 * 3600.0
    weights: Mapping[str, float] = field(default_factory=dict)


def policy_label(queue: str, placement: str, sizing: str | None = None, backfill: bool | None = False) -> str:
    """The one way a policy is named everywhere (summaries, demo, compare, tune, TraceReplay status):
    `queue/placement[/sizing][+backfill]`, e.g. `sjf/consolidate/as-requested+backfill`."""
    return f"{queue}/{placement}{'' if sizing is None else '/' + sizing}{'+backfill' if backfill else ''}"


@dataclass(frozen=True, slots=True)
class Candidate(Frozen):
    """One policy combination to evaluate (compare's grid, the demo, a TraceReplay's candidates).

    None keeps what the cluster declares for that setting and is left out of the name; the API's
    `Candidate` model is this value's wire format (`gputwin.api.convert.candidate`)."""

    queue: str
    placement: str
    sizing: str | None = None
    backfill: bool | None = None

    @property
    def name(self) -> str:
        return policy_label(self.queue, self.placement, self.sizing, self.backfill)

    def apply(self, policy: PolicySpec) -> PolicySpec:
        """`policy` with this candidate's settings (those not None) in place of its own."""
        changes = {k: getattr(self, k) for k in ("queue", "placement", "sizing", "backfill")}
        return replace(policy, **{k: v for k, v in changes.items() if v is not None})


@dataclass(frozen=True, slots=True)
class QuotaSpec(Frozen):
    """A tenant's (an account's) guaranteed GPUs in one partition (docs/tenancy.md).

    `users` are the job users it covers ("*": every user no other quota of the partition names).
    Members of one `cohort` lend idle guarantees to each other: a tenant holds at most
    `gpus + borrowing_limit` and lends at most `lending_limit` of its own (None: no limit / all).
    `models`: GPUs guaranteed per GPU model, each kept apart with the same rules (its own usage,
    borrowing from and lending to the same model's quotas of the cohort, the limits applying to
    each model); `gpus` is then the guarantee of jobs asking for no model or a model not named
    there (docs/tenancy.md, "GPU models").
    """

    tenant: str
    gpus: int
    users: tuple[str, ...] = ()
    cohort: str | None = None
    borrowing_limit: int | None = None
    lending_limit: int | None = None
    models: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionSpec(Frozen):
    """Nodes grouped by the task types they serve (patent claims 2 and 4), and the tenants'
    quotas of their GPUs (none: no quota applies, every job may use any GPU)."""

    name: str
    nodes: tuple[str, ...]
    task_types: tuple[str, ...]
    policy: PolicySpec = PolicySpec()
    priority_tier: int = 0
    max_gpus_per_job: int = 0
    quotas: tuple[QuotaSpec, ...] = ()


@dataclass(frozen=True, slots=True)
class ClusterSpec(Frozen):
    """A whole declared cluster: one topology and the partitions carved out of it."""

    topology: TopologySpec
    partitions: tuple[PartitionSpec, ...]


# --- decisions ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Placement(Frozen):
    """GPUs chosen for one job: `(node index, gpus)` pairs plus the span they imply."""

    slots: tuple[tuple[int, int], ...]
    leaves: int
    tiers: int

    @property
    def nodes(self) -> int:
        return len(self.slots)

    @property
    def gpus(self) -> int:
        return sum(g for _, g in self.slots)
