"""Policy out: compile a declared cluster (topology, partitions, policies) into SLURM's own files.

`render(cluster, version=...)` returns a `RenderedConfig`: four managed files (five from 25.05 on),
deterministic bytes (same input, same bytes), written later by `apply`:

- ``topology.conf``: the switch tree from `Topology(spec).graph` (`topology/tree` form, valid on
  22.05, 24.11 and 25.05), leaves first, nodes and child switches as hostlists; from 25.05 also
  ``topology.yaml`` (tree + leaves-as-blocks, see `topology_files`; 24.11 does not read it).
- ``gputwin-partitions.conf`` (an ``Include``): one ``PartitionName=`` line per partition: nodes as a
  hostlist, ``PriorityTier``, ``PreemptMode`` (REQUEUE for preemptive queue policies, else OFF),
  ``State=UP``; the first partition is ``Default=YES`` so jobs without a task type land somewhere.
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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from string import Template

import hostlist

from gputwin.api.meta import CATCH_ALL, TASK_TYPE, TASK_TYPE_RULE
from gputwin.core.history import DEFAULT_PRIOR, JobHistory
from gputwin.core.model import ClusterSpec, JobSpec, PartitionSpec
from gputwin.core.plugins import make_sizer
from gputwin.core.policies import make_policy, qssf_prior
from gputwin.core.sizing import HistorySizing

from .checks import NAME, check_name
from .errors import SlurmInputError
from .topology_files import TOPOLOGY_YAML, YAML_SINCE, header, render_topology, render_topology_yaml

TOPOLOGY = "topology.conf"
PARTITIONS = "gputwin-partitions.conf"
SCHEDULING = "gputwin-scheduling.conf"
JOB_SUBMIT = "job_submit.lua"
MANAGED_FILES = (SCHEDULING, PARTITIONS, TOPOLOGY, JOB_SUBMIT)  # + topology.yaml from 25.05 on
SUPPORTED_VERSIONS = ("22.05", "24.11", "25.05")  # 25.05: rendered only, no such cluster runs here
TASK_FIELD = "--comment=task:<type>"

# Lua string literals: a subset of the name pattern, so nothing can close or escape the literal.
_LUA_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
_TASK_TYPE = re.compile(TASK_TYPE[1:-1], re.ASCII)  # the API model's pattern, unanchored for fullmatch
_LUA_INT_MAX = 2**31 - 1
# Seconds an srtf job without history is assumed to run; a qssf job gets its partition's
# `qssf_prior` (QSSF_PRIOR in the script), the twin's guess for a job like none seen before.
DEFAULT_ESTIMATE = round(DEFAULT_PRIOR)
PRIORITY_MAX = 10_000_000  # explicit priorities are PRIORITY_MAX - seconds (shorter runs first)


@dataclass(frozen=True, slots=True)
class LuaTables:
    """History-derived data for job_submit.lua; empty tables when no history is given.

    - ``gpu_sizes[(partition, task_type, requested)] = gpus``: the `history` sizing rule's choice.
    - ``estimates[(user, job_name)] = seconds``: qssf runtime estimates.
    """

    gpu_sizes: Mapping[tuple[str, str, int], int] = field(default_factory=dict)
    estimates: Mapping[tuple[str, str], float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class RenderedConfig:
    """The managed files (name -> bytes, in `MANAGED_FILES` order) and what the live config must have."""

    version: str
    files: tuple[tuple[str, bytes], ...]
    requires: tuple[tuple[str, str], ...] = ()
    partitions: tuple[tuple[str, str], ...] = ()  # (name, node hostlist), for verification
    switches: tuple[str, ...] = ()

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
    _qssf_priors(cluster)  # a bad qssf_prior is the user's one-line error, before the core reads params
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
        "PriorityWeightFairshare=0\n",
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
    return tuple(needs)


# --- job_submit.lua -------------------------------------------------------------------------------


def _lua_name(value: object, what: str) -> str:
    name = check_name(value, what)
    if _LUA_SAFE.fullmatch(name) is None:  # already implied by NAME; kept as the Lua-specific guard
        raise SlurmInputError(f"{what}: refused {name!r:.80} in a Lua string")
    return name


def _lua_str(value: object, what: str) -> str:
    return '"' + _lua_name(value, what) + '"'


def _lua_int(value: float, what: str) -> str:
    number = round(value)
    if not 0 <= number <= _LUA_INT_MAX:
        raise SlurmInputError(f"{what}: {value!r} out of range 0..{_LUA_INT_MAX}")
    return str(number)


def _lua_table(entries: Iterable[tuple[str, str]], indent: str = "  ") -> str:
    """A Lua table literal from already-rendered (key, value) literals, one entry per line."""
    body = "".join(f"{indent}[{key}] = {value},\n" for key, value in entries)
    return "{\n" + body + indent[:-2] + "}" if body else "{}"


def _served(cluster: ClusterSpec) -> dict[str, str]:
    """Task type (or "*") -> the partition serving it. The API refuses two partitions for one type
    (`gputwin.api.validate`); a ClusterSpec built in code is held to the same rule here."""
    seen: dict[str, str] = {}
    for part in cluster.partitions:
        for task in part.task_types:
            if seen.setdefault(task, part.name) != part.name:
                raise SlurmInputError(f"task type {task!r} is served by both {seen[task]} and {part.name}")
    return seen


def _routes(cluster: ClusterSpec) -> str:
    served = {t: p for t, p in _served(cluster).items() if t != CATCH_ALL}
    return _lua_table((_lua_str(t, "task type"), _lua_str(p, "partition")) for t, p in sorted(served.items()))


def _catch_all(cluster: ClusterSpec) -> str:
    part = _served(cluster).get(CATCH_ALL)
    return "nil" if part is None else _lua_str(part, "partition")


def _per_partition(cluster: ClusterSpec, pick: dict[str, float]) -> str:
    return _lua_table(
        (_lua_str(p, "partition"), _lua_int(v, f"partition {p}")) for p, v in sorted(pick.items())
    )


def _switch_waits(cluster: ClusterSpec) -> dict[str, float]:
    return {
        p.name: float(str(p.policy.params.get("max_wait", 300.0)))
        for p in cluster.partitions
        if p.policy.placement in ("topology-aware", "consolidate")
    }


def _qssf_priors(cluster: ClusterSpec) -> dict[str, float]:
    """Each qssf partition's `qssf_prior`: the estimate of a job with no history there."""
    priors: dict[str, float] = {}
    for p in cluster.partitions:
        if p.policy.queue == "qssf":
            try:
                priors[p.name] = qssf_prior(p.policy.params)
            except ValueError as exc:
                raise SlurmInputError(f"partition {p.name}: {exc}") from None
    return priors


