"""The scheduler's working state: one `JobState` per live job, one `PartitionState` per partition.

These are the only mutable objects of the core. They hold no I/O handles and read no clock: every
method that depends on time takes `now`. A driver (the simulator, the operator) owns the state and
feeds it events; `gputwin.core.scheduler` decides and commits.

Work accounting: `work_left` is the remaining run time in seconds as if the job ran with no
communication overhead. A run segment on a placement with overhead fraction f lasts
`work_left * (1 + f)` seconds (`slowdown = 1 + f`), so preempting a job part-way keeps exactly the
work it had not done, plus the checkpoint/restore cost.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from operator import itemgetter
from typing import Any, Collection, Final, Iterator

from gputwin.core.fairness import Fairness
from gputwin.core.fairqueue import FairPolicy, FairQueue
from gputwin.core.history import Mean
from gputwin.core.ledger import Ledger
from gputwin.core.model import JobSpec, PartitionSpec
from gputwin.core.placement import ModelPools, Placer
from gputwin.core.policies import Key, Qssf, QueuePolicy, static
from gputwin.core.quota import PartitionQuota
from gputwin.core.sharing import Shares
from gputwin.core.sizing import Sizer
from gputwin.core.sortedqueue import SortedQueue


_KEY = itemgetter(0)  # a queue entry's key
# `PartitionState.window`: (entries, [(GPUs, least work)], `enqueued` then, exact, the queue's
# `changes` then: -1 if it keeps none).
Window = tuple[list[tuple[Key, int]], list[tuple[int, float]], int, bool, int]


class Phase(str, Enum):
    QUEUED = "Queued"
    RUNNING = "Running"
    DONE = "Succeeded"


# Phases read once (as in gputwin.core.cycle): an Enum member is a slow class attribute in pure
# Python (~200 ns a read), and every job is made queued and tested for running several times.
_QUEUED: Final = Phase.QUEUED
_RUNNING: Final = Phase.RUNNING


class JobState:
    """A job as the scheduler tracks it between submission and completion."""

    __slots__ = (
        "spec", "partition", "gpus", "duration", "work_left", "predicted", "phase", "order",
        "queued_since", "wait", "first_start", "seg_start", "seg_end", "slots", "slowdown",
        "overhead", "leaves", "tiers", "preemptions", "attained", "end", "generation", "key", "tenant", "means",
    )  # fmt: skip

    def __init__(self, spec: JobSpec, partition: str, gpus: int, duration: float, predicted: float) -> None:
        self.spec = spec
        self.partition = partition
        self.gpus = gpus
        self.duration = duration
        self.work_left = duration
        self.predicted = predicted
        self.phase = _QUEUED
        self.order = 0  # arrival/start counter: the final tie-break
        self.queued_since = spec.submit
        self.wait = 0.0
        self.first_start: float | None = None
        self.seg_start = 0.0
        self.seg_end = 0.0
        self.slots: tuple[tuple[int, int], ...] = ()
        self.slowdown = 1.0
        self.overhead = 0.0  # the largest overhead fraction any of its runs paid
        self.leaves = 0
        self.tiers = 0
        self.preemptions = 0
        self.attained = 0.0  # GPU-seconds of service before the current segment
        self.end: float | None = None
        self.generation = 0  # bumped on every start, so a driver can drop stale end events
        self.key: Key = ()
        # Its partition's tenant key (quota pool, else user) under quotas or fairness, set once
        # by the Scheduler when it is queued: the per-job bookkeeping reads it, not the maps.
        self.tenant = ""
        # The built-in estimator's groups of this job (`HistoryEstimator.means_of`), kept from its
        # prediction at submit to what its end teaches them; () with any other estimator.
        self.means: tuple[Mean, ...] = ()

    @property
    def job_id(self) -> str:
        return self.spec.job_id

    def remaining(self, now: float) -> float:
        """Work left at `now` (seconds, no overhead): shrinks only while running."""
        if self.phase is not _RUNNING:
            return self.work_left
        left = self.work_left - (now - self.seg_start) / self.slowdown
        return left if left > 0.0 else 0.0

    def attained_at(self, now: float) -> float:
        if self.phase is not _RUNNING:
            return self.attained
        return self.attained + (now - self.seg_start) * self.gpus

    def waited(self, now: float) -> float:
        return now - self.queued_since


@dataclass(eq=False)
class PartitionState:
    """One partition's queue, running set and GPU ledger, and the plugins that drive them."""

    spec: PartitionSpec
    ledger: Ledger
    policy: QueuePolicy
    placer: Placer
    sizer: Sizer
    # The queue is kept sorted by (key, order): the head is at [0] and the first k jobs in queue
    # order are a slice, so backfill, which looks at the first few hundred every cycle, costs
    # O(k) rather than a pass over the whole queue. Keys of queued jobs never change.
    # Under fairness (`gputwin.core.fairqueue`) a FairQueue: read the same way, sorted by
    # (tenant key, key) then order, tenant keys being read when the queue is.
    order: SortedQueue | FairQueue = field(default_factory=SortedQueue)
    queued: dict[int, JobState] = field(default_factory=dict)  # order -> job
    running: dict[str, JobState] = field(default_factory=dict)
    quota: PartitionQuota | None = None  # tenants' quotas of its GPUs, if it declares any
    fair: Fairness | None = None  # its policy's fairness among tenants, unless none
    models: ModelPools | None = None  # its nodes by GPU model, if they declare models
    # Its shared GPUs (`gputwin.core.sharing`): made when its first GPU share is submitted, so a
    # partition without shares keeps None and every whole-GPU path tests just that.
    shares: Shares | None = None
    # EASY backfill's reservation walks the running jobs in order of expected end, GPUs, then
    # start order (`gputwin.core.reservation`): kept sorted here as jobs start and stop, only by a
    # partition that backfills (strict order with `backfill`); None elsewhere, which pays nothing.
    # An entry is (seg_end, gpus, order): none of them changes while the job runs. A plain list
    # with bisect (`Ends`): a partition runs at most a few thousand jobs, and C-level insort
    # beats a SortedList's Python-level bookkeeping (+7 % instructions on mix1).
    ends: Ends | None = field(init=False, default=None)
    # The backfill window (the queue's entries after the head) its last walk saw, per GPU count
    # the least work left among its jobs (GPU counts ascending), `enqueued` then, and whether those
    # are exact (False: lower bounds, jobs having left the window since): `gputwin.core.reservation`'s
    # `first_candidate`, which skips the walk of a window where none of them can start.
    window: Window | None = field(init=False, default=None)
    enqueued: int = field(init=False, default=0)  # jobs queued so far (the window's test of "only left")
    # How long its placer holds a job back for a better slot (topology-aware), None if it does
    # not: read once, as the placer never changes. `getattr(placer, "max_wait", None)` raised and
    # caught an AttributeError per reservation (~4,000 instructions compiled, 3 % of a forecast).
    max_wait: float | None = field(init=False, default=None)
    # Whether its policy preempts, read once: the policy is a Protocol, and compiled each read of
    # `policy.preemptive` was a generic attribute look-up (~170 instructions a job started).
    preemptive: bool = field(init=False, default=False)

    def __post_init__(self) -> None:
        # Set either way: a compiled (mypyc) instance has no class-level default to fall back on.
        self.ends = Ends() if self.spec.policy.backfill and not self.policy.preemptive else None
        self.window = None
        self.enqueued = 0
        self.max_wait = getattr(self.placer, "max_wait", None)
        self.preemptive = self.policy.preemptive

    @property
    def name(self) -> str:
        return self.spec.name

    def enqueue(self, job: JobState, order: int, now: float) -> None:
        job.phase = _QUEUED
        job.order = order
        job.queued_since = now
        # Narrowed to qssf (the busiest policy): compiled, a direct call, not the Protocol's generic one.
        job.key = policy.key(job, now) if isinstance(policy := self.policy, Qssf) else _key(policy, job, now)
        self.queued[order] = job
        if isinstance(queue := self.order, SortedQueue):
            queue.add((job.key, order))
        else:  # a FairQueue (under fairness): the job itself, found in its tenant's queue by its tenant
            queue.add_job(job)
        self.enqueued += 1

    def enqueue_all(self, jobs: list[JobState], ranks: dict[str, int] | None = None) -> None:
        """`enqueue(job, job.order, job.queued_since)` for each of `jobs` (orders set, ascending),
        the queue sorted once (`Scheduler.submit_all`): a forecast queues 10,000 jobs at its first
        instant, and one insert each into the SortedList was most of that. A FairQueue takes them
        one by one. The queue's order is the same either way (its entries are unique).

        `ranks` (job id -> place) is a hint of the queue's order, such as the one a previous
        replay of the same jobs ended up with (`gputwin.twin`): the entries are put in that order,
        then sorted as entries (key, then order), which takes one pass when the hint holds. A
        wrong or partial hint costs time, never the order. The sort by key was ~5 % of a
        forecast's sample, the same in each."""
        order = self.order
        if not isinstance(order, SortedQueue):
            for job in jobs:
                self.enqueue(job, job.order, job.queued_since)
            return
        entries = []
        policy, queued = self.policy, self.queued
        fixed = static(policy)  # compiled, its `key` a direct call (the Protocol's: ~2,000 instructions)
        for job in jobs:
            job.phase = _QUEUED
            since = job.queued_since
            job.key = key = policy.key(job, since) if fixed is None else fixed.key(job, since)
            queued[job.order] = job
            entries.append((key, job.order))
        if ranks is not None:
            entries = _by_rank(entries, [ranks.get(job.spec.job_id, -1) for job in jobs])
            entries.sort()
        else:
            # Sorted by key alone, which is stable: the orders are ascending already, so equal
            # keys stay in order, as (key, order) sorts them. A key is a flat tuple of floats,
            # cheaper to compare than the entry.
            entries.sort(key=_KEY)
        order.update(entries, ordered=True)
        self.enqueued += len(entries)

    def dequeue(self, job: JobState) -> None:
        del self.queued[job.order]
        if isinstance(queue := self.order, SortedQueue):  # narrowed, as in `enqueue`
            queue.remove((job.key, job.order))
        else:
            queue.remove_job(job)

    def head(self) -> JobState | None:
        """The queued job with the lowest key (ties: lowest order), or None."""
        # Emptiness from the dict (a C-level len), not the queue (a method call, even compiled):
        # the strict loop asks for the head once or twice per job started.
        if not self.queued:
            return None
        queue = self.order
        return self.queued[queue.head_order()] if isinstance(queue, SortedQueue) else queue.head_job()

    def queued_jobs(self, limit: int | None = None, skip: Collection[str] = ()) -> list[JobState]:
        """Queued jobs in queue order (the first `limit` of them); under fairness, those of the
        tenants in `skip` may be left out (elsewhere they are not: a caller skips them itself)."""
        if skip and limit is None and isinstance(self.order, FairQueue):
            return [self.queued[order] for _, order in self.order.without(skip)]
        entries = self.order if limit is None else self.order[:limit]
        return [self.queued[order] for _, order in entries]


