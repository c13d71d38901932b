"""Tenancy out: a cluster's tenants (docs/tenancy.md) as SLURM accounts, QOS and priority settings.

Pure: no command runs here (`accounts` plans, applies and verifies them). SLURM keeps accounts, users
and QOS in slurmdbd, not in slurm.conf, so a `Tenancy` is data that `accounts.plan` turns into
``sacctmgr -i`` argument vectors against what the database already holds.

Mapping (Kueue-style quota -> SLURM 22.05), per partition P and tenant t with guarantee N,
borrowing limit B, lending limit L (of each cohort member s):

- the tenant is an **account** ``t`` (child of root), ``Fairshare=`` its fair-share weight;
- a per-model quota (``gpus: {a100: 16}``) adds SLURM's typed ``gres/gpu:a100=C_a100`` to the QOS's
  GrpTRES, C_m worked out per model as below from that model's guarantees, and ``gres/gpu`` is the
  sum of every cap; typed limits count only TRES named in ``AccountingStorageTRES`` (`render_nodes`);
- one **QOS** ``t.P`` with ``GrpTRES=gres/gpu=C``: C = N outside a cohort; in a cohort
  C = N + min(B, sum over the other members s of L_s, or N_s without a lending limit) — the most
  t could ever hold in gputwin. SLURM has no borrowing: a QOS is a cap, not a guarantee, so the
  members' caps add up to more than the partition and an idle guarantee is not kept for its owner;
  there is no reclaim (QOS preemption is by priority, not ownership), and the cohort-wide rule
  (members' usage within the sum of guarantees, N - L kept while idle) is not enforced;
- each listed user gets an association (user, t, P) with ``QOS=t.P`` and ``DefaultQOS=t.P``, so a
  job of that user under account t in partition P counts against t's QOS; ``"*"`` (every other
  user) cannot be listed in slurmdbd: the account is created and the note says so.

Names: SLURM lowercases account and QOS names, so tenants must be lower-case here (verification
would otherwise never match). Every name passes `checks.check_name` before it reaches an argument.
"""

from __future__ import annotations

from dataclasses import dataclass

from gputwin.core.model import ClusterSpec, PartitionSpec, QuotaSpec

from .checks import check_name
from .errors import SlurmInputError

ANY_USER = "*"
FAIRSHARE_WEIGHT = 10000  # PriorityWeightFairshare when a policy asks for fairshare (others stay 0)
SHARE_SCALE = 100  # fractional weights become integer shares x100 (Fairshare= takes integers)


@dataclass(frozen=True, slots=True)
class Qos:
    name: str
    gpus: int  # GrpTRES=gres/gpu=gpus
    models: tuple[tuple[str, int], ...] = ()  # per-model quotas: GrpTRES=...,gres/gpu:MODEL=N, by model

    @property
    def tres(self) -> str:
        """The GrpTRES value: ``gres/gpu=N`` and, per model, SLURM's typed ``gres/gpu:MODEL=N``."""
        return ",".join([f"gres/gpu={self.gpus}", *(f"gres/gpu:{m}={n}" for m, n in self.models)])


@dataclass(frozen=True, slots=True)
class Account:
    name: str
    shares: int  # Fairshare=


@dataclass(frozen=True, slots=True)
class UserAssoc:
    user: str
    account: str
    partition: str
    qos: str


@dataclass(frozen=True, slots=True)
class Tenancy:
    """What slurmdbd must hold for the cluster's quotas; empty when no partition declares any."""

    qos: tuple[Qos, ...] = ()
    accounts: tuple[Account, ...] = ()
    users: tuple[UserAssoc, ...] = ()
    notes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.accounts)


def qos_name(tenant: str, partition: str) -> str:
    return check_name(f"{tenant}.{partition}", "QOS name (tenant.partition)")


def render_tenancy(cluster: ClusterSpec) -> Tenancy:
    """Accounts, QOS and user associations for every partition's quotas (checked, deterministic)."""
    shares = tenant_shares(cluster)
    qos: dict[str, Qos] = {}
    users: list[UserAssoc] = []
    notes: list[str] = []
    for part in cluster.partitions:
        check_name(part.name, "partition name")
        for quota in part.quotas:
            account = _account_name(quota.tenant)
            name = qos_name(account, part.name)
            if name in qos:
                raise SlurmInputError(f"partition {part.name}: QOS name {name!r} is taken twice (rename a tenant)")
            models = tuple((check_name(m, "GPU model"), grp_gpus(part, quota, m)) for m in sorted(quota.models))
            qos[name] = Qos(name, grp_gpus(part, quota) + sum(n for _, n in models), models)
            for user in quota.users or (quota.tenant,):
                if user == ANY_USER:
                    notes.append(f"partition {part.name}: tenant {account}'s \"*\" (every other user) cannot be "
                                 f"listed in slurmdbd; add those users to account {account} yourself")  # fmt: skip
                    continue
                users.append(UserAssoc(check_name(user, f"tenant {account} user"), account, part.name, name))
    names = dict.fromkeys(q.tenant for p in cluster.partitions for q in p.quotas)  # first-seen order
    accounts = tuple(Account(name, shares.get(name, 1)) for name in names)
    return Tenancy(tuple(qos.values()), accounts, tuple(users), (*notes, *tenancy_notes(cluster)))


def _account_name(tenant: str) -> str:
    check_name(tenant, "tenant (account) name")
    if tenant != tenant.lower():
        raise SlurmInputError(f"tenant {tenant!r:.80}: SLURM lowercases account and QOS names; use lower case")
    return tenant


