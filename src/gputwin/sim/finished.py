"""The finished jobs of a replay, as compact columns: what a job leaves behind once it is done.

A `JobState` with its slot tuples, queue key and boxed floats costs ~650 bytes; a finished job
here costs ~80 (one `array` item per field, integers one byte until a value needs more - see
`gputwin.sim.columns` -, its slots flattened) plus a reference to its `JobSpec` or, streamed,
~45 bytes of the spec's fields: a 10M-job replay keeps its results in ~1.2 GB, not ~6.5.
`FinishedLog` is a `Sequence` of `FinishedJob` rows built on demand (what callers read of a `JobState`: `spec`, `partition`,
`first_start`, `end`, `slots`, ...), and its columns feed the metrics without building rows.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable, Iterator, Sequence
from operator import attrgetter
from typing import NamedTuple, cast, overload

from gputwin.core.model import JobSpec
from gputwin.core.state import JobState
from gputwin.sim.columns import RUN, Blob, extend_floats, extended, widened


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


# A spec's strings and integers SpecColumns keeps, in this order (module constants: mypyc compiles
# this module, and a native class body holds only attribute declarations and defaults).
_TEXT = ("task_type", "user", "name", "state", "model", "gpu_profile")
_INTS = ("gpus", "priority", "num_nodes", "seq", "gpu_milli")
_text_of, _ints_of = attrgetter(*_TEXT), attrgetter(*_INTS)


class SpecColumns:
    """`JobSpec`s as columns (~45 bytes a job instead of ~300): for a streamed replay, whose specs
    would otherwise stay resident only because the log refers to them. Job ids are one UTF-8
    buffer; the other strings are codes into one table (a trace repeats its users, names and
    task types), the integers one or two bytes each until a value needs more (`widened`)."""

    def __init__(self) -> None:
        self.job_ids = Blob()
        self.durations = array("d")
        self.strings: list[str] = []
        self._string_index: dict[str, int] = {}
        # Per field, in _TEXT's and _INTS's order: lists, so `append` indexes them (no name look-ups).
        self.codes: list[array[int]] = [array("B") for _ in _TEXT]
        self.ints: list[array[int]] = [array("b") for _ in _INTS]

    def append(self, spec: JobSpec) -> None:
        self.job_ids.append(spec.job_id)
        self.durations.append(spec.duration)
        index, codes = self._string_index, self.codes
        for c, text in enumerate(_text_of(spec)):
            k = index.get(text)
            if k is None:
                k = index[text] = len(self.strings)
                self.strings.append(text)
            try:
                codes[c].append(k)
            except OverflowError:
                codes[c] = widened(codes[c], k)
        ints = self.ints
        for c, value in enumerate(_ints_of(spec)):
            try:
                ints[c].append(value)
            except OverflowError:
                ints[c] = widened(ints[c], value)

    def extend(self, specs: Iterable[JobSpec]) -> None:
        for spec in specs:
            self.append(spec)

    def __len__(self) -> int:
        return len(self.job_ids)

    def __getitem__(self, i: int) -> JobSpec:
        s = self.strings
        task_type, user, name, state, model, profile = (s[codes[i]] for codes in self.codes)
        gpus, priority, num_nodes, seq, milli = (ints[i] for ints in self.ints)
        return JobSpec(self.job_ids[i], self.submit[i], self.durations[i], gpus, task_type, user, name, state,
                       priority, num_nodes, seq, model, milli, profile)  # fmt: skip

    submit: array[float]  # the log's own column, shared (set by FinishedLog)


class FinishedLog(Sequence[FinishedJob]):
    """Finished jobs in completion order, one array per field (`append` takes the final state).
    `keep_specs`: refer to each job's `JobSpec` (free when the caller holds the trace anyway);
    else keep the spec's fields as columns and build it on demand (a streamed trace)."""

    def __init__(self, keep_specs: bool = True) -> None:
        self.partitions: list[str] = []  # index -> name, in order of first completion
        self._index: dict[str, int] = {}
        self.specs: list[JobSpec] | SpecColumns = [] if keep_specs else SpecColumns()
        # Integer columns start narrow (one byte, two for node indices) and widen when a value needs it.
        self.part: array[int] = array("B")
        self.gpus: array[int] = array("B")
        self.preemptions: array[int] = array("B")
        self.leaves: array[int] = array("B")
        self.tiers: array[int] = array("B")
        # Slots flattened: job i's are nodes/slot_gpus[slot_end[i-1]:slot_end[i]].
        self.nodes: array[int] = array("H")
        self.slot_gpus: array[int] = array("B")
        self.slot_end: array[int] = array("I")
        self.submit, self.duration, self.predicted = array("d"), array("d"), array("d")
        self.first_start, self.end, self.wait = array("d"), array("d"), array("d")
        self.overhead, self.attained = array("d"), array("d")
        if isinstance(self.specs, SpecColumns):
            self.specs.submit = self.submit

    def append(self, job: JobState) -> None:
        self.extend([job])

    def extend(self, jobs: list[JobState]) -> None:
        """Append the final states of `jobs`, a column at a time: one pass reads a field of every
        job and the column is packed in one call. (mypyc compiles this module: a pass reads the
        compiled JobState's field directly; interpreted, each read is a specialized slot load.)"""
        if not jobs:
            return
        # Each job's partition code, a partition seen first given the next one (one look-up a job:
        # no pass to find the batch's new names first).
        index, names = self._index, self.partitions
        part: list[int] = []
        for j in jobs:
            k = index.get(j.partition)
            if k is None:
                k = index[j.partition] = len(names)
                names.append(j.partition)
            part.append(k)
        specs = [j.spec for j in jobs]
        self.specs.extend(specs)
        self.part = extended(self.part, part)
        self.gpus = extended(self.gpus, [j.gpus for j in jobs])
        self.preemptions = extended(self.preemptions, [j.preemptions for j in jobs])
        self.leaves = extended(self.leaves, [j.leaves for j in jobs])
        self.tiers = extended(self.tiers, [j.tiers for j in jobs])
        extend_floats(self.submit, [spec.submit for spec in specs])
        extend_floats(self.duration, [j.duration for j in jobs])
        extend_floats(self.predicted, [j.predicted for j in jobs])
        extend_floats(self.wait, [j.wait for j in jobs])
        extend_floats(self.overhead, [j.overhead for j in jobs])
        extend_floats(self.attained, [j.attained for j in jobs])
        # None for a job that never ran: kept as 0.0.
        extend_floats(self.first_start, [0.0 if (t := j.first_start) is None else t for j in jobs])
        extend_floats(self.end, [0.0 if (t := j.end) is None else t for j in jobs])
        self._extend_slots(jobs)

    def _extend_slots(self, jobs: list[JobState]) -> None:
        # A loop, not chain/accumulate/zip(*pairs) (an iterator per tuple): fewer instructions
        # interpreted, and compiled it indexes the native tuples directly.
        # The slots' items are moved as the objects they are (`tuple[object, object]`): read as ints,
        # compiled, each would be unboxed and boxed again (a node index above 256 is a new int).
        nodes: list[object] = []
        gpus: list[object] = []
        ends: list[int] = []
        end = len(self.nodes)
        for job in jobs:
            slots: tuple[tuple[object, object], ...] = job.slots
            for node, n in slots:
                nodes.append(node)
                gpus.append(n)
            end += len(slots)
            ends.append(end)
        self.nodes = extended(self.nodes, cast("list[int]", nodes))
        self.slot_gpus = extended(self.slot_gpus, cast("list[int]", gpus))
        self.slot_end = extended(self.slot_end, ends)

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

    def by_partition(self, listed_up_to: int = RUN) -> dict[str, Sequence[int]]:
        """Each partition's jobs' positions (in order of first completion; a range when every job
        ran in one): lists for a log of up to `listed_up_to` jobs, else arrays. One pass over the
        codes for all partitions: a pass per partition costs partitions x jobs (mix1 has 11)."""
        if len(self.partitions) <= 1:
            return {name: range(len(self)) for name in self.partitions}
        if len(self) <= listed_up_to:  # lists: an array's `append` parses each item as call arguments
            listed: list[list[int]] = [[] for _ in self.partitions]
            for i, k in enumerate(self.part):
                listed[k].append(i)
            return dict(zip(self.partitions, listed))
        # A long log: 4 bytes a position, not a list's ~36.
        found: list[array[int]] = [array("I" if len(self) < 2**32 else "q") for _ in self.partitions]
        for i, k in enumerate(self.part):
            found[k].append(i)
        return dict(zip(self.partitions, found))


__all__ = ["FinishedJob", "FinishedLog", "SpecColumns"]
