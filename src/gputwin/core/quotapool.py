"""A partition quota's per-tenant state (`gputwin.core.quota.PartitionQuota` keeps one per quota key).

`Pool` holds one tenant's guarantee, limits, usage, demand and running integrals as attributes
of one object (compiled by mypyc: native, unboxed fields, read with one dict lookup of the
tenant, where a dict per field cost a lookup each and boxed every number); `Cohort` its cohort's
capacity and the running total that `Pool.fits` reads; `Queued` the pools with a queued job;
`Held` reads the pools as the per-tenant dicts `used` and `demand` once were (tests set usage
through it). Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import Any, Final, Iterator, NoReturn

NO_LIMIT: Final = -1  # a `Pool`'s borrowing limit when the quota sets none (Final: compiled, inlined)


class Cohort:
    """One cohort's capacity (its members' guarantees) and its running total of max(held,
    reserved) over its members, kept as their usage changes so `fits` reads it, not a sum."""

    __slots__ = ("capacity", "total")

    def __init__(self, capacity: int, total: int) -> None:
        self.capacity = capacity
        self.total = total


class Pool:
    """One tenant's quota (its key's) and state: usage U, demand D, and the running integrals
    (`TenantUsage`'s) with the instant they are up to. Attributes of one native object, not
    entries of a dict each: compiled, a change or a test reads them unboxed, with one lookup."""

    __slots__ = ("key", "nominal", "reserved", "limit", "cohort", "used", "demand",
                 "area_used", "borrowed", "delivered", "entitled", "since", "place")  # fmt: skip

    def __init__(self, key: str, nominal: int, reserved: int, limit: int, cohort: Cohort | None) -> None:
        self.key = key  # the quota's key: its tenant, or `tenant/model`
        self.nominal, self.reserved, self.limit, self.cohort = nominal, reserved, limit, cohort
        self.used = self.demand = 0
        self.place = -1  # where it is in its quota's `Queued` (-1: not there)
        self.area_used = self.borrowed = self.delivered = self.entitled = self.since = 0.0

    def fits(self, gpus: int) -> bool:
        """`_fits` on the quota's own usage: the cohort's kept total, its own term swapped."""
        before = self.used
        after = before + gpus
        cohort = self.cohort
        if cohort is None:
            return after <= self.nominal
        limit = self.limit
        if limit != NO_LIMIT and after - self.nominal > limit:
            return False
        r = self.reserved
        return cohort.total - (before if before > r else r) + (after if after > r else r) <= cohort.capacity

    def set_used(self, after: int) -> None:
        """Usage `after` from now on, the cohort's total with it."""
        cohort = self.cohort
        if cohort is not None:
            before, r = self.used, self.reserved
            cohort.total += (after if after > r else r) - (before if before > r else r)
        self.used = after


class Queued:
    """The pools with a queued job (demand above usage), in no order: a list in which each pool
    knows its place (`Pool.place`), so one joins or leaves with no hashing (a dict's or set's
    insert and delete at nearly every submit and start cost ~450 instructions compiled)."""

    __slots__ = ("pools",)

    def __init__(self) -> None:
        self.pools: list[Pool] = []

    def mark(self, pool: Pool, queued: bool) -> None:
        """`pool` has a queued job (or none) from now on."""
        pools = self.pools
        if queued:
            if pool.place < 0:
                pool.place = len(pools)
                pools.append(pool)
        elif pool.place >= 0:
            last = pools.pop()  # the last takes the leaver's place
            if last is not pool:
                pools[pool.place] = last
                last.place = pool.place
            pool.place = -1


class Held:
    """A view of the pools' usage (`used`: set, as tests do, it keeps the cohorts' totals) or
    demand, read as the dict it used to be: tenants are fixed (a KeyError for any other)."""

    def __init__(self, pools: dict[str, Pool], cohorts: dict[str, Cohort], used: bool) -> None:
        self._pools, self._cohorts, self._used = pools, cohorts, used

    @property
    def totals(self) -> dict[str, int]:
        """Each cohort's sum of max(held, reserved) over its members."""
        return {c: cohort.total for c, cohort in self._cohorts.items()}

    def __getitem__(self, tenant: str) -> int:
        pool = self._pools[tenant]
        return pool.used if self._used else pool.demand

    def __setitem__(self, tenant: str, value: int) -> None:
        pool = self._pools[tenant]  # a KeyError for a tenant of no quota
        if self._used:
            pool.set_used(value)
        else:
            pool.demand = value

    def __len__(self) -> int:
        return len(self._pools)

    def __iter__(self) -> Iterator[str]:
        return iter(self._pools)

    def __contains__(self, tenant: object) -> bool:
        return tenant in self._pools

    def __eq__(self, other: object) -> bool:
        return dict(self.items()) == (dict(other.items()) if isinstance(other, Held) else other)

    def keys(self) -> list[str]:
        return list(self._pools)

    def items(self) -> list[tuple[str, int]]:
        return [(t, self[t]) for t in self._pools]

    def values(self) -> list[int]:
        return [self[t] for t in self._pools]

    def get(self, tenant: str, default: int | None = None) -> int | None:
        return self[tenant] if tenant in self._pools else default

    def update(self, *args: Any, **kwargs: int) -> None:  # as tests set usage: through __setitem__
        for tenant, value in dict(*args, **kwargs).items():
            self[tenant] = value

    # Each its own method: compiled (a native class), a method aliased in the class body fails.
    def __delitem__(self, tenant: str) -> None:
        _fixed()

    def pop(self, *_: Any) -> Any:
        _fixed()

    def popitem(self) -> Any:
        _fixed()

    def setdefault(self, *_: Any) -> Any:
        _fixed()

    def clear(self) -> None:
        _fixed()


def _fixed() -> NoReturn:
    raise TypeError("a quota's tenants are fixed: set their usage, do not add or remove them")
