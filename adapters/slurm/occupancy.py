"""What the live SLURM cluster is doing right now, per partition: GPUs in use, jobs queued and running.

The operator's `slurm` backend shows this in the GPUPartition statuses and the /metrics gauges,
since slurmctld, not the operator's own scheduler, runs the jobs there. Two reads, both with an
explicit output format so nothing depends on column widths or the user's SINFO_FORMAT:

- ``sinfo -N -h -a -O NodeList:0|,Partition:0|,Gres:0|,GresUsed:0`` — one line per node and
  partition (a node in two partitions counts in both), with configured and allocated GRES, e.g.
  ``gpu09|debug|gpu:h100:8|gpu:h100:3(IDX:0-2)``. Width 0 prints a field whole (a width cuts it).
  GresUsed is what 22.05 reports for every node whatever the accounting setup; a node's AllocTRES
  carries a GPU count only when AccountingStorageTRES lists gres/gpu.
  With GRES sharding a GPU held by shards is busy too: 22.05 prints the shards in use as
  ``shard:h100:2(IDX:0-1)`` (the count is of GPUs with shards, not of shards, as captured live:
  7 shards on 2 GPUs print 2), so GPUs allocated = the GPU indexes of the ``gpu`` entries and of
  the ``shard`` entries together (``busy_gpus``); without indexes, the two counts added.
- ``squeue -h -r -a -t PENDING,RUNNING,CONFIGURING,COMPLETING -o %i|%P|%T`` — one line per job (array
  tasks expanded by ``-r``). A pending job submitted to several partitions (``-p a,b``) waits in each
  queue and counts in each; CONFIGURING and COMPLETING jobs still hold their GPUs, so count as running.

Every line must have exactly the expected fields and every name passes `check_name`; anything else
is a `SlurmCommandError` naming the command, line and field, never a silently wrong count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .checks import check_name
from .commands import run_command
from .errors import SlurmCommandError, SlurmError

SINFO_FORMAT = "NodeList:0|,Partition:0|,Gres:0|,GresUsed:0"
SINFO_ARGV = ("sinfo", "--noheader", "--Node", "--all", "--Format", SINFO_FORMAT)
SQUEUE_STATES = {"PENDING": "pending", "RUNNING": "running", "CONFIGURING": "running", "COMPLETING": "running"}  # fmt: skip
SQUEUE_ARGV = ("squeue", "--noheader", "--array", "--all", "--states", ",".join(SQUEUE_STATES),
               "--format", "%i|%P|%T")  # fmt: skip
READ_TIMEOUT = 15.0  # a down slurmctld makes sinfo retry for ~9 s: fail after that, not after 2 min

# One GRES entry: name[:type]:count[(detail)], e.g. gpu:h100:8, gpu:4(S:0-1), gpu:h100:3(IDX:0-2).
_GRES = re.compile(r"(?P<name>[A-Za-z0-9_]+)(?::(?P<type>[^:(),]+))?:(?P<count>\d+)(?:\([^()]*\))?", re.ASCII)
_GRES_SPLIT = re.compile(r",(?![^()]*\))")  # commas between entries, not inside (IDX:0,2-3)
_NO_GRES = "(null)"
_IDX = re.compile(r"\(IDX:([^()]*)\)$", re.ASCII)  # (IDX:0-1,3), (IDX:N/A): the devices in use
_INDEX = re.compile(r"(\d+)(?:-(\d+))?", re.ASCII)
MAX_INDEX = 4096  # no node has more GPUs; a wider range is a broken answer, not a device list
_JOB_ID = re.compile(r"\d+(?:_\d+|\+\d+)?", re.ASCII)  # 42, an array task 42_3, a het component 42+1


@dataclass(frozen=True, slots=True)
class PartitionOccupancy:
    """One SLURM partition now: its nodes and GPUs, GPUs allocated, jobs pending and running."""

    name: str
    nodes: int
    total_gpus: int
    used_gpus: int
    pending: int
    running: int

    @property
    def free_gpus(self) -> int:
        return max(self.total_gpus - self.used_gpus, 0)


def live_occupancy(timeout: float = READ_TIMEOUT) -> dict[str, PartitionOccupancy]:
    """Partition name -> its occupancy, from the slurmctld of $SLURM_CONF (`SlurmError` on failure)."""
    nodes = run_command(SINFO_ARGV, timeout=timeout)
    jobs = run_command(SQUEUE_ARGV, timeout=timeout)
    return occupancy_from(nodes, jobs)


def occupancy_from(sinfo_out: str, squeue_out: str) -> dict[str, PartitionOccupancy]:
    """Combine the two commands' outputs (see the module docstring) into per-partition counts."""
    gpus = parse_sinfo(sinfo_out)
    jobs = parse_squeue(squeue_out)
    out = {}
    for name in sorted(gpus.keys() | jobs.keys()):
        nodes, total, used = gpus.get(name, (0, 0, 0))
        pending, running = jobs.get(name, (0, 0))
        out[name] = PartitionOccupancy(name, nodes, total, used, pending, running)
    return out


