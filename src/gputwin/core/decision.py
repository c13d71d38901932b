"""What one scheduling cycle decided, for a driver to carry out in its world.

The simulator turns a `Start` into an end event; the Kubernetes backend into pods bound to nodes;
a `Preempt` into a cancelled event or deleted pods. The core has already committed the decision to
its own accounting, so a driver that fails to carry one out must tell the core (`abort_start`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import final

from gputwin.core.frozen import Frozen


@final
class Start:
    """Run `job_id` on `slots` now. A value (compared, hashed and shown by its fields, never changed
    once made), written as a plain class: compiled, one is built by a direct C call (~200
    instructions). A NamedTuple, built through `tuple.__new__`, cost ~1,500 a job started, and a
    frozen dataclass's `__init__` stays interpreted."""

    __slots__ = ("job_id", "partition", "slots", "run_seconds", "overhead", "leaves", "tiers", "generation")

    def __init__(self, job_id: str, partition: str, slots: tuple[tuple[int, int], ...], run_seconds: float,
                 overhead: float, leaves: int, tiers: int, generation: int) -> None:  # fmt: skip
        self.job_id = job_id
        self.partition = partition
        self.slots = slots  # (node index, GPUs)
        self.run_seconds = run_seconds  # how long this run segment lasts, overhead included
        self.overhead = overhead  # communication overhead fraction applied to this segment
        self.leaves = leaves
        self.tiers = tiers
        self.generation = generation

    def fields(self) -> tuple[str, str, tuple[tuple[int, int], ...], float, float, int, int, int]:
        """Its fields, in the constructor's order."""
        return (self.job_id, self.partition, self.slots, self.run_seconds, self.overhead, self.leaves, self.tiers,
                self.generation)  # fmt: skip

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Start) and self.fields() == other.fields()

    def __reduce__(self) -> tuple[object, ...]:
        """Pickled through the constructor: compiled, the default would call it with no arguments."""
        return (Start, self.fields())

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return (f"Start(job_id={self.job_id!r}, partition={self.partition!r}, slots={self.slots!r}, "
                f"run_seconds={self.run_seconds!r}, overhead={self.overhead!r}, leaves={self.leaves!r}, "
                f"tiers={self.tiers!r}, generation={self.generation!r})")  # fmt: skip


@dataclass(frozen=True, slots=True)
class Preempt(Frozen):
    job_id: str
    partition: str
    checkpoint_seconds: float


@dataclass(frozen=True, slots=True)
class Resize(Frozen):
    job_id: str
    requested: int
    gpus: int


@dataclass(frozen=True, slots=True)
class Reject(Frozen):
    job_id: str
    reason: str


@final
class Decision:
    """One cycle's (or submit's) decisions: a value, as `Start` is, and a plain class for the same
    reason (a cycle that starts a job builds one: through `tuple.__new__` as a NamedTuple, ~900
    instructions compiled; a frozen dataclass's interpreted __init__, ~7,500)."""

    __slots__ = ("starts", "preempts", "resizes", "rejects", "wakes")

    def __init__(self, starts: tuple[Start, ...] = (), preempts: tuple[Preempt, ...] = (),
                 resizes: tuple[Resize, ...] = (), rejects: tuple[Reject, ...] = (),
                 wakes: tuple[tuple[float, str], ...] = ()) -> None:  # fmt: skip
        self.starts = starts
        self.preempts = preempts
        self.resizes = resizes
        self.rejects = rejects
        # (time, partition): run that partition's cycle again by then even if nothing else happens
        self.wakes = wakes

    def fields(self) -> tuple[tuple[Start, ...], tuple[Preempt, ...], tuple[Resize, ...], tuple[Reject, ...],
                              tuple[tuple[float, str], ...]]:  # fmt: skip
        """Its fields, in the constructor's order."""
        return self.starts, self.preempts, self.resizes, self.rejects, self.wakes

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Decision) and self.fields() == other.fields()

    def __reduce__(self) -> tuple[object, ...]:
        return (Decision, self.fields())  # (as `Start`'s)

    def __hash__(self) -> int:
        return hash(self.fields())

    def __repr__(self) -> str:
        return (f"Decision(starts={self.starts!r}, preempts={self.preempts!r}, resizes={self.resizes!r}, "
                f"rejects={self.rejects!r}, wakes={self.wakes!r})")  # fmt: skip


class DecisionBuilder:
    """Collects one cycle's decisions; `build()` freezes them.

    A plain class, not a dataclass: every cycle makes one, and a dataclass's generated __init__
    stays interpreted under mypyc (~3,800 instructions a cycle, 4 % of a forecast's replay)."""

    def __init__(self) -> None:
        self.starts: list[Start] = []
        self.preempts: list[Preempt] = []
        self.resizes: list[Resize] = []
        self.rejects: list[Reject] = []
        self.wakes: dict[str, float] = {}

    def wake(self, when: float | None, partition: str) -> None:
        """Ask for `partition` to be reconsidered at `when` (the earliest request wins)."""
        if when is not None and when < self.wakes.get(partition, float("inf")):
            self.wakes[partition] = when

    def build(self) -> Decision:
        """The decisions collected, frozen; the builder is empty again after (a Scheduler keeps one
        for all its cycles: making one per cycle was ~600 instructions a job compiled)."""
        if not (self.preempts or self.resizes or self.rejects or self.wakes):
            if not self.starts:
                return EMPTY
            # Starts alone (most cycles that decide anything, a forecast's nearly all): no empty
            # list made a tuple, cleared or sorted.
            out = Decision(tuple(self.starts))
            self.starts.clear()
            return out
        wakes = tuple(sorted((t, p) for p, t in self.wakes.items()))
        out = Decision(tuple(self.starts), tuple(self.preempts), tuple(self.resizes), tuple(self.rejects), wakes)
        self.starts.clear()
        self.preempts.clear()
        self.resizes.clear()
        self.rejects.clear()
        self.wakes.clear()
        return out


EMPTY = Decision()
