"""`gputwin slurm apply` as a whole: the accounting part (slurmdbd) and the files (slurmctld).

Order: validate both (names, the files' checks, the live nodes' GPU types against the declared
models), then the accounts and QOS (`accounts.apply_tenancy`: commands, verify, undo on failure)
and the files (`apply.apply`: write, reconfigure, verify, restore on failure), in an order that
depends on PriorityFlags. SLURM 22.05 normalizes an association's shares once, when slurmctld
loads it, by the PriorityFlags of that moment (Fair Tree: per level; NO_FAIR_TREE: across the
tree), and a reconfigure does not normalize again. So when the files change PriorityFlags (a
cluster leaving Fair Tree for the classic factor), the files go first and the accounts are added
under the new flags; otherwise the accounts go first. Nothing in the files names an account or
QOS, so either order is valid for slurmctld. Whichever half fails second, the first is undone
too (files restored and reconfigured, or the accounts' commands inverted), so a failed apply
leaves both the accounting database and the config as they were (within what `accounts` says
rollback can do).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .accounts import (
    AccountsResult,
    LiveAccounts,
    Runner,
    SlurmAccountsError,
    Step,
    apply_tenancy,
    default_runner,
    plan,
    roll_back,
)
from .apply import (
    ApplyResult,
    SlurmApplyError,
    apply,
    client_config,
    default_conf_dir,
    live_config,
    partitions_in,
    read_current,
    reconfigure,
    verify_partitions,
    write_atomic,
)
from .commands import run_command
from .errors import SlurmCommandError, SlurmError, SlurmInputError
from .render import PARTITIONS, SCHEDULING, RenderedConfig

_NODE_GRES = re.compile(r"^NodeName=(\S+).*?\bGres=(\S+)", re.MULTILINE)
_FLAGS = re.compile(r"^PriorityFlags=(\S*)$", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class FullResult:
    files: ApplyResult
    accounts: tuple[Step, ...]
    notes: tuple[str, ...]


def live_gres() -> dict[str, str]:
    """node -> its Gres as slurmctld reports it (``gpu:h100:8``)."""
    out = run_command(["scontrol", "show", "node", "--oneliner"], timeout=30)
    return {m.group(1): m.group(2) for m in _NODE_GRES.finditer(out)}


def check_node_models(rendered: RenderedConfig, gres: dict[str, str]) -> None:
    """Every node that declares a GPU model has that GRES type live (a restart-only setting)."""
    for node, model in rendered.node_models:
        have = gres.get(node, "")
        if not any(item.startswith(f"gpu:{model}:") for item in have.split(",")):
            raise SlurmInputError(
                f"node {node}: declared GPU model {model}, slurmctld reports Gres={have or '(none)'}; "
                f"node GRES need slurm.conf/gres.conf lines (gputwin slurm render shows them) and a restart"
            )


def check_node_shards(rendered: RenderedConfig, gres: dict[str, str]) -> None:
    """Every shared node has its shards live (``shard:COUNT`` in its Gres; a restart-only setting)."""
    for node, count in rendered.node_shards:
        have = gres.get(node, "")
        counts = [item.split("(")[0].rsplit(":", 1)[-1] for item in have.split(",") if item.startswith("shard:")]
        if str(count) not in counts:
            raise SlurmInputError(
                f"node {node}: declared shard:{count} (shardsPerGpu), slurmctld reports Gres={have or '(none)'}; "
                f"node GRES need slurm.conf/gres.conf lines (gputwin slurm render shows them) and a restart"
            )


def cluster_name() -> str:
    return live_config().get("ClusterName", "")


def apply_everything(rendered: RenderedConfig, conf_dir: Path | None = None, *, dry_run: bool = False,
                     runner: Runner = default_runner) -> FullResult:  # fmt: skip
    """Validate, then accounts and files (files first when they change PriorityFlags); any failure
    undoes what this call did."""
    notes = list(rendered.tenancy.notes)
    online = not dry_run or client_config() is not None
    name = ""
    if online:
        try:
            if rendered.node_models or rendered.node_shards:
                gres = live_gres()
                check_node_models(rendered, gres)
                check_node_shards(rendered, gres)
            name = cluster_name() if rendered.tenancy else ""
        except SlurmCommandError as exc:
            if not dry_run:
                raise
            online = False
            notes.append(f"GPU models and accounts not checked against SLURM: {exc}")
    if dry_run:
        files = apply(rendered, conf_dir, dry_run=True)
        steps = _dry_steps(rendered, name if online else "", runner)
        return FullResult(files, steps, (*notes, *files.notes))
    if not rendered.tenancy:
        files = apply(rendered, conf_dir)
        return FullResult(files, (), (*notes, *files.notes))
    if changes_priority_flags(rendered):
        files, accounts = _files_then_accounts(rendered, conf_dir, name, runner)
    else:
        files, accounts = _accounts_then_files(rendered, conf_dir, name, runner)
    return FullResult(files, accounts.steps, (*notes, *files.notes))


def changes_priority_flags(rendered: RenderedConfig) -> bool:
    """The rendered scheduling include sets PriorityFlags to other than what slurmctld reports."""
    found = _FLAGS.search(rendered[SCHEDULING].decode("ascii"))
    return found is not None and live_config().get("PriorityFlags", "") != found.group(1)


def _accounts_then_files(rendered: RenderedConfig, conf_dir: Path | None, name: str,
                         runner: Runner) -> tuple[ApplyResult, AccountsResult]:  # fmt: skip
    accounts = apply_tenancy(rendered.tenancy, name, runner=runner)
    try:
        files = apply(rendered, conf_dir)
    except SlurmApplyError as exc:
        if accounts.applied:
            roll_back(accounts.steps, exc, runner)
        raise
    return files, accounts


def _files_then_accounts(rendered: RenderedConfig, conf_dir: Path | None, name: str,
                         runner: Runner) -> tuple[ApplyResult, AccountsResult]:  # fmt: skip
    """Files (new PriorityFlags live) first, so slurmctld normalizes the new shares under them."""
    folder = Path(conf_dir) if conf_dir is not None else default_conf_dir()
    old = read_current(folder, rendered)
    files = apply(rendered, folder)
    try:
        accounts = apply_tenancy(rendered.tenancy, name, runner=runner)
    except SlurmError as exc:  # not SlurmAccountsError: failed before any command ran
        undone = exc.restored if isinstance(exc, SlurmAccountsError) else True
        back, how = _restore_files(folder, old)
        raise SlurmAccountsError(f"{' '.join(str(exc).split())}; {how}", restored=undone and back) from exc
    return files, accounts


def _restore_files(folder: Path, old: dict[str, bytes | None]) -> tuple[bool, str]:
    """Put the files back as they were before this call and reconfigure; whether that worked, and how."""
    for file, data in old.items():
        if data is None:
            (folder / file).unlink(missing_ok=True)
        else:
            write_atomic(folder / file, data)
    try:
        reconfigure()
        verify_partitions(partitions_in(old.get(PARTITIONS)))
    except SlurmError as again:
        return False, (f"the previous files were restored but the controller did not come back on them "
                       f"({' '.join(str(again).split())}): check slurmctld's log and restart it")  # fmt: skip
    return True, "files rolled back: previous config restored and live"


def _dry_steps(rendered: RenderedConfig, name: str, runner: Runner) -> tuple[Step, ...]:
    """The commands a real apply would run: against the live database, or (offline) all of them."""
    if not rendered.tenancy:
        return ()
    if name:
        return apply_tenancy(rendered.tenancy, name, dry_run=True, runner=runner).steps
    return plan(rendered.tenancy, LiveAccounts(), "CLUSTER_NAME")  # offline: the placeholder


__all__ = ["FullResult", "SlurmError", "apply_everything", "changes_priority_flags", "check_node_models", "check_node_shards",
           "live_gres"]  # fmt: skip