def _key(policy: QueuePolicy, job: JobState, now: float) -> Key:
    """`policy.key(job, now)`; under fairness (`FairPolicy`) its inner policy's key, narrowed as
    `PartitionState.enqueue` narrows qssf (the wrapper adds no prefix to a queued job's key)."""
    if isinstance(policy, FairPolicy):
        inner = policy.inner
        return inner.key(job, now) if isinstance(inner, Qssf) else inner.key(job, now)
    return policy.key(job, now)


def _by_rank(entries: list[Any], places: list[int]) -> list[Any]:
    """`entries` put at their `places`: directly when those are each place once (a hint that
    holds), else sorted by place (stable). Read as objects: an entry typed as a (Key, int) is
    unboxed when read and boxed anew (a tuple) when stored."""
    count = len(entries)
    out: list[Any] = [None] * count
    for k in range(count):
        place = places[k]
        if not 0 <= place < count or out[place] is not None:
            return [entries[k] for k in sorted(range(count), key=places.__getitem__)]
        out[place] = entries[k]
    return out


class Ends:
    """A partition's running jobs sorted by (seg_end, gpus, order) (`PartitionState.ends`): the
    jobs themselves (a running job's `seg_end` never changes while it is held here), compared by
    their fields (`_place`; compiled, on unboxed floats): no entry tuple is built. They are kept
    in blocks of at most 2 * BLOCK, each sorted, one after the other: a start lands anywhere
    among ~600 running jobs, and moving half of one list up per start (`list.insert`) was most of
    an `add`. Jobs end mostly in the order of their ends, so the first entry is the one that
    usually goes: it is skipped (`first`), not moved out, and the first block dropped once all of
    it is skipped. The jobs from the first block's `first` on run."""

    __slots__ = ("blocks", "first", "count")

    def __init__(self) -> None:
        self.blocks: list[list[JobState]] = []
        self.first = 0  # jobs of the first block before it have stopped running
        self.count = 0

    def __iter__(self) -> Iterator[tuple[float, int, int]]:
        first, out = self.first, list[tuple[float, int, int]]()
        for block in self.blocks:
            out += [(job.seg_end, job.gpus, job.order) for job in block[first:]]
            first = 0
        return iter(out)

    def __len__(self) -> int:
        return self.count

    def add(self, job: JobState) -> None:
        """`job` started: in at its place."""
        blocks = self.blocks
        self.count += 1
        if not blocks:
            blocks.append([job])
            return
        k = _block_of(blocks, job)
        block = blocks[k]
        block.insert(_place(block, job, self.first if k == 0 else 0, len(block)), job)
        if len(block) > 2 * BLOCK:
            if k == 0 and self.first:  # its stopped jobs go first
                del block[:self.first]
                self.first = 0
            if len(block) > 2 * BLOCK:
                blocks.insert(k + 1, block[BLOCK:])
                del block[BLOCK:]

    def drop(self, job: JobState) -> None:
        """`job` stopped running: out."""
        blocks, first = self.blocks, self.first
        self.count -= 1
        k, i = 0, first  # mostly the first
        if blocks[0][first] is not job:
            k = _block_of(blocks, job)
            i = _place(blocks[k], job, first if k == 0 else 0, len(blocks[k]))
        block = blocks[k]
        if k == 0 and i == first:
            first += 1
        else:
            block.pop(i)
        if k == 0 and first == len(block):
            blocks.pop(0)  # every job of it has stopped
            first = 0
        elif not block:
            blocks.pop(k)
        self.first = first


