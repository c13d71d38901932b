"""Tenants' GPU quotas in one partition: admission, borrowing within a cohort, reclaim.

The rules are docs/tenancy.md's (Kueue's): a tenant in no cohort holds at most its guarantee N; a
cohort member holds at most N + borrowing limit, and its cohort as a whole at most the sum of its
members' guarantees, the part of each that may not be lent (N - lending limit) counting as used
while idle. `PartitionQuota` keeps each tenant's usage (GPUs its running jobs hold) and demand
(GPUs its queued and running jobs ask for), told by the scheduler with `now`, and integrates both
over time for the per-tenant metrics (`report`), lazily: a tenant's integrals are brought up to
date only when its usage or demand changes, or at `report` (a change touches one tenant of many).
A tenant with per-model quotas (`QuotaSpec.models`) is several "tenants" here, keyed `tenant/model`,
one per model, plus its own name for jobs asking for no model or another one: every rule above
runs unchanged on those keys, a model's quota meeting only that model's quotas in its cohort.
Pure: no clock, every ordering deterministic.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Mapping, Reversible, Sequence

from gputwin.core.frozen import Frozen
from gputwin.core.model import QuotaSpec
from gputwin.core.quotapool import NO_LIMIT, Cohort, Held, Pool, Queued

if TYPE_CHECKING:
    from gputwin.core.modelrank import GpuBudget
    from gputwin.core.policies import Key
    from gputwin.core.state import JobState

CATCH_ALL = "*"


@dataclass(frozen=True, slots=True)
class TenantUsage(Frozen):
    """One tenant's service in one partition over a run (GPU-seconds); `tenant` is `tenant/model`
    for a per-model quota."""

    tenant: str
    partition: str
    guaranteed: int
    used: float  # integral of usage U
    borrowed: float  # integral of max(0, U - N)
    delivered: float  # integral of min(U, N)
    entitled: float  # integral of min(D, N), D the GPUs its queued and running jobs ask for


class PartitionQuota:
    """Guarantees, limits and usage of the tenants of one partition."""

    def __init__(self, partition: str, quotas: Sequence[QuotaSpec]) -> None:
        self.partition = partition
        pools = [pool for q in quotas for pool in _pools(q)]
        self.nominal = {key: gpus for key, _, gpus, _ in pools}
        self.borrowing = {key: q.borrowing_limit for key, _, _, q in pools}
        # The part of a guarantee its owner never lends: counted as used while idle.
        self.reserved = {key: n - min(n, n if q.lending_limit is None else q.lending_limit) for key, _, n, q in pools}
        # A model's quotas lend to and borrow from that model's quotas of the cohort only.
        self.cohort = {key: None if q.cohort is None else q.cohort + model for key, model, _, q in pools}
        self.members: dict[str, tuple[str, ...]] = {}
        for key, cohort in self.cohort.items():
            if cohort is not None:
                self.members[cohort] = (*self.members.get(cohort, ()), key)
        # tenant -> model -> its pool's key, for the tenants with per-model quotas only.
        self.by_model = {q.tenant: {m: q.tenant + "/" + m for m in q.models} for q in quotas if q.models}
        self.owner = {key: q.tenant for key, _, _, q in pools}
        self.capacity = {c: sum(self.nominal[t] for t in ts) for c, ts in self.members.items()}
        self.cohort_reserved = {c: tuple(self.reserved[t] for t in ts) for c, ts in self.members.items()}
        self._ceilings = {t: self._ceiling(t) for t in self.nominal}  # fixed by the quotas
        self.of_user: dict[str, str] = {}
        self.catch_all: str | None = None
        for q in quotas:
            for user in q.users or (q.tenant,):
                if user == CATCH_ALL:
                    self.catch_all = self.catch_all or q.tenant
                else:
                    self.of_user.setdefault(user, q.tenant)
        cohorts = {c: Cohort(self.capacity[c], sum(self.cohort_reserved[c])) for c in self.members}
        self._pools = {t: Pool(t, n, self.reserved[t], NO_LIMIT if self.borrowing[t] is None else self.borrowing[t],  # type: ignore[arg-type]
                                None if self.cohort[t] is None else cohorts[self.cohort[t]])  # type: ignore[index]
                       for t, n in self.nominal.items()}  # fmt: skip
        self._cohorts = cohorts
        # Each tenant's GPUs held and asked for, read (and `used` set, as tests do) through views
        # of the pools: the pools are the state, changed by `change`.
        self.used = Held(self._pools, cohorts, True)
        self.demand = Held(self._pools, cohorts, False)
        # The pools whose demand exceeds their usage (a job queued), kept by `change`.
        self._queued = Queued()
        self._now = 0.0  # the latest instant told: a change told late counts from here, as it always has

    # --- reads ------------------------------------------------------------------------------------

    def tenant(self, user: str) -> str | None:
        return self.of_user.get(user, self.catch_all)

    def tenant_of(self, job: JobState) -> str:
        """The quota an admitted job counts against (admission refused jobs of no tenant): its
        tenant's, or `tenant/model` where the tenant has a per-model quota of the model it asks for."""
        tenant: str = self.of_user.get(job.spec.user, self.catch_all)  # type: ignore[assignment]
        if self.by_model:
            return self.pool(tenant, job.spec.model)
        return tenant

    def pool_of(self, job: JobState) -> str:
        """`tenant_of`, read from the job where the Scheduler stored it (not on a job made by hand)."""
        return getattr(job, "tenant", "") or self.tenant_of(job)

    def pool(self, tenant: str, model: str) -> str:
        """The key of `tenant`'s quota for jobs asking for `model` ("": any): per model if named."""
        models = self.by_model.get(tenant)
        return tenant if models is None else models.get(model, tenant)

    def ceiling(self, tenant: str) -> int:
        """The most GPUs `tenant` could ever hold here: a larger job could never start."""
        return self._ceilings[tenant]

    def _ceiling(self, tenant: str) -> int:
        own = self.nominal[tenant]
        cohort = self.cohort[tenant]
        if cohort is None:
            return own
        lendable = sum(self.nominal[s] - self.reserved[s] for s in self.members[cohort] if s != tenant)
        limit = self.borrowing[tenant]
        return own + (lendable if limit is None else min(limit, lendable))

    def fits(self, tenant: str, gpus: int) -> bool:
        """May a job of `gpus` GPUs of `tenant` start now, as far as quotas go?"""
        return self._pools[tenant].fits(gpus)

    def within_guarantee(self, tenant: str, gpus: int) -> bool:
        pool = self._pools[tenant]
        return pool.used + gpus <= pool.nominal

    def admits(self, tenant: str, gpus: int, borrowing: bool) -> bool | None:
        """May a job start now as far as quotas go (`borrowing`: above its tenant's guarantee)?
        None: within the guarantee only if borrowed GPUs are reclaimed (the caller works that out)."""
        pool = self._pools[tenant]  # one lookup, then the pool's native attributes
        if borrowing:
            return pool.fits(gpus)
        if pool.used + gpus > pool.nominal:
            return False
        return True if pool.fits(gpus) else None

    def at_guarantee(self) -> set[str]:
        """The tenants with a queued job that hold their whole guarantee or more: within it none
        of their jobs can start (a reclaim only lowers a tenant it then makes wait)."""
        return {pool.key for pool in self._queued.pools if pool.used >= pool.nominal}

    def queued_tenants(self) -> int:
        """How many tenants have a queued job: `at_guarantee` holds them all if it holds as many
        (its keys are theirs, each once), with no look-up each as `all_waiting` takes."""
        return len(self._queued.pools)

    def all_waiting(self, waiting: set[str]) -> bool:
        """Is every tenant with a queued job in `waiting`? (Demand above usage is queued GPUs.)"""
        for pool in self._queued.pools:
            if pool.key not in waiting:
                return False
        return True

    def reclaim(self, tenant: str, gpus: int, running: Reversible[JobState], free_gpus: int) -> list[JobState] | None:
        """Borrowed work to preempt so a job within `tenant`'s guarantee fits (quota and free GPUs):
        running jobs of cohort members above their guarantee, most recently started first, each
        only while its tenant still borrows. None if there is nothing to do or it would not suffice.
        `running` is in start order, as a partition's `running` dict is (jobs enter it as they
        start, and orders only grow): read from its end, a reclaim stops where it has enough."""
        pools = self._pools
        pool = pools[tenant]
        cohort = pool.cohort
        if cohort is None or pool.used + gpus > pool.nominal:
            return None
        # Only members above their guarantee lose work, and none rises above it here: the others'
        # jobs are never candidates (no borrower: nothing to reclaim, no running job read).
        members = self.members[self.cohort[tenant]]  # type: ignore[index]
        borrowers = {t for t in members if t != tenant and pools[t].used > pools[t].nominal}
        if not borrowers or (free_gpus >= gpus and pool.fits(gpus)):
            return None
        # `_fits` as victims leave, kept as the cohort's total is: the tenant's own usage stays, so
        # it fits once the total is at most `bound` (within its guarantee, no borrowing limit bites).
        used = {t: pools[t].used for t in borrowers}
        total, r = cohort.total, pool.reserved
        after = pool.used + gpus
        bound = cohort.capacity - (after if after > r else r) + (pool.used if pool.used > r else r)
        owner_of = self.pool_of
        victims: list[JobState] = []
        for job in reversed(running):
            # The stored tenant first: `pool_of`'s getattr is a generic attribute lookup compiled.
            owner = job.tenant or owner_of(job)
            if owner in borrowers:
                held, lender = used[owner], pools[owner]
                if held > lender.nominal:
                    victims.append(job)
                    used[owner] = left = held - job.gpus
                    r = lender.reserved
                    total += (left if left > r else r) - (held if held > r else r)
                    free_gpus += job.gpus
                    if free_gpus >= gpus and total <= bound:
                        break
        if not (victims and free_gpus >= gpus and total <= bound):
            return None
        # Fill back, as Kueue does: spare each victim, last chosen first, whose work is not needed.
        for job in reversed(victims[:]):
            owner = job.tenant or owner_of(job)
            held, r = used[owner], pools[owner].reserved
            back = held + job.gpus
            spared = total + (back if back > r else r) - (held if held > r else r)
            if free_gpus - job.gpus >= gpus and spared <= bound:
                victims.remove(job)
                free_gpus -= job.gpus
                used[owner], total = back, spared
        return victims

    # --- changes ----------------------------------------------------------------------------------

    def change(self, now: float, tenant: str, used: int = 0, demand: int = 0) -> None:
        """`tenant` holds `used` more GPUs and asks for `demand` more from `now` on."""
        if now > self._now:
            self._now = now
        pool = self._pools[tenant]
        if pool.since != self._now:  # a tenant often changes twice an instant (submit, start)
            self._advance(pool)
        after = pool.used + used
        if used:
            pool.set_used(after)
        pool.demand = wanted = pool.demand + demand
        if (wanted != after) != (pool.place >= 0):  # it joins or leaves the queued ones
            self._queued.mark(pool, wanted != after)

    def advance(self, now: float) -> None:
        """Integrate every tenant's usage and demand up to `now`."""
        if now > self._now:
            self._now = now
        for pool in self._pools.values():
            self._advance(pool)

    def _advance(self, pool: Pool) -> None:
        """Integrate a tenant's usage and demand up to the latest instant told (unchanged since its
        own last change: one product per area where every change of any tenant used to add one)."""
        span = self._now - pool.since
        if span > 0.0:
            u, n, d = pool.used, pool.nominal, pool.demand
            pool.area_used += u * span
            if u > n:
                pool.borrowed += (u - n) * span
            pool.delivered += (u if u < n else n) * span
            pool.entitled += (d if d < n else n) * span
            pool.since = self._now

    def report(self, now: float) -> tuple[TenantUsage, ...]:
        """Every tenant's integrals up to `now`, by tenant name."""
        self.advance(now)
        return tuple(TenantUsage(t, self.partition, p.nominal, p.area_used, p.borrowed, p.delivered, p.entitled)
                     for t, p in sorted(self._pools.items()))


