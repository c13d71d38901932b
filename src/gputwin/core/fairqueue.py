"""A partition's queue ordered by fairness among tenants (`gputwin.core.fairness` keys them).

`FairQueue` keeps one sorted queue per tenant and merges them by tenant key when read: the cycle's
loops read it as the one sorted queue they always read, and the strict quota loop walks it tenant
block by tenant block (`tenant_walk`). `FairPolicy` prefixes a running job's key the same way for
the preemptive loop; `fair_among` sets a partition up with both. Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, bisect_right, insort
from itertools import islice
from typing import TYPE_CHECKING, Callable, Collection, Iterable, Iterator, Mapping, Sequence, overload

from gputwin.core.fairness import Fairness

if TYPE_CHECKING:
    from gputwin.core.policies import Key, QueuePolicy, RunningEntry
    from gputwin.core.state import JobState, PartitionState

Entry = tuple["Key", int]


class FairQueue:
    """A partition's queued (policy key, order) entries, one sorted list per tenant, read as one
    queue sorted by (tenant key, *policy key) then order: the SortedList interface `PartitionState`
    and the cycle use (add, remove, [0], [:k], iteration, len). A tenant's entries are a plain list
    kept sorted (bisect): C-level insort and del beat a SortedList's interpreted bookkeeping where a
    tenant queues dozens (49 at most in the 300k synthetic); at 100,000 an insert's memmove is ~20 us."""

    def __init__(self, fairness: Fairness, jobs: dict[int, JobState]) -> None:
        self.fairness = fairness
        self._jobs = jobs  # order -> queued job: an entry's tenant is its job's
        self._queues: dict[str, list[Entry]] = {}
        self._tenant: dict[int, str] = {}
        # The tenants with a queued job, (key, tenant) sorted: the cycle reads the queue several
        # times an instant, and the ranking moves only with the keys (`version`) or that set.
        self._ranked: list[tuple[float, str]] | None = None
        self._ranked_at = -1

    def add(self, entry: Entry) -> None:
        job = self._jobs[entry[1]]
        # The tenant the Scheduler stored on the job, else looked up (a job queued by hand).
        tenant = getattr(job, "tenant", "") or self.fairness.tenant_of(job)
        self._tenant[entry[1]] = tenant
        queue = self._queues.get(tenant)
        if queue is None:  # not setdefault: that would build a list per entry added
            self._queues[tenant] = [entry]
            self._ranked = None
        elif entry > queue[-1]:
            queue.append(entry)  # a first-come queue (fifo) adds behind its tenant's last
        else:
            insort(queue, entry)

    def remove(self, entry: Entry) -> None:
        order = entry[1]
        tenant = self._tenant[order]  # looked up, then deleted: compiled, dict.pop is a method call
        del self._tenant[order]
        queue = self._queues[tenant]
        i = 0 if queue[0] == entry else bisect_left(queue, entry)  # usually its tenant's head starts
        if i == len(queue) or queue[i] != entry:
            raise ValueError(f"{entry!r} is not queued")  # as SortedList.remove
        queue.pop(i)  # not `del queue[i]`: compiled, a list's pop is a direct call
        if not queue:
            del self._queues[tenant]
            self._ranked = None

    def __len__(self) -> int:
        return len(self._tenant)

    def ranked(self) -> list[tuple[float, str]]:
        """The tenants with a queued job as (key, tenant), sorted: lower keys go first."""
        if self._ranked is None or self._ranked_at != self.fairness.version:
            self._ranked = self.fairness.ranking(list(self._queues))
            self._ranked_at = self.fairness.version
        return self._ranked

    def _groups(self, skip: Collection[str] = ()) -> Iterator[tuple[float, list[str]]]:
        """The ranking's tenants (less `skip`) grouped by key: tenant keys rarely tie."""
        ranked = [r for r in self.ranked() if r[1] not in skip] if skip else self.ranked()
        i, n = 0, len(ranked)
        while i < n:
            tenant_key, j = ranked[i][0], i + 1
            while j < n and ranked[j][0] == tenant_key:
                j += 1
            yield tenant_key, [t for _, t in ranked[i:j]]
            i = j

    def _head(self) -> Entry:
        ranked = self.ranked()
        if not ranked:
            raise IndexError("queue is empty")
        # the lowest key's tenants (usually one, the first ranked: those tied follow it), then
        # their lowest head entry (entries are unique: orders are)
        tenant_key, tenant = ranked[0]
        queues = self._queues
        head = queues[tenant][0]
        for i in range(1, len(ranked)):
            if ranked[i][0] != tenant_key:
                break
            entry = queues[ranked[i][1]][0]
            if entry < head:
                head = entry
        return (tenant_key,) + head[0], head[1]

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            if not self._queues:
                return []  # the common read: a cycle asks for the first few of an empty queue
            if index.step or index.stop is None or index.stop < 0 or (index.start or 0) < 0:
                return self._take((), None)[index]
            return self._take((), index.stop)[index.start:]  # the cycle's usual read
        if index == 0:
            return self._head()  # the head: the cycle asks for it once per job started
        return self._take((), None)[index]

    def __iter__(self) -> Iterator[Entry]:
        """Entries in (tenant key, *policy key, order) order: tenants by key, tied tenants merged."""
        return self._merged(())  # lazily: the preemptive walk may stop early

    def without(self, tenants: Collection[str]) -> list[Entry]:
        """The entries of every tenant but `tenants`, in queue order (a walk that skips waiting
        tenants' jobs would otherwise pass each of their jobs, which here come in blocks)."""
        return self._take(tenants, None)

    def _take(self, skip: Collection[str], limit: int | None) -> list[Entry]:
        """The first `limit` (None: all) entries of all tenants but `skip` in queue order, as a
        list: tenants by key, each tenant's queue sliced whole, tied tenants merged."""
        out: list[Entry] = []
        for tenant_key, tenants in self._groups(skip):
            if limit is not None and len(out) >= limit:
                break
            need = None if limit is None else limit - len(out)
            if len(tenants) == 1:
                queue = self._queues[tenants[0]]
                group: Iterable[Entry] = queue if need is None or need >= len(queue) else queue[:need]
            else:
                group = heapq.merge(*[self._queues[t] for t in tenants])
                group = group if need is None else islice(group, need)
            prefix = (tenant_key,)
            out += [(prefix + policy_key, order) for policy_key, order in group]
        return out

    def _first(self, skip: Collection[str], limit: int) -> list[int]:
        """The orders of `_take`'s first `limit` entries: the walk needs no (tenant key, *policy
        key) tuple per entry. The ranking is walked here, not by `_groups` (a cycle reads this
        once or twice: a generator and a list per group cost more than the usual read, one
        tenant's few jobs), and a tenant whose key ties no other's is read alone."""
        queues = self._queues
        if len(queues) == 1:  # most reads: one tenant queued, so no ranking, no key to work out
            ((tenant, queue),) = queues.items()
            if tenant in skip:
                return []
            return [e[1] for e in (queue if len(queue) <= limit else queue[:limit])]
        ranked = self.ranked()
        out: list[int] = []
        i, n = 0, len(ranked)
        while i < n and len(out) < limit:
            tenant_key, tenant = ranked[i]
            i += 1
            if i == n or ranked[i][0] != tenant_key:  # its key ties none: its block alone (usual)
                if tenant not in skip:
                    queue, need = queues[tenant], limit - len(out)
                    out += [e[1] for e in (queue if len(queue) <= need else queue[:need])]
                continue
            j = i
            while j < n and ranked[j][0] == tenant_key:
                j += 1
            tenants = [t for _, t in ranked[i - 1:j] if t not in skip]
            i, need = j, limit - len(out)
            if len(tenants) == 1:
                queue = queues[tenants[0]]
                out += [e[1] for e in (queue if len(queue) <= need else queue[:need])]
            elif tenants:
                out += [e[1] for e in islice(heapq.merge(*[queues[t] for t in tenants]), need)]
        return out

    def first_jobs(self, skip: Collection[str], limit: int) -> list[JobState]:
        """The jobs of `_first`'s orders: the strict quota loop's walk reads these as they are now."""
        jobs = self._jobs
        return [jobs[o] for o in self._first(skip, limit)]

    def _merged(self, skip: Collection[str]) -> Iterator[Entry]:
        for tenant_key, tenants in list(self._groups(skip)):
            prefix = (tenant_key,)
            group: Sequence[Iterable[Entry]] = [self._queues[t] for t in tenants]
            for policy_key, order in group[0] if len(group) == 1 else heapq.merge(*group):
                yield prefix + policy_key, order

    def walk(self, skip: set[str], first: int = 32) -> Iterator[tuple[str, int]]:
        """(tenant, order) of the queued jobs in queue order, for a walk that starts and preempts
        jobs meanwhile, as `gputwin.core.state.queued_then` reads them: the first `first` as read now,
        then the rest as queued then (less those already read); a job of a tenant in `skip` (which
        the caller may grow) is left out when reached. The rest is read lazily, a tenant at a
        time, from its live queue: a walk usually stops or skips the tenant long before its end."""
        if not self._queues:
            return  # the common read: a cycle's second pass finds the queue empty
        # Under fairshare the head leaves `skip` out already: the ranking cannot move within an
        # instant, so reading a skipped tenant's block now or later makes no difference.
        head = self._first(skip if self.fairness.mode == "fairshare" else (), first)
        tenant_of = self._tenant
        for order in head:
            tenant = tenant_of[order]
            if tenant not in skip:
                yield tenant, order
        if len(head) < first:
            return
        yield from self._rest(skip, set(head))

    def _rest(self, skip: set[str], seen: set[int]) -> Iterator[tuple[str, int]]:
        """`walk`'s rest: the tenants as ranked now, each read from its live queue when reached."""
        tenant_of = self._tenant
        for _, tenants in list(self._groups(skip)):
            group = [_live(self._queues[t]) for t in tenants]
            for entry in group[0] if len(group) == 1 else heapq.merge(*group):  # indexed: compiled,
                owner = tenant_of.get(order := entry[1])  # unpacking iterates; None: no longer queued
                if order in seen or owner is None:
                    continue
                if owner in skip:
                    if len(tenants) == 1:
                        break  # the tenant waits: the rest of its block is skipped too
                    continue
                yield owner, order


