"""`gputwin slurm apply` as a whole: the accounting part (slurmdbd) and the files (slurmctld).

Order: validate both (names, the files' checks, the live nodes' GPU types against the declared
models), then the accounts and QOS (`accounts.apply_tenancy`: commands, verify, undo on failure),
then the files (`apply.apply`: write, reconfigure, verify, restore on failure). When the files fail
after the accounts went in, the accounts' commands are undone too, so a failed apply leaves both
the accounting database and the config as they were (within what `accounts` says rollback can do).
Accounts go first because the files' new fair-share weight only makes sense once the shares exist.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .accounts import AccountsResult, LiveAccounts, Runner, Step, apply_tenancy, default_runner, plan, roll_back
from .apply import ApplyResult, SlurmApplyError, apply, client_config, live_config
from .commands import run_command
from .errors import SlurmCommandError, SlurmError, SlurmInputError
from .render import RenderedConfig

_NODE_GRES = re.compile(r"^NodeName=(\S+).*?\bGres=(\S+)", re.MULTILINE)


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


def cluster_name() -> str:
    return live_config().get("ClusterName", "")


def apply_everything(rendered: RenderedConfig, conf_dir: Path | None = None, *, dry_run: bool = False,
                     runner: Runner = default_runner) -> FullResult:  # fmt: skip
    """Validate, then accounts, then files; any failure undoes what this call did."""
    notes = list(rendered.tenancy.notes)
    online = not dry_run or client_config() is not None
    name = ""
    if online:
        try:
            if rendered.node_models:
                check_node_models(rendered, live_gres())
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
    accounts = apply_tenancy(rendered.tenancy, name, runner=runner) if rendered.tenancy else AccountsResult((), False)
    try:
        files = apply(rendered, conf_dir)
    except SlurmApplyError as exc:
        if accounts.applied:
            roll_back(accounts.steps, exc, runner)
        raise
    return FullResult(files, accounts.steps, (*notes, *files.notes))


def _dry_steps(rendered: RenderedConfig, name: str, runner: Runner) -> tuple[Step, ...]:
    """The commands a real apply would run: against the live database, or (offline) all of them."""
    if not rendered.tenancy:
        return ()
    if name:
        return apply_tenancy(rendered.tenancy, name, dry_run=True, runner=runner).steps
    return plan(rendered.tenancy, LiveAccounts(), "CLUSTER_NAME")  # offline: the placeholder


__all__ = ["FullResult", "SlurmError", "apply_everything", "check_node_models", "live_gres"]
