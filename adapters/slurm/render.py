"""Policy out: compile a declared cluster (topology, partitions, policies) into SLURM's own files.

`render(cluster, version=...)` returns a `RenderedConfig`: four managed files (five from 25.05 on),
deterministic bytes (same input, same bytes), written later by `apply`:

- ``topology.conf``: the switch tree from `Topology(spec).graph` (`topology/tree` form, valid on
  22.05, 24.11 and 25.05), leaves first, nodes and child switches as hostlists; from 25.05 also
  ``topology.yaml`` (tree + leaves-as-blocks, see `topology_files`; 24.11 does not read it).
- ``gputwin-partitions.conf`` (an ``Include``): one ``PartitionName=`` line per partition: nodes as a
  hostlist, ``PriorityTier``, ``PreemptMode`` (REQUEUE for preemptive queue policies, else OFF),
  ``State=UP``, ``TRESBillingWeights=GRES/gpu=1.0`` under fairshare (usage in GPU-seconds, as in
  the twin; SLURM's default bills CPUs); the first partition is ``Default=YES`` so jobs without a task type land somewhere.
- ``gputwin-scheduling.conf`` (an ``Include``): cluster-wide settings the policies imply that
  ``scontrol reconfigure`` can change (checked on 22.05, see docs/slurm-policy-out in the report):
  ``PreemptType``/``PreemptMode``, the multifactor weights and ``SchedulerParameters`` (event-driven
  starts; backfill loop off unless a partition backfills or preempts, so fifo stays strict).
- ``job_submit.lua``: routing, GPU sizing, switch requests, priority (see below).

The task-type field (patent claim 2) is the job's comment: ``sbatch --comment=task:<type>``. A job
with a known type is routed to its partition; an unknown type goes to the partition serving
``"*"`` (the catch-all), or is refused when there is none; no comment leaves the job alone (its own
``-p`` or the default partition).

What SLURM cannot take from an include + reconfigure is NOT written; it is returned in
`RenderedConfig.requires` (setting -> value the live controller must already report), which
`apply` checks against ``scontrol show config`` before writing anything:
``TopologyPlugin=topology/tree`` (topology-aware/consolidate placement) and
``JobSubmitPlugins=lua`` — both need a slurmctld restart to change. ``SelectTypeParameters`` (node
packing) also needs a restart of every daemon, so consolidate relies on cons_tres' best fit plus a
one-switch request instead. ``MaxTRESPerJob`` is a QOS limit, not a partition option (22.05's parser
rejects it), so ``maxGPUsPerJob`` is enforced in the Lua script. SLURM has no random placement:
a `random` partition (a simulation baseline) gets SLURM's own node order, as first-fit does.

What a valid cluster is, is decided by the API model (`gputwin.api`): task types follow its
`TASK_TYPE` pattern, one partition per task type and one ``"*"``, names SLURM can take; whatever
`load_cluster` accepts renders. The renderer still checks every string from a resource (partition,
node, switch, task type, user and job names) against the same patterns before it is put in any
file (a ClusterSpec may be built in code), and Lua strings are additionally limited to
``[A-Za-z0-9_.-]`` so no quote, bracket or newline can end a literal. Tables in the Lua script are
data literals built here, never code from user strings.

Node GRES (typed GPUs, GPU shards for fractions) need a restart, so they are rendered for the
site, never written: `RenderedConfig.nodes` (slurm.conf lines), `.gres_conf` (gres.conf shard
lines), checked live by `apply_all` (`render_gres`).

This module renders the slurm.conf includes and assembles the result; `render_lua` writes
job_submit.lua and `render_tables` derives its data tables from history.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

import hostlist

from gputwin.api.meta import CATCH_ALL, TASK_TYPE, TASK_TYPE_RULE
from gputwin.core.model import ClusterSpec, PartitionSpec
from gputwin.core.policies import make_policy

from .checks import check_name
from .errors import SlurmInputError
from .render_lua import DEFAULT_ESTIMATE, PRIORITY_MAX, LuaTables, qssf_priors, render_job_submit
from .render_tables import estimate_table, sizing_table
from .render_gres import node_models, node_shard_counts, partition_shards, render_gres_conf, render_nodes
from .render_tenancy import Tenancy, priority_lines, render_tenancy
from .topology_files import TOPOLOGY_YAML, YAML_SINCE, header, render_topology, render_topology_yaml

__all__ = [  # the names callers import from here; the job_submit.lua and history-table halves live beside
    "DEFAULT_ESTIMATE", "JOB_SUBMIT", "MANAGED_FILES", "PARTITIONS", "PRIORITY_MAX", "SCHEDULING",
    "SUPPORTED_VERSIONS", "TASK_FIELD", "TOPOLOGY", "LuaTables", "RenderedConfig", "estimate_table",
    "NODES", "Tenancy", "managed_files", "render", "render_partitions", "render_scheduling", "sizing_table",
]  # fmt: skip

TOPOLOGY = "topology.conf"
PARTITIONS = "gputwin-partitions.conf"
SCHEDULING = "gputwin-scheduling.conf"
JOB_SUBMIT = "job_submit.lua"
NODES = "gputwin-nodes.conf"  # rendered for the site's slurm.conf, never written by apply (restart)
MANAGED_FILES = (SCHEDULING, PARTITIONS, TOPOLOGY, JOB_SUBMIT)  # + topology.yaml from 25.05 on
SUPPORTED_VERSIONS = ("22.05", "24.11", "25.05")  # 25.05: rendered only, no such cluster runs here
TASK_FIELD = "--comment=task:<type>"
_TASK_TYPE = re.compile(TASK_TYPE[1:-1], re.ASCII)  # the API model's pattern, unanchored for fullmatch

@dataclass(frozen=True, slots=True)
class RenderedConfig:
    """The managed files (name -> bytes, in `MANAGED_FILES` order) and what the live config must have."""

    version: str
    files: tuple[tuple[str, bytes], ...]
    requires: tuple[tuple[str, str], ...] = ()
    partitions: tuple[tuple[str, str], ...] = ()  # (name, node hostlist), for verification
    switches: tuple[str, ...] = ()
    tenancy: Tenancy = Tenancy()  # accounts, QOS, users for slurmdbd (`accounts`)
    nodes: bytes = b""  # NODES: node lines with typed GRES
    node_models: tuple[tuple[str, str], ...] = ()  # (node, GPU model) slurmctld must report
    gres_conf: bytes = b""  # gres.conf shard lines for the site, never written by apply (restart)
    node_shards: tuple[tuple[str, int], ...] = ()  # (node, shards on it) slurmctld must report

    def __getitem__(self, name: str) -> bytes:
        for key, data in self.files:
            if key == name:
                return data
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return iter(name for name, _ in self.files)

    def as_dict(self) -> dict[str, bytes]:
        return dict(self.files)


def render(
    cluster: ClusterSpec, *, version: str = "22.05", tables: LuaTables | None = None
) -> RenderedConfig:
    """Compile `cluster` into the managed files for SLURM `version` ("22.05" or "24.11")."""
    if version not in SUPPORTED_VERSIONS:
        raise SlurmInputError(f"SLURM version {version!r}: want one of {', '.join(SUPPORTED_VERSIONS)}")
    _check_cluster_names(cluster)
    qssf_priors(cluster)  # a bad qssf_prior is the user's one-line error, before the core reads params
    tables = tables or LuaTables()
    files = {
        SCHEDULING: render_scheduling(cluster, version),
        PARTITIONS: render_partitions(cluster, version),
        TOPOLOGY: render_topology(cluster, version),
        JOB_SUBMIT: render_job_submit(cluster, tables, version),
    }
    if version >= YAML_SINCE:  # "YY.MM" strings order like the releases
        files[TOPOLOGY_YAML] = render_topology_yaml(cluster, version)
    return RenderedConfig(
        version=version,
        files=tuple((name, files[name].encode("ascii")) for name in managed_files(version)),
        requires=_requires(cluster),
        partitions=tuple((p.name, hostlist.collect_hostlist(list(p.nodes))) for p in cluster.partitions),
        switches=tuple(s.name for s in cluster.topology.switches),
        tenancy=render_tenancy(cluster),
        nodes=render_nodes(cluster).encode("ascii"),
        node_models=node_models(cluster),
        gres_conf=render_gres_conf(cluster).encode("ascii"),
        node_shards=node_shard_counts(cluster),
    )


def managed_files(version: str) -> tuple[str, ...]:
    """The files gputwin writes for SLURM `version`: topology.yaml too from 25.05 on."""
    return MANAGED_FILES + ((TOPOLOGY_YAML,) if version >= YAML_SINCE else ())


def _check_cluster_names(cluster: ClusterSpec) -> None:
    """Every resource string that reaches a file, checked before anything is rendered."""
    check_name(cluster.topology.name, "topology name")
    for sw in cluster.topology.switches:
        check_name(sw.name, "switch name")
    for node in cluster.topology.nodes:
        check_name(node.name, "node name")
    known = {n.name for n in cluster.topology.nodes}
    if not cluster.partitions:
        raise SlurmInputError("partitions: none declared")
    for part in cluster.partitions:
        check_name(part.name, "partition name")
        for member in part.nodes:
            check_name(member, f"partition {part.name} node")
            if member not in known:
                raise SlurmInputError(f"partition {part.name}: node {member!r} is not in the topology")
        for task in part.task_types:
            _check_task_type(task, f"partition {part.name} task type")


def _check_task_type(task: str, what: str) -> None:
    # The API's pattern, a subset of the Lua-safe one (`_lua_str` checks again as it writes).
    if task != CATCH_ALL and _TASK_TYPE.fullmatch(task) is None:
        raise SlurmInputError(f"{what}: refused {task!r:.80}: want {TASK_TYPE_RULE}, or {CATCH_ALL!r} alone")


def _header(what: str, version: str) -> str:
    return header(what, version)


# --- partitions -----------------------------------------------------------------------------------


def _preemptive(part: PartitionSpec) -> bool:
    return bool(make_policy(part.policy.queue, dict(part.policy.params)).preemptive)


GPU_BILLING = "GRES/gpu=1.0"  # a fairshare partition's TRESBillingWeights


def render_partitions(cluster: ClusterSpec, version: str) -> str:
    lines = [_header("partition definitions", version)]
    for i, part in enumerate(cluster.partitions):
        words = [
            f"PartitionName={part.name}",
            f"Nodes={hostlist.collect_hostlist(list(part.nodes))}",
            f"PriorityTier={int(part.priority_tier)}",
            f"PreemptMode={'REQUEUE' if _preemptive(part) else 'OFF'}",
            "MaxTime=INFINITE",
            "State=UP",
        ]
        if part.policy.fairness == "fairshare":
            # Usage in GPU-seconds, as the twin counts it: SLURM bills CPUs unless a partition
            # lists weights, and TRES it does not list weigh 0 (so CPU and memory count nothing).
            words.append(f"TRESBillingWeights={GPU_BILLING}")
        if i == 0:
            words.append("Default=YES")  # jobs without a task type need somewhere to go
        lines.append(" ".join(words) + "\n")
    return "".join(lines)


# --- scheduling -----------------------------------------------------------------------------------


def render_scheduling(cluster: ClusterSpec, version: str) -> str:
    """Cluster-wide settings; all verified to change with `scontrol reconfigure` on 22.05."""
    preempt = any(_preemptive(p) for p in cluster.partitions)
    lines = [
        _header("scheduling, priority and preemption", version),
        "# Preemptive queue policies (srtf, las) -> jobs of a lower PriorityTier are requeued.\n",
        f"PreemptType={'preempt/partition_prio' if preempt else 'preempt/none'}\n",
        f"PreemptMode={'REQUEUE' if preempt else 'OFF'}\n",
        "# No age/size/fairshare reordering: fifo keeps submit order; sjf/qssf set explicit\n",
        "# priorities in job_submit.lua (SLURM has no per-partition priority weights).\n",
        "PriorityWeightAge=0\n",
        "PriorityWeightJobSize=0\n",
        *priority_lines(cluster),
        "PriorityWeightPartition=0\n",
        "PriorityWeightQOS=0\n",
        *_scheduler_parameters(cluster),
    ]
    return "".join(lines)


def _scheduler_parameters(cluster: ClusterSpec) -> list[str]:
    """``SchedulerParameters``: start jobs on the event that frees room, as the twin does.

    - ``batch_sched_delay=0``: SLURM's default holds the scheduling of a batch job for up to 3 s
      after submission (a high-throughput guard); the twin starts it at once.
    - ``bf_interval=1``: the backfill loop runs every second (default 30 s) and right after job
      events, so it starts jobs faster than the main scheduler's once-a-second pass.
    - ``bf_max_job_test=1`` when no partition backfills or preempts: backfill may then only start
      the highest-priority pending job, never one behind it, so every partition keeps strict
      priority order (a job that does not fit blocks the ones behind it) as in the twin's
      non-preemptive loop. Jobs here have no time limits, and with full depth SLURM's backfill
      would start any later job that fits, reordering fifo. Backfilling and preemptive policies
      (the twin's "whatever fits next") keep the default depth.
    SLURM keeps the last definition of a key, so this line replaces a site's own
    SchedulerParameters: that key is managed by gputwin.
    """
    backfill = any(p.policy.backfill or _preemptive(p) for p in cluster.partitions)
    params = "batch_sched_delay=0,bf_interval=1" + ("" if backfill else ",bf_max_job_test=1")
    return [
        "# Event-driven starts (no batch scheduling delay); a backfill loop only for backfill or\n",
        "# preemptive policies, else strict priority order per partition.\n",
        f"SchedulerParameters={params}\n",
    ]


def _requires(cluster: ClusterSpec) -> tuple[tuple[str, str], ...]:
    """Settings a restart would be needed for: the live controller must already have them."""
    needs = [("JobSubmitPlugins", "lua")]  # the routing script does nothing without it
    if any(p.policy.placement in ("topology-aware", "consolidate") for p in cluster.partitions):
        needs.append(("TopologyPlugin", "topology/tree"))
    if any(p.policy.fairness == "fairshare" for p in cluster.partitions):
        needs.append(("PriorityType", "priority/multifactor"))
        needs.append(("AccountingStorageTRES", "gres/gpu"))  # what TRESBillingWeights=GRES/gpu bills
    if partition_shards(cluster):  # shards are a GRES type, and AllocTRES must carry them for history
        needs += [("GresTypes", "shard"), ("AccountingStorageTRES", "gres/shard")]
    if any(p.quotas for p in cluster.partitions):  # QOS GrpTRES is enforced only with these
        needs += [("AccountingStorageEnforce", "limits"), ("AccountingStorageEnforce", "qos")]
    return tuple(needs)