def grp_gpus(part: PartitionSpec, quota: QuotaSpec, model: str = "") -> int:
    """The QOS cap: the most GPUs the tenant may ever hold in the partition (see the docstring), of
    `model` for a per-model quota ("": its quota of any model), borrowed from that model's quotas."""

    def own(q: QuotaSpec) -> int:
        return q.models.get(model, 0) if model else q.gpus

    if quota.cohort is None:
        return own(quota)
    lendable = sum(
        own(q) if q.lending_limit is None else min(own(q), q.lending_limit)
        for q in part.quotas
        if q.cohort == quota.cohort and q.tenant != quota.tenant
    )
    borrow = lendable if quota.borrowing_limit is None else min(quota.borrowing_limit, lendable)
    return own(quota) + borrow


def accounting_tres(cluster: ClusterSpec) -> str | None:
    """``AccountingStorageTRES`` for typed GPU limits (``gres/gpu,gres/gpu:a100,...``): slurmdbd
    tracks, and a QOS limits, only the TRES listed there; None when no quota is per model."""
    models = sorted({m for p in cluster.partitions for q in p.quotas for m in q.models})
    return ",".join(["gres/gpu", *(f"gres/gpu:{check_name(m, 'GPU model')}" for m in models)]) if models else None


def tenant_shares(cluster: ClusterSpec) -> dict[str, int]:
    """Fairshare= shares per tenant from the fairshare policies' weights (SLURM's are cluster-wide:
    a tenant weighed differently in two partitions is refused). Integers as given, else x100."""
    weights: dict[str, float] = {}
    for part in cluster.partitions:
        if part.policy.fairness != "fairshare":
            continue
        for tenant in (q.tenant for q in part.quotas):
            weight = float(part.policy.weights.get(tenant, 1.0))
            if weights.setdefault(tenant, weight) != weight:
                raise SlurmInputError(f"tenant {tenant}: fair-share weights differ between partitions "
                                      "(SLURM's account shares are cluster-wide)")  # fmt: skip
    scale = 1 if all(w.is_integer() for w in weights.values()) else SHARE_SCALE
    return {t: max(1, round(w * scale)) for t, w in weights.items()}


# --- slurm.conf parts: priority (node GRES: render_gres) -----------------------------------------------------


def fairshare_half_life(cluster: ClusterSpec) -> float | None:
    """The half-life (s) of the fairshare partitions, None when none asks for fairshare; SLURM has
    one cluster-wide ``PriorityDecayHalfLife``, so two different ones are refused."""
    lives = {p.policy.half_life for p in cluster.partitions if p.policy.fairness == "fairshare"}
    if len(lives) > 1:
        raise SlurmInputError(f"fairness halfLifeSeconds differ between partitions ({sorted(lives)}): "
                              "SLURM has one PriorityDecayHalfLife")  # fmt: skip
    return lives.pop() if lives else None


def slurm_duration(seconds: float) -> str:
    """`seconds` as `scontrol show config` prints a PriorityDecayHalfLife: [D-]HH:MM:SS, whole
    minutes (slurm.conf reads the half-life in minutes; at least one)."""
    minutes = max(1, round(seconds / 60))
    days, rest = divmod(minutes, 24 * 60)
    clock = f"{rest // 60:02d}:{rest % 60:02d}:00"
    return f"{days}-{clock}" if days else clock


def priority_lines(cluster: ClusterSpec) -> list[str]:
    """``PriorityWeightFairshare`` and ``PriorityDecayHalfLife`` for the scheduling include."""
    half_life = fairshare_half_life(cluster)
    if half_life is None:
        return ["PriorityWeightFairshare=0\n"]
    return [
        "# fairness: fairshare -> the account shares (Fairshare=) order tenants, usage halved every\n",
        "# PriorityDecayHalfLife; age and size stay 0 so within a tenant the queue policy orders.\n",
        f"PriorityWeightFairshare={FAIRSHARE_WEIGHT}\n",
        "# Classic fair share, F = 2^(-(U/U_all)/(S/S_all)), the factor gputwin's fairshare orders by\n",
        "# (22.05's default Fair Tree ranks accounts instead); replaces a site's PriorityFlags.\n",
        "PriorityFlags=NO_FAIR_TREE\n",
        f"PriorityDecayHalfLife={slurm_duration(half_life)}\n",
    ]


def tenancy_notes(cluster: ClusterSpec) -> list[str]:
    """What the rendered SLURM config cannot do that the cluster's policies ask for."""
    notes = []
    half_life = fairshare_half_life(cluster)
    if half_life is not None and half_life % 60:
        notes.append(f"PriorityDecayHalfLife is in minutes: {half_life:g} s rendered as {slurm_duration(half_life)}")
    for part in cluster.partitions:
        if part.policy.fairness == "drf":
            notes.append(f"partition {part.name}: fairness drf has no SLURM equivalent; no fair share rendered")
        if part.policy.fairness == "fairshare" and part.policy.queue not in ("fifo",):
            notes.append(f"partition {part.name}: job_submit.lua sets explicit {part.policy.queue} priorities, "
                         "which SLURM puts ahead of the fair-share factor")  # fmt: skip
        if any(q.models for q in part.quotas):
            notes.append(f"partition {part.name}: per-model quotas are typed GrpTRES (gres/gpu:MODEL=N); a job "
                         "asking for untyped gpu counts against gres/gpu only, so it may take any model's GPUs "
                         "up to the QOS's gres/gpu (all its models' caps together)")  # fmt: skip
        if any(q.cohort for q in part.quotas):
            notes.append(f"partition {part.name}: SLURM 22.05 cannot lend or reclaim between accounts; each "
                         "tenant's QOS caps it at guarantee + what it may borrow (docs/tenancy.md)")  # fmt: skip
    return notes