# Queue policies SLURM runs as explicit priorities set in job_submit.lua (shorter first):
# sjf from the time limit; qssf from the history estimate x GPUs (the twin's QSSF key); srtf from
# the history estimate (its remaining time at submission). SLURM cannot preempt within one
# partition, so srtf keeps its order but not its in-partition preemption (see render_scheduling).
PRIORITY_QUEUES = ("sjf", "qssf", "srtf")


def _priority_kinds(cluster: ClusterSpec) -> str:
    kinds = {p.name: p.policy.queue for p in cluster.partitions if p.policy.queue in PRIORITY_QUEUES}
    return _lua_table((_lua_str(p, "partition"), f'"{k}"') for p, k in sorted(kinds.items()))


def _gpu_sizes(cluster: ClusterSpec, tables: LuaTables) -> str:
    history_parts = {p.name for p in cluster.partitions if p.policy.sizing == "history"}
    nested: dict[str, dict[str, dict[int, int]]] = {}
    for (part, task, requested), gpus in sorted(tables.gpu_sizes.items()):
        _lua_name(part, "sizing table partition")
        _lua_name(task, "sizing table task type")
        if part in history_parts:  # only partitions whose policy says `sizing: history`
            nested.setdefault(part, {}).setdefault(task, {})[int(requested)] = int(gpus)
    return _lua_table(
        (_lua_str(p, "partition"), _lua_table(
            ((_lua_str(t, "task type"), _lua_table(
                ((_lua_int(g, "requested GPUs"), _lua_int(s, "sized GPUs")) for g, s in sorted(sizes.items())),
                "      ")) for t, sizes in sorted(tasks.items())), "    "))
        for p, tasks in sorted(nested.items())
    )  # fmt: skip


