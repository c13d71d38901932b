"""Fairness among tenants: the leading sort key of a partition's queue (docs/tenancy.md).

A SchedulingPolicy's `fairness` orders tenants; the queue policy's key orders the jobs of one
tenant (and of tenants whose fairness keys tie), and the job's order breaks ties, so a job's
full key is `(tenant key, *policy key)` then its order. Tenant keys move with usage and time, so
`gputwin.core.fairqueue` keeps one sorted queue per tenant and merges them by tenant key when
read (the project's loops read it like the one sorted queue they always read).

* `fairshare`: decayed usage over weight, U_t / w_t. U_t is the GPU-seconds t's jobs ran, each
  second weighed 2^(-age / half-life) (SLURM's PriorityDecayHalfLife). SLURM's classic factor is
  F = 2^(-(U_t / U_all) / (w_t / w_all)); at one instant U_all and w_all are common to every
  tenant, so F orders tenants exactly as U_t / w_t does (lower goes first), without the totals.
* `drf`: dominant share over weight. Jobs carry GPUs only (JobSpec has no CPUs), so a tenant's
  dominant share is the GPUs it holds over the partition's GPUs: weighted max-min on GPUs.

Pure: time is always an argument (`at(now)` sets the instant keys are read at).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Callable, Final, Mapping

from gputwin.core.bounds import MAX_DURATION_SECONDS

if TYPE_CHECKING:
    from gputwin.core.state import JobState

FAIRNESS = ("none", "drf", "fairshare")
DEFAULT_HALF_LIFE = 7 * 24 * 3600.0  # SLURM's PriorityDecayHalfLife default, 7-0
MAX_WEIGHT = 1e6
# fairshare's epoch moves every 64 half-lives: G stays below 2**64 (Final: compiled, a C static, not a
# look-up in the module's dict at every instant and change)
REBASE: Final = 64 * math.log(2.0)


def fairness_problem(mode: str, half_life: float, weights: Mapping[str, float]) -> str | None:
    """Why these fairness settings are not usable (FIELD: reason), or None."""
    if mode not in FAIRNESS:
        return f"fairness: expected one of {', '.join(FAIRNESS)}, got {mode!r}"
    if not (math.isfinite(half_life) and 0.0 < half_life <= MAX_DURATION_SECONDS):
        return f"halfLifeSeconds: expected a number of seconds > 0 and at most {MAX_DURATION_SECONDS}, got {half_life}"
    for tenant, weight in sorted(weights.items()):
        if not (math.isfinite(weight) and 0.0 < weight <= MAX_WEIGHT):
            return f"weights.{tenant}: expected a number > 0 and at most {MAX_WEIGHT:.0f}, got {weight}"
    return None


class TenantState:
    """One tenant's GPUs held and (fairshare) decayed usage as U * G with G and the instant of its
    last change, its weight, and its key as last read: a native object's attributes, compiled unboxed."""

    __slots__ = ("held", "tracked", "value", "grown", "since", "key", "stamp", "weight")

    def __init__(self, weight: float = 1.0) -> None:
        self.weight = weight  # the Fairness's weight of the tenant (its key reads it with no dict look-up)
        self.held = 0
        self.tracked = False  # fairshare: usage kept since its first change
        self.value, self.grown, self.since = 0.0, 1.0, 0.0
        self.key, self.stamp = 0.0, -1  # the key, valid while `stamp` is the Fairness's


