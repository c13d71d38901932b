"""Snapshots as JSON files: saved by `gputwin forecast --save`, replayed by `--snapshot FILE`.

The file is one JSON object, `{"kind": "gputwin-snapshot", "version": 1, ...}`, with the fields
of `gputwin.twin.snapshot` (times in seconds; `slots` as `[node, gpus]` pairs). Reading is strict
and bounded: a regular file of at most `MAX_BYTES`, valid UTF-8 JSON, exactly the known fields
with finite numbers, then `Snapshot.problems()`; the first thing wrong is one `SnapshotError`
line `FILE[:LINE]: FIELD: reason` (plus how many more there are). Writing goes to a temporary
file beside the target and is renamed into place, so a file is never half-written.
"""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.errors import InputError
from gputwin.twin.snapshot import VERSION, OutOfService, PendingJob, RunningJob, SnapPartition, Snapshot

MAX_BYTES = 64 << 20  # a job takes ~170 bytes: room for ~400,000 jobs, more than any real queue
KIND = "gputwin-snapshot"

Name = Annotated[str, Field(min_length=1, max_length=253)]
Text = Annotated[str, Field(max_length=1024)]
Seconds = Annotated[float, Field(ge=0.0, le=1e12)]
Count = Annotated[int, Field(ge=0, le=1 << 20)]
# A MIG profile as NVIDIA names it (`gputwin.core.sharing`), "": none.
Profile = Annotated[str, Field(max_length=16, pattern=r"^([1-7]g\.[1-9][0-9]{0,3}gb(\+me)?)?$")]


class SnapshotError(InputError, ValueError):
    """A snapshot file that cannot be used; `str()` is one `FILE[:LINE]: FIELD: reason` line."""


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False, frozen=True)


class _Switch(_Model):
    name: Name
    parent: Name | None = None


class _Node(_Model):
    name: Name
    gpus: Count
    switch: Name


class _Partition(_Model):
    name: Name
    nodes: list[Name]


class _Out(_Model):
    node: Name
    state: Text = ""


class _Running(_Model):
    job_id: Name
    partition: Name
    submit: Seconds
    start: Seconds
    slots: list[tuple[Name, Count]]
    time_limit: Seconds | None = None
    estimate: Seconds | None = None
    user: Text = ""
    name: Text = ""
    gpu_milli: Annotated[int, Field(ge=1, le=1000)] = 1000
    share_gpu: Annotated[int, Field(ge=-1, le=4096)] = -1
    model: Text = ""
    gpu_profile: Profile = ""


class _Pending(_Model):
    job_id: Name
    partition: Name
    submit: Seconds
    gpus: Count
    num_nodes: Count = 0
    priority: Annotated[int, Field(ge=-(1 << 62), le=1 << 62)] = 0
    time_limit: Seconds | None = None
    estimate: Seconds | None = None
    user: Text = ""
    name: Text = ""
    gpu_milli: Annotated[int, Field(ge=1, le=1000)] = 1000
    model: Text = ""
    gpu_profile: Profile = ""


class _File(_Model):
    kind: Literal["gputwin-snapshot"]
    version: Literal[1]
    taken_at: Seconds
    source: Text
    topology: Name
    switches: list[_Switch]
    nodes: list[_Node]
    partitions: list[_Partition]
    running: list[_Running] = []
    pending: list[_Pending] = []
    out_of_service: list[_Out] = []
    start_latency_s: Seconds = 0.0  # written only when not 0: files without it (older ones too) read as 0


def dump_snapshot(snap: Snapshot) -> dict[str, Any]:
    """The snapshot as the file's JSON object."""
    topo = snap.topology
    return {
        "kind": KIND, "version": VERSION, "taken_at": snap.taken_at, "source": snap.source,
        "topology": topo.name,
        "switches": [{"name": s.name, "parent": s.parent} for s in topo.switches],
        "nodes": [{"name": n.name, "gpus": n.gpus, "switch": n.switch} for n in topo.nodes],
        "partitions": [{"name": p.name, "nodes": list(p.nodes)} for p in snap.partitions],
        "running": [_fields(r, slots=[list(s) for s in r.slots]) for r in snap.running],
        "pending": [_fields(p) for p in snap.pending],
        "out_of_service": [{"node": o.node, "state": o.state} for o in snap.out_of_service],
    } | ({"start_latency_s": snap.start_latency_s} if snap.start_latency_s else {})  # fmt: skip


