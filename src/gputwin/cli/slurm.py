"""`gputwin slurm …`: the SLURM backend's commands: history, render, apply.

Errors a user can meet (a refused partition name, sacct failing, unreadable output) end the
command with one `error: …` line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from gputwin.adapters.slurm import (
    SlurmCommandError,
    SlurmError,
    SlurmInputError,
    pyslurm_status,
    sacct_history,
    slurm_version,
    write_history,
)
from gputwin.adapters.slurm.accounts import LiveAccounts, Step, commands_text, plan
from gputwin.adapters.slurm.apply import DEFAULT_SLURM_CONF, client_config
from gputwin.adapters.slurm.apply_all import apply_everything
from gputwin.adapters.slurm.render import NODES, SUPPORTED_VERSIONS, LuaTables, RenderedConfig, render
from gputwin.adapters.slurm.rest import ENV as REST_ENV
from gputwin.adapters.slurm.tables import tables_from_sacct, tables_from_trace
from gputwin.adapters.traces import FORMATS, TraceError
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError, Problem
from gputwin.core.model import ClusterSpec
from gputwin.cli.errors import report
from gputwin.errors import InputError

DEFAULT_VERSION = "22.05"
USER_ERRORS = (SlurmError, TraceError, OSError, ClusterError, InputError)


class SlurmGroup(click.Group):
    """Turns a user's mistake into one clear line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            report(exc)
            ctx.exit(2)


@click.group(cls=SlurmGroup)
def slurm() -> None:
    """SLURM (SLURM_CONF selects the cluster): read job history, compile policies, apply them safely."""


def _split(values: tuple[str, ...]) -> list[str] | None:
    """Repeated options and comma-separated values alike; None when none were given."""
    if not values:
        return None
    return [item for value in values for item in value.split(",")]


@slurm.command()
@click.option(
    "--start", required=True, help="Window start, UTC: YYYY-MM-DD[THH:MM[:SS]] or now-N[hours|days|…]."
)
@click.option("--end", default="now", show_default=True, help="Window end, same forms as --start.")
@click.option(
    "--partition", "partitions", multiple=True, help="Only these partitions (repeat or comma-separate)."
)
@click.option("--job-state", "states", multiple=True,
              help="Only jobs in these states, e.g. COMPLETED,FAILED (sacct's --state; not named --state, "
                   "which is the emulator's state folder elsewhere).")  # fmt: skip
