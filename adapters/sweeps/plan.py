"""A sweep on disk: the plan every executor runs from, one task per candidate, one result file each.

A sweep folder is all a task needs, so it can run on another machine that mounts the folder
(a SLURM node, a Kubernetes pod):

    plan.json           the inputs' names and settings, and the candidates (task i runs candidates[i])
    inputs/trace/       a copy of the trace file
    inputs/cluster/     a copy of the cluster file or folder
    results/<i>.json    what task i found (`CandidateResult` as JSON), written atomically
    logs/               whatever the executor's tasks print

`run_task` is what each task runs, whatever the executor (`gputwin sweep-task FOLDER INDEX`);
`gather` reads the results back the same way for every executor, and names the tasks that left
none. A result already present is not run again (`pending`), so an interrupted sweep resumes.

A sweep folder never resolves outside itself: plan.json's trace and cluster are plain names (no
`/`, `..` or NUL), and each input, resolved (symlinks followed), must lie under its inputs/
folder, as must every file of a cluster folder; anything else is a SweepError naming the field.

The folder is resume state, updated in place one whole file at a time (`write_json_atomic`). A
result file that is there but cannot be read (`BadResults`: not JSON, or not a result, say after
a disk filled up or a copy was cut short) is a cache entry gone bad, not a user's file: `run_sweep`
deletes it and runs that candidate again, with a warning naming the file. A plan.json that cannot
be read is a sweep that starts over (`write_plan`); for `sweep-task` it is one error line.
"""

from __future__ import annotations

import dataclasses
import filecmp
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputwin.adapters.traces import read_trace
from gputwin.api.loader import load_cluster
from gputwin.core.model import Candidate, ClusterSpec, JobSpec
from gputwin.errors import InputError
from gputwin.sim.atomic import FILE_MODE
from gputwin.sim.compare import CandidateResult, run_candidate
from gputwin.sim.evaluation import Summary

PLAN, INPUTS, RESULTS, LOGS = "plan.json", "inputs", "results", "logs"
PLAN_VERSION = 1


class SweepError(InputError):
    """A sweep that cannot run or whose results are incomplete; one line a user can act on."""


class BadResults(SweepError):
    """Result files that are there but cannot be read; `indices` are their tasks."""

    def __init__(self, message: str, indices: Sequence[int]) -> None:
        super().__init__(message)
        self.indices = tuple(indices)


@dataclass(frozen=True, slots=True)
class SweepPlan:
    """What every task of one sweep runs: the same inputs, its own candidate."""

    trace: str  # a name under inputs/trace/
    fmt: str
    cluster: str  # a name under inputs/cluster/ (a file or a folder)
    gpus_per_node: int
    skip_invalid: bool
    seed: int
    candidates: tuple[Candidate, ...]
    procs_per_gpu: int = 1  # last, with a default: plans written before it read as 1

    def to_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["version"] = PLAN_VERSION
        return data

    @staticmethod
    def from_json(data: dict[str, Any]) -> SweepPlan:
        if not isinstance(data, dict):
            raise SweepError(f"{PLAN}: not a sweep plan (a JSON object)")
        if data.get("version") != PLAN_VERSION:
            raise SweepError(f"{PLAN}: version {data.get('version')!r}, this gputwin reads {PLAN_VERSION}")
        fields = {k: v for k, v in data.items() if k != "version"}
        fields.setdefault("procs_per_gpu", 1)  # plans written before SWF support have none
        _check_fields(fields, PLAN_FIELDS, "")
        for name in ("trace", "cluster"):
            _plain_name(fields[name], name)
        for i, c in enumerate(fields["candidates"]):
            _check_fields(c, CANDIDATE_FIELDS, f"candidates[{i}].")
        fields["candidates"] = tuple(Candidate(**c) for c in fields["candidates"])
        return SweepPlan(**fields)