def parse_sinfo(text: str) -> dict[str, tuple[int, int, int]]:
    """Partition -> (nodes, GPUs configured, GPUs allocated), from SINFO_ARGV's output."""
    found: dict[str, tuple[int, int, int]] = {}
    seen: set[tuple[str, str]] = set()
    for number, line in _lines(text):
        node, partition, gres, used = _fields(line, 4, "sinfo", number)
        where = f"sinfo: line {number}"
        node = _checked(node, f"{where}: node name")
        partition = _checked(partition.removesuffix("*"), f"{where}: partition name")  # `*`: the default
        if (node, partition) in seen:
            raise SlurmCommandError(f"{where}: node {node} listed twice in partition {partition}")
        seen.add((node, partition))
        total, allocated = gpu_count(gres, f"{where}: Gres"), busy_gpus(used, f"{where}: GresUsed")
        if allocated > total:
            raise SlurmCommandError(f"{where}: GresUsed {used!r} exceeds Gres {gres!r}")
        nodes, gpus, busy = found.get(partition, (0, 0, 0))
        found[partition] = (nodes + 1, gpus + total, busy + allocated)
    return found


def parse_squeue(text: str) -> dict[str, tuple[int, int]]:
    """Partition -> (jobs pending, jobs running), from SQUEUE_ARGV's output."""
    found: dict[str, tuple[int, int]] = {}
    for number, line in _lines(text):
        job, partitions, state = _fields(line, 3, "squeue", number)
        where = f"squeue: line {number}"
        if _JOB_ID.fullmatch(job) is None:
            raise SlurmCommandError(f"{where}: job id: not understood: {job!r:.80}")
        kind = SQUEUE_STATES.get(state)
        if kind is None:
            raise SlurmCommandError(f"{where}: state: not one of {', '.join(SQUEUE_STATES)}: {state!r:.80}")
        names = [_checked(p, f"{where}: partition name") for p in partitions.split(",")]
        for name in dict.fromkeys(names):
            pending, running = found.get(name, (0, 0))
            found[name] = (pending + 1, running) if kind == "pending" else (pending, running + 1)
    return found


def gpu_count(gres: str, what: str) -> int:
    """GPUs in a Gres/GresUsed value (`gpu:h100:8`, `gpu:a100:2(IDX:0-1),gpu:v100:0(IDX:N/A)`, `(null)`)."""
    if gres == _NO_GRES:
        return 0
    total = 0
    for entry in _GRES_SPLIT.split(gres):
        match = _GRES.fullmatch(entry)
        if match is None:
            raise SlurmCommandError(f"{what}: not a GRES list: {gres!r:.120}")
        if match["name"] == "gpu":  # other GRES (mps, shard, nic) are not GPUs
            total += int(match["count"])
    return total


def busy_gpus(used: str, what: str) -> int:
    """GPUs busy in a GresUsed value: held whole (`gpu:...`) or by shards (`shard:...`), each GPU
    once (`gpu:h100:1(IDX:1),shard:h100:1(IDX:0)` -> 2; `gpu:h100:0(IDX:N/A),shard:h100:2(IDX:0-1)` -> 2)."""
    if used == _NO_GRES:
        return 0
    devices: set[int] = set()
    counted = 0
    for entry in _GRES_SPLIT.split(used):
        match = _GRES.fullmatch(entry)
        if match is None:
            raise SlurmCommandError(f"{what}: not a GRES list: {used!r:.120}")
        if match["name"] not in ("gpu", "shard"):
            continue
        indexes = _indexes(entry, what)
        if indexes is None:
            counted += int(match["count"])
        else:
            devices |= indexes
    return len(devices) + counted


def _indexes(entry: str, what: str) -> set[int] | None:
    """The device indexes of one GresUsed entry (`(IDX:0,2-3)`; `(IDX:N/A)`: none); None without IDX."""
    match = _IDX.search(entry)
    if match is None:
        return None
    found: set[int] = set()
    if match[1] == "N/A":
        return found
    for part in match[1].split(","):
        index = _INDEX.fullmatch(part)
        last = int(index[2] or index[1]) if index else -1
        if index is None or not int(index[1]) <= last < MAX_INDEX:
            raise SlurmCommandError(f"{what}: not a device index list: {entry!r:.120}")
        found.update(range(int(index[1]), last + 1))
    return found


def _lines(text: str) -> list[tuple[int, str]]:
    return [(number, line) for number, line in enumerate(text.splitlines(), 1) if line.strip()]


def _fields(line: str, count: int, command: str, number: int) -> list[str]:
    fields = line.strip().split("|")
    if len(fields) != count:
        raise SlurmCommandError(f"{command}: line {number}: want {count} fields split by '|': {line!r:.120}")
    return fields


def _checked(value: str, what: str) -> str:
    try:
        return check_name(value, what)
    except SlurmError as exc:  # the controller's answer, not the user's input: a command error
        raise SlurmCommandError(str(exc)) from None


__all__ = [
    "READ_TIMEOUT",
    "SINFO_ARGV",
    "SQUEUE_ARGV",
    "PartitionOccupancy",
    "busy_gpus",
    "gpu_count",
    "live_occupancy",
    "occupancy_from",
    "parse_sinfo",
    "parse_squeue",
]
