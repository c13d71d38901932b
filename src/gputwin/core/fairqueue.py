"""A partition's queue ordered by fairness among tenants (`gputwin.core.fairness` keys them).

`FairQueue` keeps one sorted queue per tenant and merges them by tenant key when read: the cycle's
loops read it as the one sorted queue they always read, and the strict quota loop walks it tenant
block by tenant block (`fair_head`, `fair_rest`). `FairPolicy` prefixes a running job's key the
same way for the preemptive loop; `fair_among` sets a partition up with both. Pure: no I/O, no clock.
"""

from __future__ import annotations

import heapq
from itertools import islice
from typing import TYPE_CHECKING, Collection, Iterable, Iterator, Sequence, overload

from gputwin.core.fairness import Fairness, TenantState

if TYPE_CHECKING:
    from gputwin.core.policies import Key, QueuePolicy, RunningEntry
    from gputwin.core.state import JobState, PartitionState

Entry = tuple["Key", int]
_NOBODY: set[str] = set()  # a walk's skip when it skips no tenant (never changed)


class TenantQueue:
    """One tenant's queued jobs (not entries: no look-up per job) sorted by (policy key, order), its
    fairness state and key as last ranked: kept while empty (tenants come and go at most starts)."""

    __slots__ = ("tenant", "jobs", "state", "key")

    def __init__(self, tenant: str, state: TenantState) -> None:
        self.tenant = tenant
        self.jobs: list[JobState] = []
        self.state = state
        self.key = 0.0