@click.option("--json-transport", is_flag=True, help="Read `sacct --json` instead of `sacct -P`.")
@click.option("--rest-transport", is_flag=True,
              help="Read slurmrestd's /slurmdb/v0.0.NN/jobs on $GPUTWIN_SLURMRESTD (unix:PATH) instead.")  # fmt: skip
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the jobs as a trace file (Helios CSV) for `gputwin simulate --trace`.",
)
@click.option("--skip-invalid", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
def history(start: str, end: str, partitions: tuple[str, ...], states: tuple[str, ...], json_transport: bool,
            rest_transport: bool, out_path: Path | None, skip_invalid: bool) -> None:  # fmt: skip
    """Read job history from sacct and print a JSON summary (jobs, skipped records by reason)."""
    if json_transport and rest_transport:
        raise SlurmInputError("--json-transport and --rest-transport: pick one transport")
    transport = "json" if json_transport else "rest" if rest_transport else "cli"
    result = sacct_history(
        start, end, _split(partitions), _split(states), transport, skip_invalid=skip_invalid
    )
    summary: dict[str, object] = {**result.summary(), "transport": transport, "origin": result.origin}
    if out_path is not None:
        write_history(result, out_path)
        summary["out"] = str(out_path)
    click.echo(json.dumps(summary, sort_keys=True))


@slurm.command()
def transports() -> None:
    """Say which history transports work here (sacct CLI, JSON; pyslurm and why not)."""
    click.echo("sacct -P: always (the default transport)")
    click.echo("sacct --json: --json-transport (SLURM 22.05 and 24.11 layouts)")
    address = os.environ.get(REST_ENV)
    click.echo(f"slurmrestd: --rest-transport ({REST_ENV}={address})" if address
               else f"slurmrestd: --rest-transport once {REST_ENV}=unix:PATH names a running slurmrestd")  # fmt: skip
    click.echo(pyslurm_status())


def _cluster_option(func: Any) -> Any:
    return click.option(
        "--cluster", "cluster_path", required=True, type=click.Path(path_type=Path, exists=True),
        help="The cluster's resources: a YAML file or folder (SwitchTopology, GPUPartitions, SchedulingPolicies).",
    )(func)  # fmt: skip


def _history_options(func: Any) -> Any:
    """--history TRACE [--format F] | --from-sacct --start T [--end T]: fill the Lua tables."""
    options = [
        click.option("--history", "history_path", type=click.Path(path_type=Path, exists=True, dir_okay=False),
                     help="Fill job_submit.lua's GPU-sizing and estimate tables from this trace file "
                          "(e.g. written by `gputwin slurm history --out`)."),
        click.option("--format", "history_format", type=click.Choice(("auto", *FORMATS)), default="auto",
                     show_default=True, help="Format of the --history file."),
        click.option("--from-sacct", is_flag=True,
                     help="Fill the tables from the live cluster's sacct (finished jobs of --start..--end)."),
        click.option("--start", help="With --from-sacct: window start, UTC (YYYY-MM-DD[THH:MM[:SS]] or now-N<unit>)."),
        click.option("--end", default="now", show_default=True, help="With --from-sacct: window end."),
    ]  # fmt: skip
    for option in reversed(options):
        func = option(func)
    return func


def _tables(cluster: ClusterSpec, history_path: Path | None, history_format: str, from_sacct: bool,
            start: str | None, end: str, model: Path | None = None) -> LuaTables | None:  # fmt: skip
    """The history tables the options ask for (summary on stderr), or None for empty tables."""
    if history_path is not None and from_sacct:
        raise SlurmInputError("--history and --from-sacct: give one source of history, not both")
    if from_sacct and not start:
        raise SlurmInputError("--from-sacct needs --start (the history window)")
    if start and not from_sacct:
        raise SlurmInputError("--start is for --from-sacct")
    if history_path is not None:
        found = tables_from_trace(cluster, history_path, history_format, model=model)
    elif from_sacct:
        found = tables_from_sacct(cluster, start or "", end, model=model)
    elif model is not None:
        raise SlurmInputError("a learned model predicts from job history: give --history or --from-sacct")
    else:
        return None
    click.echo(f"history: {json.dumps(found.summary(), sort_keys=True)}", err=True)
    return found.tables


def _render(
    cluster_path: Path, version: str, history: tuple[Path | None, str, bool, str | None, str],
    model: Path | None = None,
) -> RenderedConfig:
    """`model`: a saved learned model's folder for the estimate table; default: the one a used
    SchedulingPolicy names (`estimator.model`), found in $GPUTWIN_MODEL_DIR."""
    from gputwin.adapters.slurm.render_tables import policy_model
    from gputwin.estimators.modeldir import model_dir

    cluster = load_cluster(cluster_path)
    model = model or policy_model(cluster_path, model_dir())
    tables = _tables(cluster, *history, model)
    try:
        return render(cluster, version=version, tables=tables)
    except SlurmInputError as exc:  # the API model accepts only what renders; if not, name the file
        raise ClusterError([Problem(str(cluster_path), "cluster", str(exc))]) from None


def _sacctmgr(rendered: RenderedConfig) -> tuple[Step, ...]:
    """The sacctmgr commands for an empty accounting database (`render` asks no SLURM)."""
    return plan(rendered.tenancy, LiveAccounts(), "CLUSTER_NAME") if rendered.tenancy else ()


def _live_version() -> str:
    major, minor, _ = slurm_version()
    return f"{major}.{minor:02d}"


def _apply_version(given: str | None, dry_run: bool) -> str:
    """The release to render for: --slurm-version, else the live clients'; a dry run without SLURM
    renders for the default release and says so (it only diffs files). Without a slurm.conf the
    clients retry for 60 s before failing, so none is asked then: a real apply is refused at once."""
    conf = client_config()
    if conf is None and not dry_run:
        raise SlurmInputError(f"no slurm.conf at {os.environ.get('SLURM_CONF') or DEFAULT_SLURM_CONF}: "
                              "set SLURM_CONF to the cluster's (a --dry-run needs none)")  # fmt: skip
    if given is not None:
        return given
    try:
        if conf is None:
            raise SlurmCommandError("no slurm.conf for sacct to read")
        return _live_version()
    except SlurmCommandError as exc:
        if not dry_run:
            raise
        click.echo(f"note: rendered for SLURM {DEFAULT_VERSION} (--slurm-version picks another): {exc}", err=True)
        return DEFAULT_VERSION


def _as_json(rendered: RenderedConfig, out_dir: Path | None) -> str:
    """`render -o json`: path -> content of each file it writes, and what was derived from the cluster."""
    files = {str(out_dir / name if out_dir is not None else name): rendered[name].decode("ascii") for name in rendered}
    requires: dict[str, str] = {}
    for key, value in rendered.requires:  # AccountingStorageEnforce needs two values: "limits,qos"
        requires[key] = f"{requires[key]},{value}" if key in requires else value
    derived = {"requires": requires, "partitions": dict(rendered.partitions),
               "switches": list(rendered.switches), "nodes": rendered.nodes.decode("ascii"),
               "gresConf": rendered.gres_conf.decode("ascii"),
               "sacctmgr": [list(s.argv) for s in _sacctmgr(rendered)], "notes": list(rendered.tenancy.notes)}  # fmt: skip
    return json.dumps({"slurmVersion": rendered.version, "files": files, "derived": derived}, indent=2)


@slurm.command("render")
@_cluster_option
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Write the files into this folder (created) instead of printing them.")  # fmt: skip
@click.option("--slurm-version", "version", type=click.Choice(SUPPORTED_VERSIONS), default=DEFAULT_VERSION,
              show_default=True, help="SLURM release to render for (25.05 adds topology.yaml).")  # fmt: skip
@click.option("-o", "--output", type=click.Choice(["json"]),
              help="json: one object, file path -> content, and what was derived (requires, partitions, switches).")
@_history_options
@click.option("--model", "model_path", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Fill the estimate table with this saved model's predictions (a folder `gputwin estimator "
                   "train` wrote) instead of the mean run time; default: the model a used SchedulingPolicy "
                   "names (estimator.type learned), found in $GPUTWIN_MODEL_DIR.")  # fmt: skip
def render_cmd(cluster_path: Path, out_dir: Path | None, version: str, output: str | None, history_path: Path | None,
               history_format: str, from_sacct: bool, start: str | None, end: str,
               model_path: Path | None) -> None:  # fmt: skip
    """Compile the cluster's policy into topology.conf, the two includes and job_submit.lua."""
    history = (history_path, history_format, from_sacct, start, end)
    rendered = _render(cluster_path, version, history, model_path)
    if output == "json" and out_dir is None:
        click.echo(_as_json(rendered, None))
        return
    if out_dir is None:
        for name in rendered:
            click.echo(f"==> {name} <==")
            click.echo(rendered[name].decode("ascii"), nl=False)
        if rendered.node_models or rendered.node_shards:  # typed GRES, shards: the site's node lines must match
            click.echo(f"==> {NODES} (for slurm.conf; not applied) <==")
            click.echo(rendered.nodes.decode("ascii"), nl=False)
        if rendered.gres_conf:
            click.echo("==> gres.conf lines (beside the site's Name=gpu lines; not applied) <==")
            click.echo(rendered.gres_conf.decode("ascii"), nl=False)
        if rendered.tenancy:
            click.echo("==> sacctmgr (slurmdbd; gputwin slurm apply runs what is missing) <==")
            click.echo(commands_text(_sacctmgr(rendered)), nl=False)
        for note in rendered.tenancy.notes:
            click.echo(f"note: {note}", err=True)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in rendered:
        (out_dir / name).write_bytes(rendered[name])
        if output is None:
            click.echo(str(out_dir / name))
    if output == "json":
        click.echo(_as_json(rendered, out_dir))


@slurm.command("apply")
@_cluster_option
@click.option("--conf-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Folder of slurm.conf and the managed files (default: that of $SLURM_CONF).")  # fmt: skip
@click.option("--dry-run", is_flag=True,
              help="Validate and print the diff; write nothing. Needs no live SLURM (the checks against it are "
                   "then skipped, with a note).")  # fmt: skip
@click.option("--slurm-version", "version", type=click.Choice(SUPPORTED_VERSIONS),
              help=f"SLURM release to render for (default: the live clients'; a dry run without SLURM: {DEFAULT_VERSION}).")
@_history_options
def apply_cmd(cluster_path: Path, conf_dir: Path | None, dry_run: bool, version: str | None,
              history_path: Path | None, history_format: str, from_sacct: bool, start: str | None,
              end: str) -> None:  # fmt: skip
    """Validate, then tenants' accounts/QOS (sacctmgr, verified with `sacctmgr show -P`), then the files
    (diff, write, `scontrol reconfigure`, verify); any failure undoes both."""
    version = _apply_version(version, dry_run)
    rendered = _render(cluster_path, version, (history_path, history_format, from_sacct, start, end))
    full = apply_everything(rendered, conf_dir, dry_run=dry_run)  # its errors say what rolled back
    result = full.files
    click.echo(result.diff, nl=False)
    click.echo(commands_text(full.accounts), nl=False)
    for note in full.notes:
        click.echo(f"note: {note}", err=True)
    runs = f", {len(full.accounts)} sacctmgr command(s)" if rendered.tenancy else ""  # only with quotas
    if dry_run:
        click.echo(f"dry run: {len(result.changed)} file(s) would change{runs and runs + ' would run'}; nothing written")
    else:
        click.echo(f"applied: {len(result.changed)} file(s) changed in {result.conf_dir}{runs and runs + ' run'}; "
                   f"controller{' and accounts' if runs else ''} verified")  # fmt: skip