def _fits(quota: PartitionQuota, used: Mapping[str, int], tenant: str, gpus: int) -> bool:
    after = used[tenant] + gpus
    own = quota.nominal[tenant]
    cohort = quota.cohort[tenant]
    if cohort is None:
        return after <= own
    limit = quota.borrowing[tenant]
    if limit is not None and after - own > limit:
        return False
    # The cohort's sum over every member, then the tenant's own term swapped. (The quota's own
    # usage keeps that sum as it changes: `Pool.fits`; a caller's copy, `reclaim`'s, is summed.)
    own_reserved = quota.reserved[tenant]
    total = sum(map(max, map(used.__getitem__, quota.members[cohort]), quota.cohort_reserved[cohort]))
    return total - max(used[tenant], own_reserved) + max(after, own_reserved) <= quota.capacity[cohort]


def quota_problem(quota: PartitionQuota, user: str, gpus: int, model: str = "") -> str | None:
    """Why a job of `user` asking for `gpus` GPUs (of `model`, "": any) can never start in this
    partition, or None."""
    # `tenant`, `pool` and `ceiling` inlined: this runs at every submit.
    tenant = quota.of_user.get(user, quota.catch_all)
    if tenant is None:
        return f"user {user!r} has no quota in partition {quota.partition!r}"
    pool = quota.pool(tenant, model) if quota.by_model else tenant
    ceiling = quota._ceilings[pool]
    if gpus > ceiling:
        what = f"tenant {tenant!r}" if pool == tenant else f"tenant {tenant!r} of model {model!r}"
        other = " (any model not named in its quota)" if pool == tenant and tenant in quota.by_model else ""
        return f"asks for {gpus} GPUs; {what}{other} may hold at most {ceiling} in partition {quota.partition!r}"
    return None