class FairQueue:
    """A partition's queued jobs, one `TenantQueue` per tenant, read as one queue of (policy key,
    order) entries sorted by (tenant key, *policy key) then order: the SortedList interface
    `PartitionState` and the cycle use (add, remove, [0], [:k], iteration, len). A tenant's jobs are
    a list kept sorted by bisection: dozens at most (97 in the 1M synthetic), usually one or none."""

    def __init__(self, fairness: Fairness, jobs: dict[int, JobState]) -> None:
        self.fairness = fairness
        self.fairshare = fairness.mode == "fairshare"
        self.first = 16 if self.fairshare else 32  # the strict quota loop's first read (`fair_head`)
        self._jobs = jobs  # order -> queued job (`add` and `remove` by entry find the job here)
        self._queues: dict[str, TenantQueue] = {}
        # The tenants with a queued job, as last ranked (`_rank`: kept while the keys, the fairness's
        # `version`, stay) then those queued since: the cycle reads the queue several times an instant.
        self._active: list[TenantQueue] = []
        self._count = 0
        self._ranked_at = -1  # the version `_active` was ranked at; -1: it changed since

    # --- changes ----------------------------------------------------------------------------------

    def add_job(self, job: JobState) -> None:
        """Queue `job` at its entry (job.key, job.order), behind its tenant's jobs of lower entries."""
        queue = self._queue_of(job)
        jobs = queue.jobs
        if not jobs:
            jobs.append(job)
            self._active.append(queue)
            self._ranked_at = -1
        elif _precedes(jobs[-1].key, jobs[-1].order, job):
            jobs.append(job)  # a first-come queue (fifo) adds behind its tenant's last
        else:
            jobs.insert(_place(jobs, job.key, job.order), job)
        self._count += 1

    def remove_job(self, job: JobState) -> None:
        """Take `job`, queued at (job.key, job.order), out of the queue."""
        queue = self._queue_of(job)
        jobs = queue.jobs
        # Usually its tenant's head starts: found by identity, else by bisection.
        i = 0 if jobs and jobs[0] is job else _place(jobs, job.key, job.order) - 1
        if i < 0 or jobs[i] is not job:
            raise ValueError(f"{(job.key, job.order)!r} is not queued")  # as SortedList.remove
        jobs.pop(i)  # not `del jobs[i]`: compiled, a list's pop is a direct call
        self._count -= 1
        if not jobs:
            self._active.remove(queue)  # the rest stays ranked: `_ranked_at` holds

    def add(self, entry: Entry) -> None:
        """Queue the job of `entry`'s order (in the jobs given) at `entry`, its `job.key` from now on."""
        job = self._jobs[entry[1]]
        job.key, job.order = entry
        self.add_job(job)

    def remove(self, entry: Entry) -> None:
        """Take `entry` out: the job of its order, found by its tenant (in the jobs given) or else all."""
        key, order = entry
        job = self._jobs.get(order)
        queues = [self._queue_of(job)] if job is not None else list(self._active)
        for queue in queues:
            i = _place(queue.jobs, key, order) - 1
            if i >= 0 and queue.jobs[i].order == order and queue.jobs[i].key == key:
                self.remove_job(queue.jobs[i])
                return
        raise ValueError(f"{entry!r} is not queued")

    def _queue_of(self, job: JobState) -> TenantQueue:
        # The tenant the Scheduler stored on the job, else looked up (a job queued by hand).
        tenant = job.tenant or self.fairness.tenant_of(job)
        queue = self._queues.get(tenant)
        if queue is None:
            queue = self._queues[tenant] = TenantQueue(tenant, self.fairness.state_of(tenant))
        return queue

    # --- reads ------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return self._count

    def _rank(self) -> list[TenantQueue]:
        """The tenants with a queued job, (key, tenant) sorted: `_active` sorted in place by insertion
        on native keys, nearly sorted as last ranked (keys move little between instants)."""
        fair = self.fairness
        if self._ranked_at == fair.version:
            return self._active
        stamp = fair.fresh()
        ranked = self._active
        for n in range(len(ranked)):
            queue = ranked[n]
            state = queue.state
            queue.key = key = state.key if state.stamp == stamp else fair.key_of(queue.tenant, state)
            i = n
            while i > 0 and _ranks_after(ranked[i - 1], key, queue.tenant):
                ranked[i] = ranked[i - 1]
                i -= 1
            ranked[i] = queue
        self._ranked_at = fair.version
        return ranked

    def _groups(self, skip: Collection[str] = ()) -> list[tuple[float, list[TenantQueue]]]:
        """The ranking's tenants (less `skip`) grouped by key: tenant keys rarely tie."""
        out: list[tuple[float, list[TenantQueue]]] = []
        for queue in self._rank():
            if queue.tenant in skip:
                continue
            if out and out[-1][0] == queue.key:
                out[-1][1].append(queue)
            else:
                out.append((queue.key, [queue]))
        return out

    def head_job(self) -> JobState:
        """The queued job of the lowest entry: the lowest head of the first-ranked (and tied) tenants."""
        ranked = self._rank()
        if not ranked:
            raise IndexError("queue is empty")
        first = ranked[0]
        head = first.jobs[0]
        for i in range(1, len(ranked)):
            if ranked[i].key != first.key:
                break
            job = ranked[i].jobs[0]
            if _precedes(job.key, job.order, head):
                head = job
        return head

    @overload
    def __getitem__(self, index: int) -> Entry: ...
    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...
    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            if not self._count:
                return []  # the common read: a cycle asks for the first few of an empty queue
            if index.step or index.stop is None or index.stop < 0 or (index.start or 0) < 0:
                return self._take((), None)[index]
            return self._take((), index.stop)[index.start:]  # the cycle's usual read
        if index == 0:
            head = self.head_job()  # the head: the cycle asks for it once per job started
            return (self._rank()[0].key,) + head.key, head.order
        return self._take((), None)[index]

    def __iter__(self) -> Iterator[Entry]:
        """Entries in (tenant key, *policy key, order) order: tenants by key, tied tenants merged."""
        return self._merged(())  # lazily: the preemptive walk may stop early

    def without(self, tenants: Collection[str]) -> list[Entry]:
        """The entries of every tenant but `tenants`, in queue order (a walk that skips waiting
        tenants' jobs would otherwise pass each of their jobs, which here come in blocks)."""
        return self._take(tenants, None)

    def _take(self, skip: Collection[str], limit: int | None) -> list[Entry]:
        """The first `limit` (None: all) entries of all tenants but `skip` in queue order, as a list."""
        out: list[Entry] = []
        for tenant_key, queues in self._groups(skip):
            if limit is not None and len(out) >= limit:
                break
            need = None if limit is None else limit - len(out)
            prefix = (tenant_key,)
            group = queues[0].jobs if len(queues) == 1 else _merge(queues, need)
            out += [(prefix + job.key, job.order) for job in (group if need is None else group[:need])]
        return out

    def first_jobs(self, skip: set[str], limit: int) -> list[JobState]:
        """The first `limit` queued jobs of all tenants but `skip` in queue order, as they are now
        (`fair_head`'s): the ranking walked here, not grouped by `_groups` (usually one tenant's
        few jobs are read), a tenant whose key ties no other's read alone."""
        active = self._active
        if len(active) == 1:  # most reads: one tenant queued, so no ranking, no key to work out
            queue = active[0]
            return [] if queue.tenant in skip else queue.jobs[:limit]
        if skip and self._ranked_at != self.fairness.version:
            alone = _alone(active, skip, limit)  # a busy cluster's queued tenants mostly wait at their guarantee
            if alone is not None:
                return alone
        ranked = self._rank()
        out: list[JobState] = []
        i, n = 0, len(ranked)
        while i < n and len(out) < limit:
            queue = ranked[i]
            i += 1
            if i == n or ranked[i].key != queue.key:  # its key ties none: its block alone (usual)
                if queue.tenant not in skip:
                    out.extend(queue.jobs[:limit - len(out)])
                continue
            j = i
            while j < n and ranked[j].key == queue.key:
                j += 1
            tied = [q for q in ranked[i - 1:j] if q.tenant not in skip]
            i = j
            if tied:
                out.extend(_merge(tied, limit - len(out)))
        return out

    def _merged(self, skip: Collection[str]) -> Iterator[Entry]:
        for tenant_key, queues in self._groups(skip):
            prefix = (tenant_key,)
            for job in queues[0].jobs if len(queues) == 1 else _merge(queues, None):
                yield prefix + job.key, job.order

    def walk(self, skip: set[str], first: int = 32) -> Iterator[tuple[str, int]]:
        """(tenant, order) of the queued jobs in queue order for a walk that starts and preempts
        jobs meanwhile, as `fair_head` and `fair_rest` read them: the first `first` as read now (under
        fairshare less `skip`'s), then lazily the rest as queued then, less those read and those of
        tenants in `skip` (which the caller may grow) when reached, from each tenant's live queue."""
        if not self._count:
            return
        head = [(job.tenant or self.fairness.tenant_of(job), job.order)
                for job in self.first_jobs(skip if self.fairshare else _NOBODY, first)]  # fmt: skip
        for tenant, order in head:
            if tenant not in skip:
                yield tenant, order
        if len(head) < first:
            return
        for job in self._rest(skip, {order for _, order in head}):
            yield job.tenant or self.fairness.tenant_of(job), job.order

    def _rest(self, skip: set[str], seen: set[int]) -> Iterator[JobState]:
        """`walk`'s rest: the tenants as ranked now, each read from its live queue when reached."""
        for _, queues in self._groups(skip):
            reads = [_live(queue) for queue in queues]
            for _, order, queue, job in reads[0] if len(reads) == 1 else heapq.merge(*reads):
                if order in seen or not _holds(queue.jobs, job, order):
                    continue  # read already, or no longer queued (started meanwhile)
                if queue.tenant in skip:
                    if len(queues) == 1:
                        break  # the tenant waits: the rest of its block is skipped too
                    continue
                yield job