def _estimates(tables: LuaTables) -> str:
    nested: dict[str, dict[str, float]] = {}
    for (user, name), seconds in sorted(tables.estimates.items()):
        nested.setdefault(_lua_name(user, "estimate table user"), {})[
            _lua_name(name, "estimate table job name")
        ] = seconds
    return _lua_table(
        (_lua_str(u, "user"), _lua_table(
            ((_lua_str(n, "job name"), _lua_int(min(s, PRIORITY_MAX), "estimate seconds"))  # capped there anyway
             for n, s in sorted(names.items())), "    "))
        for u, names in sorted(nested.items())
    )  # fmt: skip


_LUA_TEMPLATE = Template("""\
-- Managed by gputwin (gputwin slurm apply), SLURM $version: job routing, GPU sizing, switch
-- requests and priority. Generated from the cluster's resources; do not edit (rewritten on apply).
-- Task type: sbatch --comment=task:<type>. Known type -> its partition; unknown -> the catch-all
-- partition (taskTypes "*") or, without one, refused; no task comment -> the job keeps its own -p
-- (or the default partition).
-- SLURM runs this with Lua 5.1. The tables below are data emitted by the renderer.

local ROUTES = $routes
local CATCH_ALL = $catch_all
local MAX_GPUS = $max_gpus
local SWITCH_WAIT = $switch_wait
local PRIORITY_KIND = $priority_kind
local GPU_SIZES = $gpu_sizes
local ESTIMATES = $estimates
local DEFAULT_ESTIMATE = $default_estimate
local QSSF_PRIOR = $qssf_prior
local PRIORITY_MAX = $priority_max
local NO_VAL = 4294967294

local function task_type(comment)
  if comment == nil then return nil end
  return string.match(comment, "^task:([A-Za-z0-9_.-]+)$$")
end

-- 22.05 passes --gres=gpu:N as "gres:gpu:N" (or "gres:gpu:TYPE:N"); anything else is left alone.
local function split_gpus(tres)
  if tres == nil then return nil, nil end
  local prefix, count = string.match(tres, "^(gres:gpu:)(%d+)$$")
  if prefix == nil then prefix, count = string.match(tres, "^(gres:gpu:[A-Za-z0-9_]+:)(%d+)$$") end
  if prefix == nil then return nil, nil end
  return prefix, tonumber(count)
end

local function lookup(t, a, b, c)
  local x = t[a]
  if x ~= nil and b ~= nil then x = x[b] end
  if x ~= nil and c ~= nil then x = x[c] end
  return x
end

local function explicit_priority(part, job_desc, gpus)
  local kind = PRIORITY_KIND[part]
  local seconds = nil
  if kind == "qssf" or kind == "srtf" then
    seconds = lookup(ESTIMATES, job_desc.user_name, job_desc.name)
      or (kind == "qssf" and QSSF_PRIOR[part]) or DEFAULT_ESTIMATE
    -- qssf ranks by predicted GPU time (as the twin's QSSF key); srtf by predicted run time.
    if kind == "qssf" then seconds = seconds * (gpus or 1) end
  elseif kind == "sjf" and job_desc.time_limit ~= nil and job_desc.time_limit < NO_VAL then
    seconds = job_desc.time_limit * 60
  end
  if seconds == nil then return nil end
  return math.max(1, PRIORITY_MAX - math.min(seconds, PRIORITY_MAX - 1))
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  local task = task_type(job_desc.comment)
  local part = job_desc.partition
  if task ~= nil then
    part = ROUTES[task] or CATCH_ALL
    if part == nil then
      slurm.log_user("gputwin: unknown task type " .. task)
      return slurm.ERROR
    end
    job_desc.partition = part
  end
  if part == nil then return slurm.SUCCESS end
  local prefix, gpus = split_gpus(job_desc.tres_per_node)
  if gpus ~= nil then
    local sized = lookup(GPU_SIZES, part, task or "", gpus)
    if sized ~= nil and sized ~= gpus then
      slurm.log_info("gputwin: job %s: %d -> %d GPUs (history sizing)", tostring(job_desc.name), gpus, sized)
      job_desc.tres_per_node = prefix .. sized
      gpus = sized
    end
    if MAX_GPUS[part] ~= nil and gpus > MAX_GPUS[part] then
      slurm.log_user("gputwin: partition " .. part .. " allows at most " .. MAX_GPUS[part] .. " GPUs per job")
      return slurm.ERROR
    end
  end
  if SWITCH_WAIT[part] ~= nil then
    job_desc.req_switch = 1
    job_desc.wait4switch = SWITCH_WAIT[part]
  end
  local priority = explicit_priority(part, job_desc, gpus)
  if priority ~= nil then job_desc.priority = priority end
  return slurm.SUCCESS
end

function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  return slurm.SUCCESS
end
""")


