"""The finished jobs of a replay, as compact columns: what a job leaves behind once it is done.

A `JobState` with its slot tuples, queue key and boxed floats costs ~650 bytes; a finished job
here costs ~100 (one `array` item per field, its slots flattened, a reference to its `JobSpec`),
so a 10M-job replay keeps its results in ~1 GB, not ~6.5. `FinishedLog` is a `Sequence` of
`FinishedJob` rows built on demand (what callers read of a `JobState`: `spec`, `partition`,
`first_start`, `end`, `slots`, ...), and its columns feed the metrics without building rows.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from typing import NamedTuple, overload

from gputwin.core.model import JobSpec
from gputwin.core.state import JobState


class FinishedJob(NamedTuple):
    """A finished job as `outcome.finished` gives it: the fields of its final `JobState`."""

    spec: JobSpec
    partition: str
    gpus: int
    duration: float
    predicted: float
    first_start: float
    end: float
    wait: float
    preemptions: int
    slots: tuple[tuple[int, int], ...]
    leaves: int
    tiers: int
    overhead: float
    attained: float

    @property
    def job_id(self) -> str:
        return self.spec.job_id


class SpecColumns:
    """`JobSpec`s as columns (~130 bytes a job instead of ~300): for a streamed replay, whose specs
    would otherwise stay resident only because the log refers to them. Strings other than the
    job id are kept once each (a trace repeats its users, names and task types)."""

    _TEXT = ("task_type", "user", "name", "state", "model", "gpu_profile")
    _INTS = ("gpus", "priority", "num_nodes", "seq", "gpu_milli")

    def __init__(self) -> None:
        self.job_ids: list[str] = []
        self.durations = array("d")
        self.strings: list[str] = []
        self._string_index: dict[str, int] = {}
        self.text = {name: array("i") for name in self._TEXT}
        self.ints = {name: array("q") for name in self._INTS}

    def append(self, spec: JobSpec) -> None:
        self.job_ids.append(spec.job_id)
        self.durations.append(spec.duration)
        index = self._string_index
        for name, column in self.text.items():
            value = getattr(spec, name)
            k = index.get(value)
            if k is None:
                k = index[value] = len(self.strings)
                self.strings.append(value)
            column.append(k)
        for name, ints in self.ints.items():
            ints.append(getattr(spec, name))

    def __len__(self) -> int:
        return len(self.job_ids)

    def __getitem__(self, i: int) -> JobSpec:
        s, t, n = self.strings, self.text, self.ints
        return JobSpec(
            self.job_ids[i], self.submit[i], self.durations[i], n["gpus"][i], s[t["task_type"][i]],
            s[t["user"][i]], s[t["name"][i]], s[t["state"][i]], n["priority"][i], n["num_nodes"][i],
            n["seq"][i], s[t["model"][i]], n["gpu_milli"][i], s[t["gpu_profile"][i]],
        )  # fmt: skip

    submit: array[float]  # the log's own column, shared (set by FinishedLog)


class FinishedLog(Sequence[FinishedJob]):
    """Finished jobs in completion order, one array per field (`append` takes the final state).
    `keep_specs`: refer to each job's `JobSpec` (free when the caller holds the trace anyway);
    else keep the spec's fields as columns and build it on demand (a streamed trace)."""

    def __init__(self, keep_specs: bool = True) -> None:
        self.partitions: list[str] = []  # index -> name, in order of first completion
        self._index: dict[str, int] = {}
        self.specs: list[JobSpec] | SpecColumns = [] if keep_specs else SpecColumns()
        self.part, self.gpus, self.preemptions = array("i"), array("q"), array("q")
        self.leaves, self.tiers = array("i"), array("i")
        self.submit, self.duration, self.predicted = array("d"), array("d"), array("d")
        self.first_start, self.end, self.wait = array("d"), array("d"), array("d")
        self.overhead, self.attained = array("d"), array("d")
        # Slots flattened: job i's are nodes/slot_gpus[slot_end[i-1]:slot_end[i]].
        self.nodes, self.slot_gpus, self.slot_end = array("i"), array("q"), array("q")
        if isinstance(self.specs, SpecColumns):
            self.specs.submit = self.submit

    def append(self, job: JobState) -> None:
        part = self._index.get(job.partition)
        if part is None:
            part = self._index[job.partition] = len(self.partitions)
            self.partitions.append(job.partition)
        spec = job.spec
        self.specs.append(spec)
        self.part.append(part)
        self.gpus.append(job.gpus)
        self.preemptions.append(job.preemptions)
        self.leaves.append(job.leaves)
        self.tiers.append(job.tiers)
        self.submit.append(spec.submit)
        self.duration.append(job.duration)
        self.predicted.append(job.predicted)
        self.first_start.append(0.0 if job.first_start is None else job.first_start)
        self.end.append(0.0 if job.end is None else job.end)
        self.wait.append(job.wait)
        self.overhead.append(job.overhead)
        self.attained.append(job.attained)
        for node, gpus in job.slots:
            self.nodes.append(node)
            self.slot_gpus.append(gpus)
        self.slot_end.append(len(self.nodes))

    def __len__(self) -> int:
        return len(self.specs)

    @overload
    def __getitem__(self, i: int) -> FinishedJob: ...
    @overload
    def __getitem__(self, i: slice) -> list[FinishedJob]: ...
    def __getitem__(self, i: int | slice) -> FinishedJob | list[FinishedJob]:
        if isinstance(i, slice):
            return [self._row(k) for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("finished job index out of range")
        return self._row(i)

    def __iter__(self) -> Iterator[FinishedJob]:
        return map(self._row, range(len(self)))

    def _row(self, i: int) -> FinishedJob:
        lo, hi = self.slot_end[i - 1] if i else 0, self.slot_end[i]
        slots = tuple(zip(self.nodes[lo:hi], self.slot_gpus[lo:hi]))
        return FinishedJob(
            self.specs[i], self.partitions[self.part[i]], self.gpus[i], self.duration[i], self.predicted[i],
            self.first_start[i], self.end[i], self.wait[i], self.preemptions[i], slots, self.leaves[i],
            self.tiers[i], self.overhead[i], self.attained[i],
        )  # fmt: skip

    def indices(self, partition: str) -> range | list[int]:
        """The positions of `partition`'s jobs (all of them if every job ran there)."""
        k = self._index.get(partition)
        if k is None:
            return []
        if len(self.partitions) == 1:
            return range(len(self))
        part = self.part
        return [i for i in range(len(part)) if part[i] == k]


__all__ = ["FinishedJob", "FinishedLog", "SpecColumns"]