def _plain_name(name: object, field: str) -> None:
    """A name under inputs/<field>/: one path component, never `.`, `..`, a separator or NUL."""
    plain = isinstance(name, str) and 0 < len(name) <= 255 and name not in (".", "..")
    if not plain or any(c in str(name) for c in ("/", "\\", "\0")):
        raise SweepError(f"{PLAN}: {field}: {str(name)[:80]!r} is not a file name (no /, .. or NUL)")


def _input(folder: Path, field: str, name: str) -> Path:
    """inputs/<field>/<name>, refused when it (or, for a folder, a file in it) resolves outside."""
    root = (folder / INPUTS / field).resolve()
    path = root / name
    inside = [path, *(path.rglob("*") if path.is_dir() and not path.is_symlink() else ())]
    for entry in inside:
        if not entry.resolve().is_relative_to(root):
            shown = entry.relative_to(folder)
            raise SweepError(f"{folder / PLAN}: {field}: {shown} resolves outside {folder / INPUTS / field}")
    return path


# A plan's fields and their JSON types (bool is no int here), as `SweepPlan.to_json` writes them.
PLAN_FIELDS: dict[str, tuple[type, ...]] = {
    "trace": (str,), "fmt": (str,), "cluster": (str,), "gpus_per_node": (int,), "skip_invalid": (bool,),
    "seed": (int,), "candidates": (list,), "procs_per_gpu": (int,),
}  # fmt: skip
CANDIDATE_FIELDS: dict[str, tuple[type, ...]] = {
    "queue": (str,), "placement": (str,), "sizing": (str, type(None)), "backfill": (bool, type(None)),
}


def _check_fields(data: object, fields: dict[str, tuple[type, ...]], where: str) -> None:
    """SweepError unless `data` is an object with exactly `fields`, each of its type."""
    if not isinstance(data, dict):
        raise SweepError(f"{PLAN}: {where.rstrip('.')}: want an object")
    missing, unknown = [k for k in fields if k not in data], sorted(str(k) for k in data if k not in fields)
    if missing:
        raise SweepError(f"{PLAN}: {where}{missing[0]}: missing")
    if unknown:
        known = ", ".join(fields)
        raise SweepError(f"{PLAN}: {where}{unknown[0]}: not a field of a sweep plan; known: {known}")
    for key, types in fields.items():
        value = data[key]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            want = " or ".join("null" if t is type(None) else t.__name__ for t in types)
            raise SweepError(f"{PLAN}: {where}{key}: want {want}")


def write_plan(folder: Path, trace: Path, fmt: str, cluster: Path, *, gpus_per_node: int = 8,
               skip_invalid: bool = False, seed: int = 0, candidates: tuple[Candidate, ...],
               procs_per_gpu: int = 1) -> SweepPlan:  # fmt: skip
    """Copy the inputs into `folder` and write its plan.

    The same plan already there is a sweep to resume: its results are kept. Another plan's results
    mean nothing for this one: they are removed (only the files a sweep writes, nothing else).
    """
    plan = SweepPlan(
        trace.name, fmt, cluster.name, gpus_per_node, skip_invalid, seed, tuple(candidates), procs_per_gpu
    )
    if os.path.lexists(folder) and not folder.is_dir():
        raise SweepError(f"{folder}: not a folder; a sweep folder goes there")
    if (folder / PLAN).exists():
        try:
            if read_plan(folder) == plan:
                return plan  # resuming: the inputs were copied when it was first written
        except SweepError:
            pass  # unreadable or from another version: start over
        (folder / PLAN).unlink()  # first: cut short from here on, the next run starts over too
        for old in (folder / RESULTS).glob("*.json"):
            old.unlink()
        shutil.rmtree(folder / INPUTS, ignore_errors=True)
    for sub in (INPUTS + "/trace", INPUTS + "/cluster", RESULTS, LOGS):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    shutil.copy2(trace, folder / INPUTS / "trace" / trace.name)
    if cluster.is_dir():
        shutil.copytree(cluster, folder / INPUTS / "cluster" / cluster.name)
    else:
        shutil.copy2(cluster, folder / INPUTS / "cluster" / cluster.name)
    write_json_atomic(folder / PLAN, plan.to_json())
    return plan


