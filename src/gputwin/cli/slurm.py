"""`gputwin slurm …`: the SLURM backend's commands: history, render, apply.

Errors a user can meet (a refused partition name, sacct failing, unreadable output) end the
command with one `error: …` line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from gputwin.adapters.slurm import SlurmError, pyslurm_status, sacct_history, slurm_version, write_history
from gputwin.adapters.slurm.apply import apply
from gputwin.adapters.slurm.render import SUPPORTED_VERSIONS, RenderedConfig, render
from gputwin.adapters.traces import TraceError
from gputwin.api.loader import load_cluster
from gputwin.api.problems import ClusterError

USER_ERRORS = (SlurmError, TraceError, OSError, ClusterError)


class SlurmGroup(click.Group):
    """Turns a user's mistake into one clear line and exit status 2."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except USER_ERRORS as exc:
            click.echo(f"error: {' '.join(str(exc).split())}", err=True)
            ctx.exit(2)


@click.group(cls=SlurmGroup)
def slurm() -> None:
    """Work with a live SLURM cluster (SLURM_CONF selects it): read its job history."""


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
@click.option("--state", "states", multiple=True, help="Only jobs in these states, e.g. COMPLETED,FAILED.")
@click.option("--json-transport", is_flag=True, help="Read `sacct --json` instead of `sacct -P`.")
@click.option(
    "--out",
    "out_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="Write the jobs as a trace file (Helios CSV) for `gputwin simulate --trace`.",
)
@click.option("--skip-invalid", is_flag=True, help="Skip unreadable records (counted) instead of stopping.")
def history(start: str, end: str, partitions: tuple[str, ...], states: tuple[str, ...], json_transport: bool,
            out_path: Path | None, skip_invalid: bool) -> None:  # fmt: skip
    """Read job history from sacct and print a JSON summary (jobs, skipped records by reason)."""
    transport = "json" if json_transport else "cli"
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
    click.echo("slurmrestd: not implemented yet")
    click.echo(pyslurm_status())


def _cluster_option(func: Any) -> Any:
    return click.option(
        "--cluster", "cluster_path", required=True, type=click.Path(path_type=Path, exists=True),
        help="The cluster's resources: a YAML file or folder (SwitchTopology, GPUPartitions, SchedulingPolicies).",
    )(func)  # fmt: skip


def _render(cluster_path: Path, version: str) -> RenderedConfig:
    return render(load_cluster(cluster_path), version=version)


def _live_version() -> str:
    major, minor, _ = slurm_version()
    return f"{major}.{minor:02d}"


@slurm.command("render")
@_cluster_option
@click.option("--out", "out_dir", type=click.Path(path_type=Path, file_okay=False),
              help="Write the files into this folder (created) instead of printing them.")  # fmt: skip
@click.option("--slurm-version", "version", type=click.Choice(SUPPORTED_VERSIONS), default="22.05",
              show_default=True, help="SLURM release to render for.")  # fmt: skip
def render_cmd(cluster_path: Path, out_dir: Path | None, version: str) -> None:
    """Compile the cluster's policy into topology.conf, the two includes and job_submit.lua."""
    rendered = _render(cluster_path, version)
    if out_dir is None:
        for name in rendered:
            click.echo(f"==> {name} <==")
            click.echo(rendered[name].decode("ascii"), nl=False)
        return
    out_dir.mkdir(parents=True, exist_ok=True)
    for name in rendered:
        (out_dir / name).write_bytes(rendered[name])
        click.echo(str(out_dir / name))


@slurm.command("apply")
@_cluster_option
@click.option("--conf-dir", type=click.Path(path_type=Path, file_okay=False, exists=True),
              help="Folder of slurm.conf and the managed files (default: that of $SLURM_CONF).")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Validate and print the diff; write nothing.")
def apply_cmd(cluster_path: Path, conf_dir: Path | None, dry_run: bool) -> None:
    """Validate, diff, write, `scontrol reconfigure` and verify; roll back on any failure."""
    rendered = _render(cluster_path, _live_version())
    result = apply(rendered, conf_dir, dry_run=dry_run)  # SlurmApplyError says it rolled back
    click.echo(result.diff, nl=False)
    for note in result.notes:
        click.echo(f"note: {note}", err=True)
    if dry_run:
        click.echo(f"dry run: {len(result.changed)} file(s) would change; nothing written")
    else:
        click.echo(
            f"applied: {len(result.changed)} file(s) changed in {result.conf_dir}; controller verified"
        )
