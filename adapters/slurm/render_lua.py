"""job_submit.lua for `render`: routing, GPU sizing, switch requests and priorities in SLURM's Lua 5.1,
and GPU fractions (`--comment=...,milli:M` -> `gres:shard:ceil(M*S/1000)`, see `render_gres`).

Every string put in the script passes `check_name` and the stricter Lua-safe pattern
(``[A-Za-z0-9_.-]``), so no quote, bracket or newline can end a literal; the tables are data
literals built here, never code from user strings. `LuaTables` carries the history-derived data.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from string import Template

from gputwin.api.meta import CATCH_ALL
from gputwin.core.history import DEFAULT_PRIOR
from gputwin.core.model import ClusterSpec
from gputwin.core.policies import qssf_prior

from .checks import check_name
from .errors import SlurmInputError
from .render_gres import partition_shards

# Lua string literals: a subset of the name pattern, so nothing can close or escape the literal.
_LUA_SAFE = re.compile(r"[A-Za-z0-9_.-]{1,64}", re.ASCII)
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


def qssf_priors(cluster: ClusterSpec) -> dict[str, float]:
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
-- (or the default partition). A fraction of one GPU: --comment=task:<type>,milli:<1-999> (or
-- milli:<M> alone) -> ceil(M x S / 1000) shards (--gres=shard:N) in a partition whose GPUs have S
-- shards each, else one whole GPU.
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
local SHARDS = $shards
local DEFAULT_PARTITION = $default_partition
local NO_VAL = 4294967294

-- (task type or nil, milli-GPU or nil) from the comment.
local function comment_fields(comment)
  if comment == nil then return nil, nil end
  local task, milli = string.match(comment, "^task:([A-Za-z0-9_.-]+),milli:(%d+)$$")
  if task == nil then task = string.match(comment, "^task:([A-Za-z0-9_.-]+)$$") end
  if task == nil then milli = string.match(comment, "^milli:(%d+)$$") end
  return task, tonumber(milli)
end

-- 22.05 passes --gres=gpu:N as "gres:gpu:N" (or "gres:gpu:TYPE:N"); anything else is left alone.
local function split_gpus(tres)
  if tres == nil then return nil, nil end
  local prefix, count = string.match(tres, "^(gres:gpu:)(%d+)$$")
  if prefix == nil then prefix, count = string.match(tres, "^(gres:gpu:[A-Za-z0-9_]+:)(%d+)$$") end
  if prefix == nil then return nil, nil end
  return prefix, tonumber(count)
end

-- A share of one GPU: shards rounded up (never more than the GPU's 1000 milli), or a whole GPU
-- where the partition's GPUs have no shards. Returns false after telling the user why it cannot.
local function fraction_to_gres(job_desc, part, milli)
  if milli < 1 or milli > 999 then
    slurm.log_user("gputwin: milli must be 1..999 (a fraction of one GPU), got " .. milli)
    return false
  end
  local prefix, gpus = split_gpus(job_desc.tres_per_node)
  if job_desc.tres_per_node ~= nil and gpus ~= 1 then
    slurm.log_user("gputwin: a fraction (milli:N) goes with --gres=gpu:1 or no GPU request")
    return false
  end
  local per_gpu = SHARDS[part]
  if per_gpu == nil then
    job_desc.tres_per_node = (prefix or "gres:gpu:") .. "1"
  else
    -- 22.05 types shards as their GPUs (Gres=...,shard:h100:32): a typed share keeps its model.
    local model = prefix and string.match(prefix, "^gres:gpu:([A-Za-z0-9_]+):$$")
    local shards = math.floor((milli * per_gpu + 999) / 1000)
    job_desc.tres_per_node = "gres:shard:" .. (model and model .. ":" or "") .. shards
  end
  return true
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
  local task, milli = comment_fields(job_desc.comment)
  local part = job_desc.partition
  if task ~= nil then
    part = ROUTES[task] or CATCH_ALL
    if part == nil then
      slurm.log_user("gputwin: unknown task type " .. task)
      return slurm.ERROR
    end
    job_desc.partition = part
  end
  if milli ~= nil and not fraction_to_gres(job_desc, part or DEFAULT_PARTITION, milli) then
    return slurm.ERROR
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
        qssf_prior=_per_partition(cluster, qssf_priors(cluster)),
        priority_max=PRIORITY_MAX,
        shards=_per_partition(cluster, {p: float(n) for p, n in partition_shards(cluster).items()}),
        default_partition=_lua_str(cluster.partitions[0].name, "partition") if cluster.partitions else "nil",
    )
