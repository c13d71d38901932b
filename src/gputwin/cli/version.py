"""`gputwin --version`: the version and which core is installed, the mypyc-compiled one or pure Python.

`pip install .` compiles the core where it can and falls back to pure Python otherwise (setup.py);
pip hides the build's notice unless run with -v, so this is where a user sees which build they got.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import click

from gputwin import __version__

# One module of the compiled group stands for all of them: mypyc builds them together or not at all.
PROBE = "gputwin.core.scheduler"


def core_flavour() -> str:
    """'compiled core' when the installed scheduler is a C extension, else 'pure Python core'."""
    spec = importlib.util.find_spec(PROBE)  # finds the file without importing it (or networkx)
    origin = spec.origin if spec is not None else None
    return "pure Python core" if origin is None or origin.endswith(".py") else "compiled core"


def command_line() -> list[str]:
    """How this command was started, as a report's provenance header shows it."""
    program = Path(sys.argv[0]).name
    return [*(["python", "-m", "gputwin"] if program == "__main__.py" else [program]), *sys.argv[1:]]


def show_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"gputwin, version {__version__} ({core_flavour()})")
        ctx.exit()


version_option = click.option(
    "--version", is_flag=True, expose_value=False, is_eager=True, callback=show_version,
    help="Show the version and which core is installed (compiled or pure Python), and exit.",
)  # fmt: skip
