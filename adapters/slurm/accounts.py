"""Apply a `Tenancy` to slurmdbd with ``sacctmgr``: plan, run, verify, or undo what was done.

`plan` compares the wanted accounts, QOS and user associations with what ``sacctmgr show -P``
reports and returns only the ``sacctmgr -i`` argument vectors that close the gap (add what is
missing, modify what differs; nothing it did not create is deleted), so planning again after a
successful apply gives no command: that is how `apply_tenancy` verifies. Each command is paired
with its inverse (add -> delete, modify -> modify back to the value read before), and on any
failure the inverses of the commands that ran are run in reverse order.

What rollback cannot undo: slurmdbd keeps deleted records (flagged deleted, with their ids and
any usage recorded meanwhile), a user created here keeps no DefaultAccount history, and a job
submitted in between under a new association makes its delete fail (``Job(s) active``): then the
error says the rollback was partial and which commands are left. sacctmgr commits each command on
its own (there is no transaction across commands), so "atomic" is this undo list.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .checks import check_name
from .commands import run_command
from .errors import SlurmError
from .render_tenancy import Qos, Tenancy

Argv = tuple[str, ...]
Runner = Callable[[Sequence[str]], str]
SACCTMGR = ("sacctmgr", "-i")
TIMEOUT = 30.0
_GPUS = re.compile(r"(?:^|,)gres/gpu=(\d+)(?:,|$)")
_TYPED = re.compile(r"(?:^|,)gres/gpu:([A-Za-z0-9._-]+)=(\d+)(?=,|$)")


class SlurmAccountsError(SlurmError):
    """Applying accounts/QOS failed; the message says what failed and what rollback did."""

    def __init__(self, message: str, *, restored: bool) -> None:
        super().__init__(message)
        self.restored = restored


@dataclass(frozen=True, slots=True)
class LiveAccounts:
    """What slurmdbd holds, as far as a `Tenancy` cares."""

    qos: dict[str, int | None] = field(default_factory=dict)  # name -> GrpTRES gres/gpu (None: unset)
    typed: dict[str, tuple[tuple[str, int], ...]] = field(default_factory=dict)  # name -> gres/gpu:MODEL caps
    shares: dict[str, str] = field(default_factory=dict)  # account -> Share column
    users: dict[tuple[str, str, str], tuple[str, str]] = field(default_factory=dict)  # (user, account, partition) -> (QOS, DefaultQOS)


@dataclass(frozen=True, slots=True)
class Step:
    """One sacctmgr command and the one that undoes it."""

    argv: Argv
    undo: Argv


def default_runner(argv: Sequence[str]) -> str:
    return run_command(argv, timeout=TIMEOUT)


def read_live(cluster: str, runner: Runner = default_runner) -> LiveAccounts:
    """``sacctmgr show qos`` and ``show assoc`` (``-n -P``) of `cluster`."""
    qos: dict[str, int | None] = {}
    typed: dict[str, tuple[tuple[str, int], ...]] = {}
    for line in runner(["sacctmgr", "-n", "-P", "show", "qos", "format=Name,GrpTRES"]).splitlines():
        name, _, tres = line.partition("|")
        found = _GPUS.search(tres)
        qos[name] = int(found.group(1)) if found else None
        typed[name] = tuple(sorted((m, int(n)) for m, n in _TYPED.findall(tres)))
    live = LiveAccounts(qos, typed)
    out = runner(["sacctmgr", "-n", "-P", "show", "assoc", f"cluster={cluster}",
                  "format=Account,User,Partition,Share,QOS,DefaultQOS"])  # fmt: skip
    for line in out.splitlines():
        cells = line.split("|")
        if len(cells) != 6:
            raise SlurmError(f"sacctmgr show assoc: unreadable line {line!r:.80}")
        account, user, partition, share, qos_list, default = cells
        if not user:
            live.shares[account] = share
        else:
            live.users[(user, account, partition)] = (qos_list, default)
    return live


def plan(tenancy: Tenancy, live: LiveAccounts, cluster: str) -> tuple[Step, ...]:
    """The commands that make slurmdbd hold `tenancy` (none when it already does)."""
    check_name(cluster, "cluster name")
    steps: list[Step] = []
    for qos in tenancy.qos:
        # A typed cap slurmdbd holds that the quota no longer names is cleared (-1).
        stale = sorted({m for m, _ in live.typed.get(qos.name, ())} - {m for m, _ in qos.models})
        tres = ",".join([f"GrpTRES={qos.tres}", *(f"gres/gpu:{m}=-1" for m in stale)])
        if qos.name not in live.qos:
            steps.append(Step((*SACCTMGR, "add", "qos", qos.name, tres), (*SACCTMGR, "delete", "qos", f"name={qos.name}")))
        elif live.qos[qos.name] != qos.gpus or live.typed.get(qos.name, ()) != qos.models:
            steps.append(Step(_modify("qos", [f"name={qos.name}"], tres),
                              _modify("qos", [f"name={qos.name}"], _tres_back(qos, live))))  # fmt: skip
    for account in tenancy.accounts:
        where = [f"name={account.name}", f"cluster={cluster}"]
        share = f"Fairshare={account.shares}"
        if account.name not in live.shares:
            steps.append(Step((*SACCTMGR, "add", "account", account.name, f"Cluster={cluster}", share,
                               "Description=gputwin-tenant", "Organization=gputwin"),
                              (*SACCTMGR, "delete", "account", *where)))  # fmt: skip
        elif live.shares[account.name] != str(account.shares):
            back = f"Fairshare={live.shares[account.name] or 1}"
            steps.append(Step(_modify("account", where, share), _modify("account", where, back)))
    for assoc in tenancy.users:
        key = (assoc.user, assoc.account, assoc.partition)
        where = [f"name={assoc.user}", f"account={assoc.account}", f"partition={assoc.partition}", f"cluster={cluster}"]
        want = (f"QOS={assoc.qos}", f"DefaultQOS={assoc.qos}")
        if key not in live.users:
            steps.append(Step((*SACCTMGR, "add", "user", assoc.user, f"Account={assoc.account}",
                               f"Partition={assoc.partition}", f"Cluster={cluster}", *want),
                              (*SACCTMGR, "delete", "user", *where)))  # fmt: skip
        elif live.users[key] != (assoc.qos, assoc.qos):
            old_qos, old_default = live.users[key]
            undo = (f"QOS={old_qos}", f"DefaultQOS={old_default or -1}")
            steps.append(Step(_modify("user", where, *want), _modify("user", where, *undo)))
    return tuple(steps)


def _tres_back(qos: Qos, live: LiveAccounts) -> str:
    """The GrpTRES setting that restores what slurmdbd held: -1 clears a limit it did not have."""
    old, typed = live.qos[qos.name], dict(live.typed.get(qos.name, ()))
    models = sorted(set(typed) | {m for m, _ in qos.models})
    return "GrpTRES=" + ",".join([f"gres/gpu={-1 if old is None else old}",
                                  *(f"gres/gpu:{m}={typed.get(m, -1)}" for m in models)])  # fmt: skip


def _modify(entity: str, where: list[str], *settings: str) -> Argv:
    return (*SACCTMGR, "modify", entity, "where", *where, "set", *settings)


def commands_text(steps: Sequence[Step]) -> str:
    """The commands as a shell would show them (display only: they run as argument lists)."""
    return "".join(shlex.join(step.argv) + "\n" for step in steps)


@dataclass(frozen=True, slots=True)
class AccountsResult:
    steps: tuple[Step, ...]
    applied: bool


def apply_tenancy(tenancy: Tenancy, cluster: str, *, dry_run: bool = False,
                  runner: Runner = default_runner) -> AccountsResult:  # fmt: skip
    """Plan against the live database; unless `dry_run`, run the plan, verify (planning again gives
    nothing) and, on any failure, undo the commands that ran (`SlurmAccountsError`)."""
    steps = plan(tenancy, read_live(cluster, runner), cluster)
    if dry_run or not steps:
        return AccountsResult(steps, False)
    done: list[Step] = []
    try:
        for step in steps:
            runner(step.argv)
            done.append(step)
        left = plan(tenancy, read_live(cluster, runner), cluster)
        if left:
            raise SlurmError(f"sacctmgr show still differs after apply: {shlex.join(left[0].argv)}")
    except SlurmError as exc:
        roll_back(done, exc, runner)
    return AccountsResult(steps, True)


def roll_back(done: Sequence[Step], cause: Exception, runner: Runner = default_runner) -> None:
    """Run the inverses of `done`, last first; always raises `SlurmAccountsError`."""
    what = " ".join(str(cause).split())
    failed: list[str] = []
    for step in reversed(done):
        try:
            runner(step.undo)
        except SlurmError as again:
            failed.append(f"{shlex.join(step.undo)} ({' '.join(str(again).split())})")
    if failed:
        raise SlurmAccountsError(f"accounts apply failed ({what}); rollback partial, left to undo: "
                                 + "; ".join(failed), restored=False) from cause  # fmt: skip
    raise SlurmAccountsError(
        f"accounts apply failed ({what}); rolled back: {len(done)} sacctmgr command(s) undone", restored=True
    ) from cause