def read_plan(folder: Path) -> SweepPlan:
    try:
        data = json.loads((folder / PLAN).read_text())
    except OSError as exc:
        raise SweepError(f"{folder / PLAN}: {(exc.strerror or str(exc)).lower()}") from None
    except ValueError as exc:  # JSONDecodeError, a bad UTF-8 byte: the content is not quoted
        where = f" (line {exc.lineno})" if isinstance(exc, json.JSONDecodeError) else ""
        raise SweepError(
            f"{folder / PLAN}: not valid JSON{where}; delete the sweep folder to start over"
        ) from None
    except RecursionError:
        raise SweepError(f"{folder / PLAN}: nested too deeply to be a sweep plan") from None
    try:
        return SweepPlan.from_json(data)
    except SweepError as exc:
        raise SweepError(f"{folder}/{exc}") from None


def load_inputs(folder: Path, plan: SweepPlan) -> tuple[ClusterSpec, tuple[JobSpec, ...]]:
    cluster = load_cluster(_input(folder, "cluster", plan.cluster), gpus_per_node=plan.gpus_per_node)
    trace = read_trace(
        _input(folder, "trace", plan.trace),
        plan.fmt,
        skip_invalid=plan.skip_invalid,
        procs_per_gpu=plan.procs_per_gpu,
    )
    return cluster, tuple(trace.jobs)


def same_inputs(folder: Path, plan: SweepPlan, trace: Path, cluster: Path) -> bool:
    """Whether the sweep's copies of its inputs are these files, byte for byte. A resumed sweep
    keeps the copies made when it started, and the originals may have changed since: only then
    may inputs loaded from the originals stand in for the copies."""
    ours_trace, ours_cluster = _input(folder, "trace", plan.trace), _input(folder, "cluster", plan.cluster)
    if not (ours_trace.is_file() and filecmp.cmp(trace, ours_trace, shallow=False)):
        return False
    if cluster.is_file():
        return ours_cluster.is_file() and filecmp.cmp(cluster, ours_cluster, shallow=False)
    theirs = sorted(p.relative_to(cluster) for p in cluster.rglob("*") if p.is_file())
    ours = sorted(p.relative_to(ours_cluster) for p in ours_cluster.rglob("*") if p.is_file())
    match, _, _ = filecmp.cmpfiles(cluster, ours_cluster, [str(p) for p in theirs], shallow=False)
    return ours == theirs and len(match) == len(theirs)


def run_task(folder: Path, index: int, inputs: tuple[ClusterSpec, tuple[JobSpec, ...]] | None = None) -> Path:
    """Run candidate `index` of the sweep in `folder` and write its result file; returns that file."""
    plan = read_plan(folder)
    if not 0 <= index < len(plan.candidates):
        raise SweepError(f"task index {index} is outside 0..{len(plan.candidates) - 1}")
    cluster, jobs = inputs if inputs is not None else load_inputs(folder, plan)
    result = run_candidate(cluster, jobs, plan.candidates[index], plan.seed)
    path = result_path(folder, index)
    write_json_atomic(path, result_to_json(result))
    return path


def follow(folder: Path, indices: Sequence[int], done: Callable[[], bool], *, timeout: float,
           progress: Callable[[int], None] | None, clock: Callable[[], float],
           sleep: Callable[[float], None], poll: float = 1.0) -> bool:  # fmt: skip
    """Poll a remote executor until `done()`, reporting each task once as its result file appears
    (in whatever order tasks end); False when `timeout` seconds pass first."""
    deadline, reported = clock() + timeout, set[int]()
    while True:
        finished = done()  # before looking at the files: a result written just before counts
        for index in indices:
            if index not in reported and result_path(folder, index).exists():
                reported.add(index)
                if progress is not None:
                    progress(index)
        if finished:
            return True
        if clock() > deadline:
            return False
        sleep(poll)