# Written only when not these defaults (a whole-GPU job of any model), so files without shares,
# profiles or models keep their bytes.
_UNSHARED = {"gpu_milli": 1000, "share_gpu": -1, "model": "", "gpu_profile": ""}


def _fields(job: RunningJob | PendingJob, **extra: Any) -> dict[str, Any]:
    values = ((name, getattr(job, name)) for name in job.__slots__)
    return {name: v for name, v in values if name not in _UNSHARED or v != _UNSHARED[name]} | extra


def save_snapshot(snap: Snapshot, path: Path) -> None:
    """Write `snap` to `path` whole, or not at all."""
    path = Path(path)
    text = json.dumps(dump_snapshot(snap), separators=(",", ":"), allow_nan=False)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent or Path("."))
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            out.write(text + "\n")
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 would hide a bug report from its reader
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def load_snapshot(path: Path) -> Snapshot:
    """The snapshot in `path`; `SnapshotError` naming the first problem otherwise."""
    path = Path(path)
    text = _parse(path, _read(path))
    try:
        # From the text (JSON mode): strict, yet a JSON array may fill a tuple field.
        model = _File.model_validate_json(text)
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0]
        raise _error(path, _field(first["loc"]), first["msg"].removeprefix("Value error, "), len(errors) - 1) from None
    snap = _snapshot(model)
    problems = snap.problems()
    if problems:
        raise _error(path, problems[0][0], problems[0][1], len(problems) - 1)
    return snap


def _read(path: Path) -> bytes:
    # O_NONBLOCK: a FIFO opens at once instead of waiting for a writer; fstat then refuses it.
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_size > MAX_BYTES:
        os.close(fd)
        what = "not a regular file" if not stat.S_ISREG(info.st_mode) else f"larger than {MAX_BYTES >> 20} MiB"
        raise SnapshotError(f"{path}: document: {what}")
    with os.fdopen(fd, "rb") as f:
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise SnapshotError(f"{path}: document: larger than {MAX_BYTES >> 20} MiB")
    return data


def _parse(path: Path, data: bytes) -> str:
    """The text, once the standard parser found it valid JSON (its errors carry a line)."""
    try:
        text = data.decode("utf-8")
        data = json.loads(text, parse_constant=_no_constant)
    except UnicodeDecodeError as exc:
        raise SnapshotError(f"{path}: document: not UTF-8 (byte {exc.start})") from None
    except json.JSONDecodeError as exc:
        raise SnapshotError(f"{path}:{exc.lineno}: document: not JSON ({exc.msg}, column {exc.colno})") from None
    except (ValueError, RecursionError) as exc:
        raise SnapshotError(f"{path}: document: not usable JSON ({str(exc)[:80] or 'nested too deeply'})") from None
    if not isinstance(data, dict) or data.get("kind") != KIND:
        raise SnapshotError(f"{path}: kind: not a gputwin snapshot (want an object with \"kind\": \"{KIND}\")")
    version = data.get("version")
    if type(version) is not int or version != VERSION:  # JSON `true` would compare equal to 1
        raise SnapshotError(f"{path}: version: {str(version)[:20]!r} is not {VERSION}, the version "
                            "this gputwin reads")  # fmt: skip
    return text


def _no_constant(name: str) -> object:
    raise ValueError(f"{name} is not a number a snapshot may hold")


def _field(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "document"


def _error(path: Path, field: str, reason: str, more: int) -> SnapshotError:
    tail = f" (+{more} more problems)" if more else ""
    return SnapshotError(f"{path}: {field}: {' '.join(reason.split())[:200]}{tail}")


def _snapshot(m: _File) -> Snapshot:
    topology = TopologySpec(
        m.topology,
        tuple(SwitchSpec(s.name, s.parent) for s in m.switches),
        tuple(NodeSpec(n.name, n.gpus, n.switch) for n in m.nodes),
    )
    return Snapshot(
        taken_at=m.taken_at, source=m.source, topology=topology,
        partitions=tuple(SnapPartition(p.name, tuple(p.nodes)) for p in m.partitions),
        running=tuple(RunningJob(**{**r.model_dump(), "slots": tuple(tuple(s) for s in r.slots)}) for r in m.running),
        pending=tuple(PendingJob(**p.model_dump()) for p in m.pending),
        out_of_service=tuple(OutOfService(o.node, o.state) for o in m.out_of_service),
        start_latency_s=m.start_latency_s,
    )  # fmt: skip


__all__ = ["KIND", "MAX_BYTES", "SnapshotError", "dump_snapshot", "load_snapshot", "save_snapshot"]