class Fairness:
    """Each tenant's usage in one partition, and its fairness key at the current instant."""

    def __init__(self, mode: str, total_gpus: int, half_life: float = DEFAULT_HALF_LIFE,
                 weights: Mapping[str, float] | None = None,
                 tenant_of: Callable[[JobState], str] | None = None) -> None:  # fmt: skip
        problem = fairness_problem(mode, half_life, weights or {})
        if problem or mode == "none":
            raise ValueError(problem or "fairness none needs no Fairness")
        self.mode = mode
        self._fairshare = mode == "fairshare"
        self.total = max(total_gpus, 1)
        self.rate = math.log(2.0) / half_life  # decay per second
        self.weights = dict(weights or {})
        self.tenant_of: Callable[[JobState], str] = tenant_of or (lambda job: job.spec.user)
        # Per tenant (`TenantState`): GPUs held, and under fairshare U(since) * G(since), G(since) and
        # since, U the decayed usage and G(t) = exp(rate * (t - epoch)) a growth shared by every
        # tenant: U * G grows by the GPUs held times (G(t) - G(since)) / rate, so a change costs
        # no exp of its own, only one G per instant (`_grown`). The epoch moves on (`_rebase`)
        # before G could overflow.
        self._tenants: dict[str, TenantState] = {}
        self._epoch = 0.0
        self._grown_at, self._grown_g = 0.0, 1.0  # G at one instant, reused until it moves
        self.now = 0.0
        # Keys read at `now`, reused until it moves: the queue head is asked for once per start,
        # each time over every tenant. Usage is continuous, so a change at `now` leaves a fairshare
        # key at `now` as it was; a drf key moves with the GPUs held, so a change drops it. A
        # tenant's key is valid while its stamp is `_stamp`, which moves with the instant read.
        self._stamp = 0
        self._keys_at = 0.0
        self.version = 0  # moves whenever a key may have: a FairQueue's tenant ranking is cached on it

    @property
    def held(self) -> dict[str, int]:
        """GPUs each tenant holds (a copy)."""
        return {t: state.held for t, state in self._tenants.items()}

    def _of(self, tenant: str) -> TenantState:
        state = self._tenants.get(tenant)
        if state is None:
            state = self._tenants[tenant] = TenantState(self.weights.get(tenant, 1.0))
        return state

    def weigh(self, weights: Mapping[str, float]) -> None:
        """Set these tenants' weights (as `weights` once built: before any key is read)."""
        self.weights.update(weights)
        for tenant, state in self._tenants.items():
            state.weight, state.stamp = self.weights.get(tenant, 1.0), -1
        self.version += 1

    def at(self, now: float) -> None:
        if now != self.now:
            if self.rate * (now - self._epoch) > REBASE:
                self._rebase(now)
            self.now = now
            self.version += 1

    def change(self, now: float, job: JobState, gpus: int, tenant: str = "") -> None:
        """`job`'s tenant (`tenant` if the caller knows it) holds `gpus` more GPUs (fewer if
        negative) from `now` on."""
        state = self._of(tenant or self.tenant_of(job))
        if self._fairshare:
            if self.rate * (now - self._epoch) > REBASE:
                self._rebase(now)
            g = self._grown_g if now == self._grown_at else self._grown(now)  # `_grown`, its usual case inlined
            if not state.tracked:
                state.tracked, state.value, state.grown, state.since = True, 0.0, g, now
            elif g > state.grown:  # time went by: U * G up to now (as `usage` reads it, to the bit)
                state.value += state.held * (g - state.grown) / self.rate
                state.grown, state.since = g, now
        state.held += gpus
        if now == self.now and self._fairshare:
            return  # usage is continuous: every key at `now` is as it was, to the bit (ranking too)
        self.now = max(self.now, now)
        state.stamp = -1
        self.version += 1

    def usage(self, tenant: str, now: float) -> float:
        """Decayed GPU-seconds of `tenant` at `now`: U' = g - rate * U between changes."""
        state = self._tenants.get(tenant)
        if state is None or not state.tracked:
            return 0.0
        return self._usage_of(state, now)

    def _usage_of(self, state: TenantState, now: float) -> float:
        """`usage` of a tenant with usage kept."""
        if self.rate * (now - self._epoch) > REBASE:
            return self._decayed(state, now)  # far past the epoch: asked, not rebased (a read)
        value, grown = state.value, state.grown
        g = self._grown(now)
        if g <= grown:
            return value / grown  # no time since its last change (or asked of an earlier instant)
        return (value + state.held * (g - grown) / self.rate) / g

    def _grown(self, now: float) -> float:
        """G(now): one exp per instant for every tenant (a change or key read costs none)."""
        if now != self._grown_at:
            self._grown_at, self._grown_g = now, math.exp(self.rate * (now - self._epoch))
        return self._grown_g

    def _decayed(self, state: TenantState, now: float) -> float:
        """U(now) by the exponential itself, from the tenant's last change (any span: no G)."""
        keep = math.exp(-self.rate * max(0.0, now - state.since))
        return state.value / state.grown * keep + state.held * (1.0 - keep) / self.rate

    def _rebase(self, now: float) -> None:
        """Move the epoch to `now` before G overflows: each tenant's U(now) with G(now) = 1."""
        for state in self._tenants.values():
            if state.tracked:
                state.value, state.grown, state.since = self._decayed(state, now), 1.0, now
        self._epoch, self._grown_at, self._grown_g = now, now, 1.0
        self._stamp += 1
        self.version += 1

    def key(self, tenant: str) -> float:
        """The tenant's fairness key now: lower goes first."""
        self.fresh()
        return self.key_of(tenant, self._of(tenant))

    def state_of(self, tenant: str) -> TenantState:
        """`tenant`'s state, kept for good: a FairQueue reads its key from it, with no look-up."""
        return self._of(tenant)

    def fresh(self) -> int:
        """The stamp of the keys read at `now` (it moves with the instant): a key of a state with
        this stamp is `state.key`, else `key_of`'s."""
        if self._keys_at != self.now:
            self._stamp += 1
            self._keys_at = self.now
        return self._stamp

    def key_of(self, tenant: str, state: TenantState) -> float:
        """`tenant`'s key now (`state` its own), worked out once per instant and kept (`fresh`
        called at this instant first)."""
        if state.stamp == self._stamp:
            return state.key
        weight = state.weight
        if not self._fairshare:
            key = state.held / self.total / weight
        elif state.tracked:
            key = self._usage_of(state, self.now) / weight
        else:
            key = 0.0  # no usage yet
        state.key, state.stamp = key, self._stamp
        return key