def render_job_submit(cluster: ClusterSpec, tables: LuaTables, version: str) -> str:
    max_gpus = {p.name: float(p.max_gpus_per_job) for p in cluster.partitions if p.max_gpus_per_job > 0}
    return _LUA_TEMPLATE.substitute(
        version=version,
        routes=_routes(cluster),
        catch_all=_catch_all(cluster),
        max_gpus=_per_partition(cluster, max_gpus),
        switch_wait=_per_partition(cluster, _switch_waits(cluster)),
        priority_kind=_priority_kinds(cluster),
        gpu_sizes=_gpu_sizes(cluster, tables),
        estimates=_estimates(tables),
        default_estimate=DEFAULT_ESTIMATE,
        qssf_prior=_per_partition(cluster, _qssf_priors(cluster)),
        priority_max=PRIORITY_MAX,
    )


# --- tables from history --------------------------------------------------------------------------


def sizing_table(cluster: ClusterSpec, history: JobHistory) -> dict[tuple[str, str, int], int]:
    """The `history` sizing rule evaluated per (partition, task type, requested GPUs) with evidence."""
    gpus_of = {n.name: n.gpus for n in cluster.topology.nodes}
    table: dict[tuple[str, str, int], int] = {}
    for part in cluster.partitions:
        if part.policy.sizing != "history":
            continue
        sizer = make_sizer("history", part.policy.params)
        assert isinstance(sizer, HistorySizing)
        capacity = sum(gpus_of[n] for n in part.nodes)
        # "*" is no job's task type: jobs it catches keep their own and are sized as requested.
        for task in (t for t in part.task_types if t != CATCH_ALL):
            for requested in range(1, capacity + 1):
                run = history.run_stats(part.name, task, requested)
                if run.count == 0:
                    continue  # never requested: no evidence to size from
                job = JobSpec("table", 0.0, run.mean, requested, task)
                chosen = sizer.size(job, part.name, capacity, history).gpus
                if chosen != requested:
                    table[(part.name, task, requested)] = chosen
    return table


def estimate_table(jobs: Iterable[JobSpec]) -> dict[tuple[str, str], float]:
    """Mean run time per (user, job name) of finished jobs; names the Lua guard refuses are skipped."""
    sums: dict[tuple[str, str], tuple[float, int]] = {}
    for job in jobs:
        if NAME.fullmatch(job.user) is None or NAME.fullmatch(job.name) is None:
            continue  # e.g. `a|b`: such a job cannot be matched safely, so it gets the default
        total, count = sums.get((job.user, job.name), (0.0, 0))
        sums[(job.user, job.name)] = (total + job.duration, count + 1)
    return {key: total / count for key, (total, count) in sums.items()}