def _alone(active: list[TenantQueue], skip: set[str], limit: int) -> list[JobState] | None:
    """The first `limit` jobs of the one tenant of `active` not in `skip` ([] if none), or None if
    several are: one tenant's block needs no ranking (a key left unread is the same later in the
    instant: `Fairness.change`; drf skips no tenant)."""
    found: TenantQueue | None = None
    for queue in active:
        if queue.tenant not in skip:
            if found is not None:
                return None
            found = queue
    return [] if found is None else found.jobs[:limit]


def _precedes(key: Key, order: int, job: JobState) -> bool:
    """Is the entry (key, order) before `job`'s? Compiled, with no entry tuple built."""
    other = job.key
    if key == other:
        return order < job.order
    return key < other


def _ranks_after(queue: TenantQueue, key: float, tenant: str) -> bool:
    """Does `queue` rank after a tenant's of `key`: (key, tenant) order, names breaking ties."""
    return key < queue.key or key == queue.key and tenant < queue.tenant


def _place(jobs: list[JobState], key: Key, order: int) -> int:
    """Where the entry (key, order) goes among `jobs` (sorted): `bisect.bisect_right` on entries."""
    lo, hi = 0, len(jobs)
    while lo < hi:
        mid = (lo + hi) >> 1
        if _precedes(key, order, jobs[mid]):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _holds(jobs: list[JobState], job: JobState, order: int) -> bool:
    """Is `job` still among `jobs` at `order` (not started, not queued again since read)?"""
    if job.order != order:
        return False
    i = _place(jobs, job.key, order) - 1
    return i >= 0 and jobs[i] is job