def _live(queue: list[Entry], chunk: int = 16) -> Iterator[Entry]:
    """`queue`'s entries in order while it changes: read a chunk past the last one at a time
    (the walk starts and so removes entries it has read; entries added behind it are read)."""
    entries = queue[:chunk]
    while entries:
        yield from entries
        chunk = min(chunk * 2, 4096)
        start = bisect_right(queue, entries[-1])
        entries = queue[start:start + chunk]


class FairPolicy:
    """A queue policy whose running jobs' keys lead with their tenant's fairness key (the
    preemptive loop compares them with the FairQueue's entries). Queued keys stay the inner
    policy's: the FairQueue adds the prefix when read."""

    def __init__(self, inner: QueuePolicy, fairness: Fairness) -> None:
        self.inner = inner
        self.fairness = fairness
        self.name = inner.name
        self.preemptive = inner.preemptive
        self.timed = inner.timed

    def key(self, job: JobState, now: float) -> Key:
        return self.inner.key(job, now)

    def next_change(self, job: JobState, now: float) -> float | None:
        return self.inner.next_change(job, now)

    def running_entries(self, jobs: Iterable[JobState], now: float) -> list[RunningEntry]:
        fair = self.fairness
        fair.at(now)
        return [((fair.key(fair.tenant_of(job)),) + key, order, job, change)
                for key, order, job, change in self.inner.running_entries(jobs, now)]  # fmt: skip

    def soonest_change(self, entries: Sequence[RunningEntry], now: float) -> float:
        return self.inner.soonest_change(entries, now)