BLOCK: Final = 64


def _tied_before(one: JobState, other: JobState) -> bool:
    """Whether `one`, ending when `other` does, comes before it in `Ends`: (gpus, order) is less
    (orders are unique)."""
    return one.gpus < other.gpus or (one.gpus == other.gpus and one.order < other.order)


def _block_of(blocks: list[list[JobState]], job: JobState) -> int:
    """The first block whose last job does not precede `job` (the last block if none): where it
    is or goes. Compiled, the ends compared are unboxed floats (ties, rare, by `_tied_before`)."""
    lo, hi, end = 0, len(blocks) - 1, job.seg_end
    while lo < hi:
        mid = (lo + hi) >> 1
        other = blocks[mid][-1]
        if other.seg_end < end or (other.seg_end == end and _tied_before(other, job)):
            lo = mid + 1
        else:
            hi = mid
    return lo


def _place(jobs: list[JobState], job: JobState, lo: int, hi: int) -> int:
    """Where `job` is or goes in `jobs[lo:hi]` (sorted): the first place whose job does not
    precede it (as `_block_of` compares)."""
    end = job.seg_end
    while lo < hi:
        mid = (lo + hi) >> 1
        other = jobs[mid]
        if other.seg_end < end or (other.seg_end == end and _tied_before(other, job)):
            lo = mid + 1
        else:
            hi = mid
    return lo


def in_order(names: list[str], dirty: set[str]) -> list[str]:
    """`sorted(dirty)` from `names` (every partition's, sorted once), filtered: sorting a set of two
    names each cycle was ~1,000 instructions compiled. Sorted when `dirty` names another."""
    found = [name for name in names if name in dirty]
    return found if len(found) == len(dirty) else sorted(dirty)


def release(part: PartitionState, job: JobState, now: float) -> None:
    """`job` stops running: its GPUs back to the ledger, or its GPU share to its shared GPU."""
    if part.shares is not None and job.spec.gpu_milli < 1000:  # gputwin.core.sharing
        part.shares.give_back(job.spec.job_id, now)
    else:
        part.ledger.release(job.slots)


def queued_then(part: PartitionState, skip: set[str], first: int = 32) -> Iterator[JobState]:
    """The queued jobs in queue order, for a caller that starts and preempts jobs meanwhile and
    usually stops within the first few: those `first` as a copy, then the rest as queued then (less,
    under fairness, those of the tenants in `skip` by then: the caller would skip them)."""
    head = part.queued_jobs(first)
    yield from head
    if len(head) == first:
        seen = {job.order for job in head}
        yield from (job for job in part.queued_jobs(skip=skip) if job.order not in seen)