def _merge(queues: list[TenantQueue], limit: int | None) -> list[JobState]:
    """The first `limit` (None: all) jobs of tied tenants' queues in entry order."""
    merged = heapq.merge(*[[(job.key, job.order, job) for job in queue.jobs] for queue in queues])
    return [entry[2] for entry in (merged if limit is None else islice(merged, limit))]


def _live(queue: TenantQueue, chunk: int = 16) -> Iterator[tuple[Key, int, TenantQueue, JobState]]:
    """`queue`'s jobs in order while it changes, as (key, order) as read, the queue and the job:
    read a chunk past the last one at a time (the walk starts and so removes jobs it has read;
    jobs added behind it are read)."""
    jobs = queue.jobs
    reads = [(job.key, job.order, queue, job) for job in jobs[:chunk]]
    while reads:
        yield from reads
        chunk = min(chunk * 2, 4096)
        start = _place(jobs, reads[-1][0], reads[-1][1])
        reads = [(job.key, job.order, queue, job) for job in jobs[start:start + chunk]]


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


def fair_head(part: PartitionState, skip: set[str]) -> list[JobState] | None:
    """The first jobs of `part`'s FairQueue in queue order for the strict quota loop, which skips
    the jobs of tenants in `skip` (it grows as the loop goes) itself (a job's tenant is the one
    the Scheduler stored on it, `job.tenant`), as read now: a list, which the loop reads natively;
    `fair_rest` the rest. None: `part` has no FairQueue (`state.queued_then` walks its queue).

    fairshare: the ranking holds within the instant; the first read is short (the loop reads ~3
    jobs a cycle) but past one tenant's usual block (an 8-job read was used up by 8 % of the 1M
    synthetic's walks, and the rest costs ~50,000 instructions), `skip` left out already (jobs
    queued meanwhile are reclaims' victims, whose tenants wait). drf re-ranks as jobs start: its
    first 32 are a snapshot."""
    order = part.order
    if not isinstance(order, FairQueue):
        return None
    return order.first_jobs(skip if order.fairshare else _NOBODY, order.first)


def fair_rest(part: PartitionState, head: list[JobState], skip: set[str]) -> Iterator[JobState] | None:
    """The jobs after `fair_head`'s `head` as queued then, read lazily (`FairQueue._rest`: a generator;
    compiled, a returned generator expression is built at once: bc77082); None if `head` had all."""
    order = part.order
    assert isinstance(order, FairQueue)
    if len(head) < order.first:
        return None
    return order._rest(skip, {job.order for job in head})


def fair_among(part: PartitionState, fairness: Fairness) -> None:
    """Make `part` order its queue with `fairness` among its tenants: its quotas' accounts, or
    each user where it declares no quotas. Call before anything is queued."""
    assert not part.queued, "fairness is set up before any job is queued"
    if part.quota is not None:
        fairness.tenant_of = part.quota.tenant_of
        # A tenant's per-model quotas (`tenant/model`) weigh what the tenant does.
        weights = fairness.weights
        fairness.weigh({key: weights[t] for key, t in part.quota.owner.items() if key != t and t in weights})
    part.fair = fairness
    part.order = FairQueue(fairness, part.queued)
    part.policy = FairPolicy(part.policy, fairness)