def tenant_walk(part: PartitionState, skip: set[str],
                queued: Callable[[PartitionState, set[str]], Iterable[JobState]]) -> Iterable[JobState]:  # fmt: skip
    """`part`'s queued jobs in queue order for the strict quota loop, which skips the jobs of
    tenants in `skip` (it grows as the loop goes) itself: a FairQueue's `walk`, its first jobs as
    read now (waiting tenants' blocks left out under fairshare), else `queued(part, skip)`
    (`state.queued_then`). A job's tenant is the one the Scheduler stored on it (`job.tenant`).

    Under a FairQueue the first ones are read at once, as a list: when there are no more (the
    usual case) that list is the walk, with no generator to resume per job. The rest is read
    lazily, as the loop reaches it (`_head_then_rest`): a generator function, not a returned
    generator expression, which mypyc would build all at once (under drf, which re-ranks as jobs
    start, the compiled core then ordered jobs otherwise than the pure one: bc77082)."""
    order = part.order
    if isinstance(order, FairQueue):
        fairshare = order.fairness.mode == "fairshare"
        # fairshare: the ranking holds within the instant, so the first read is kept short (the
        # loop reads ~3 jobs a cycle) but past one tenant's usual block: going on into `_rest`
        # costs ~50,000 instructions, and on the 1M synthetic's long queues an 8-job read was
        # used up by 8 % of walks. drf re-ranks as jobs start: its first 32 are a snapshot.
        # Under fairshare the first read leaves `skip` out already: the ranking cannot move within
        # an instant, so reading a skipped tenant's block now or later makes no difference (jobs
        # queued meanwhile are reclaims' victims, whose tenants wait: read now or later, skipped).
        first = 16 if fairshare else 32
        head = order.first_jobs(skip if fairshare else (), first)
        if len(head) < first:
            return head
        return _head_then_rest(order, head, skip)
    return queued(part, skip)


def _head_then_rest(order: FairQueue, head: list[JobState], skip: set[str]) -> Iterator[JobState]:
    """`tenant_walk`'s first jobs, then the rest as queued then (`FairQueue._rest`)."""
    yield from head
    jobs = order._jobs
    for _, o in order._rest(skip, {job.order for job in head}):
        yield jobs[o]


def fair_among(part: PartitionState, fairness: Fairness) -> None:
    """Make `part` order its queue with `fairness` among its tenants: its quotas' accounts, or
    each user where it declares no quotas. Call before anything is queued."""
    assert not part.queued, "fairness is set up before any job is queued"
    if part.quota is not None:
        fairness.tenant_of = part.quota.tenant_of
        # A tenant's per-model quotas (`tenant/model`) weigh what the tenant does.
        weights = fairness.weights
        weights.update({key: weights[t] for key, t in part.quota.owner.items() if key != t and t in weights})
    part.fair = fairness
    part.order = FairQueue(fairness, part.queued)
    part.policy = FairPolicy(part.policy, fairness)