def _pools(q: QuotaSpec) -> list[tuple[str, str, int, QuotaSpec]]:
    """(key, cohort suffix, guarantee, quota) of each of a tenant's quotas: the any-model one under
    the tenant's name, each per-model one as `tenant/model` (names hold no '/': DNS names)."""
    return [(q.tenant, "", q.gpus, q)] + [(f"{q.tenant}/{m}", f"/{m}", n, q) for m, n in sorted(q.models.items())]


def rank_with_quota(
    quota: PartitionQuota,
    queued: Sequence[tuple[Key, int, JobState]],
    running: Sequence[tuple[Key, int, JobState]],
    budget: GpuBudget,
) -> tuple[list[JobState], list[JobState]]:
    """A preemptive partition's walk under quotas: (jobs to start, running jobs to preempt).

    Queued and running jobs in key order (queued first on equal keys, then order) are admitted in
    two passes from no usage: first each that stays within its tenant's guarantee, then each that
    borrowing allows, while the partition's GPUs last (`budget`: one pool, or one per GPU model,
    `gputwin.core.modelrank`). So guaranteed demand always ranks ahead of borrowed work; what is
    left running is preempted."""
    walk = sorted([(key, 0, order, job) for key, order, job in queued] +
                  [(key, 1, order, job) for key, order, job in running], key=lambda e: e[:3])  # fmt: skip
    used = {t: 0 for t in quota.nominal}
    admitted: set[int] = set()
    for guaranteed in (True, False):
        for _, is_running, order, job in walk:
            if budget.spent():
                break  # every GPU is spoken for: nothing more is admitted
            if order in admitted:
                continue
            tenant = quota.pool_of(job)
            ok = used[tenant] + job.gpus <= quota.nominal[tenant] if guaranteed else _fits(quota, used, tenant, job.gpus)
            if ok and budget.take(job, is_running == 1):
                admitted.add(order)
                used[tenant] += job.gpus
    to_run = [job for _, is_running, order, job in walk if not is_running and order in admitted]
    victims = [job for _, is_running, order, job in walk if is_running and order not in admitted]
    return to_run, victims