def result_path(folder: Path, index: int) -> Path:
    return folder / RESULTS / f"{index}.json"


def pending(folder: Path, plan: SweepPlan) -> list[int]:
    """The tasks with no result yet, in index order."""
    return [i for i in range(len(plan.candidates)) if not result_path(folder, i).exists()]


def gather(folder: Path, plan: SweepPlan) -> list[CandidateResult]:
    """Every task's result, in index order; a missing one is an error naming the tasks and the logs."""
    missing = pending(folder, plan)
    if missing:
        shown = ", ".join(str(i) for i in missing[:10]) + (" …" if len(missing) > 10 else "")
        raise SweepError(f"{len(missing)} task(s) left no result ({shown}); see {folder / LOGS}")
    out, bad = [], []
    for index, candidate in enumerate(plan.candidates):
        try:
            result = read_result(folder, index)
        except BadResults as exc:
            bad.append((index, str(exc)))
            continue
        if result.candidate != candidate:
            raise SweepError(f"{result_path(folder, index)}: holds {result.candidate.name}, not {candidate.name}")
        out.append(result)
    if bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise BadResults(bad[0][1] + more, [i for i, _ in bad])
    return out


def read_result(folder: Path, index: int) -> CandidateResult:
    """Task `index`'s result; BadResults (naming the file, not quoting it) if it cannot be read."""
    path = result_path(folder, index)
    try:
        data = json.loads(path.read_bytes())
    except (ValueError, RecursionError):  # JSONDecodeError, bad UTF-8
        raise BadResults(f"{path}: not valid JSON", [index]) from None
    try:
        return result_from_json(data)
    except ValueError as exc:
        raise BadResults(f"{path}: not a candidate result ({exc})", [index]) from None
    except (KeyError, TypeError) as exc:
        raise BadResults(f"{path}: not a candidate result ({type(exc).__name__})", [index]) from None


def result_to_json(result: CandidateResult) -> dict[str, Any]:
    return {"candidate": dataclasses.asdict(result.candidate), "summary": result.summary.to_json(),
            "jcts": result.jcts, "spans": result.spans}  # fmt: skip


def result_from_json(data: dict[str, Any]) -> CandidateResult:
    """The result; ValueError (or KeyError, TypeError) if `data` is not one as `result_to_json` writes it."""
    summary = data["summary"]
    if not isinstance(summary, dict):
        raise ValueError("summary: not a run summary")
    partitions = summary["partitions"]
    if not isinstance(partitions, dict) or not all(isinstance(m, dict) for m in partitions.values()):
        raise ValueError("summary.partitions: not per-partition metrics")
    for key in ("jcts", "spans"):
        if not isinstance(data[key], list) or not all(isinstance(v, (int, float)) for v in data[key]):
            raise ValueError(f"{key}: not a list of numbers")
    return CandidateResult(Candidate(**data["candidate"]), Summary.from_json(summary), list(data["jcts"]),
                           list(data["spans"]))  # fmt: skip


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """A reader (gather, another task) sees the whole file or none of it."""
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    except OSError as exc:  # named as the file it was to be, not the temporary one
        raise OSError(exc.errno, exc.strerror, str(path)) from None
    try:
        os.fchmod(fd, FILE_MODE)  # mkstemp's 0600 would hide results from whoever reads the report
        with os.fdopen(fd, "w") as handle:
            json.dump(data, handle, sort_keys=True)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


__all__ = [
    "BadResults",
    "SweepError",
    "SweepPlan",
    "follow",
    "gather",
    "load_inputs",
    "pending",
    "read_plan",
    "read_result",
    "result_path",
    "run_task",
    "same_inputs",
    "write_plan",
]
