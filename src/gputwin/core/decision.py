"""What one scheduling cycle decided, for a driver to carry out in its world.

The simulator turns a `Start` into an end event; the Kubernetes backend into pods bound to nodes;
a `Preempt` into a cancelled event or deleted pods. The core has already committed the decision to
its own accounting, so a driver that fails to carry one out must tell the core (`abort_start`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, NamedTuple

# `tuple.__new__`, called with a NamedTuple class: what the class's own `__new__` does, without it.
# That `__new__` is Python source that collections generates (interpreted even in the compiled
# core: ~3,800 instructions a Start and a Decision), so the hot paths build both through this.
_new: Final = tuple.__new__  # Final: compiled, a C static, not a look-up in the module's dict


class Start(NamedTuple):
    """Run `job_id` on `slots` now. A NamedTuple, not a frozen dataclass: one is made per job
    start, and a tuple is built several times faster - it is just as immutable."""

    job_id: str
    partition: str
    slots: tuple[tuple[int, int], ...]  # (node index, GPUs)
    run_seconds: float  # how long this run segment lasts, overhead included
    overhead: float  # communication overhead fraction applied to this segment
    leaves: int
    tiers: int
    generation: int


_START: Final = Start  # (the class is a NamedTuple, not a native class: else a module-dict look-up)


def new_start(job_id: str, partition: str, slots: tuple[tuple[int, int], ...], run_seconds: float, overhead: float,
              leaves: int, tiers: int, generation: int) -> Start:  # fmt: skip
    """`Start(...)`, built by `tuple.__new__` (see `_new`): a scheduling cycle makes one per job started."""
    return _new(_START, (job_id, partition, slots, run_seconds, overhead, leaves, tiers, generation))


@dataclass(frozen=True, slots=True)
class Preempt:
    job_id: str
    partition: str
    checkpoint_seconds: float


@dataclass(frozen=True, slots=True)
class Resize:
    job_id: str
    requested: int
    gpus: int


@dataclass(frozen=True, slots=True)
class Reject:
    job_id: str
    reason: str


class Decision(NamedTuple):
    """One cycle's (or submit's) decisions. A NamedTuple, as `Start` is: a cycle that starts a job
    builds one, and a frozen dataclass's interpreted __init__ cost ~7,500 instructions compiled."""

    starts: tuple[Start, ...] = ()
    preempts: tuple[Preempt, ...] = ()
    resizes: tuple[Resize, ...] = ()
    rejects: tuple[Reject, ...] = ()
    # (time, partition): run that partition's cycle again by then even if nothing else happens
    wakes: tuple[tuple[float, str], ...] = ()


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
        if not (self.preempts or self.resizes or self.rejects or self.wakes):  # most cycles: starts at most
            if not self.starts:
                return EMPTY
            out = _new(_DECISION, (tuple(self.starts), (), (), (), ()))
            self.starts.clear()
            return out
        wakes = tuple(sorted((t, p) for p, t in self.wakes.items()))
        out = _new(_DECISION, (tuple(self.starts), tuple(self.preempts), tuple(self.resizes), tuple(self.rejects), wakes))
        self.starts.clear()
        self.preempts.clear()
        self.resizes.clear()
        self.rejects.clear()
        self.wakes.clear()
        return out


_DECISION: Final = Decision
EMPTY = Decision()
