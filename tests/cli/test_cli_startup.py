"""Start-up (issue 17 item 1): a command imports only what it uses, checked in a fresh interpreter.

Each case runs `gputwin ARGS` in a subprocess and reads `sys.modules` as the process exits: the heavy
dependencies (kopf, the Kubernetes client, matplotlib, optuna) and the operator, the sweeps and the
SLURM adapter must not be there after `--help` or a simulate. The lazy group's command listing must
match the one click would print with every command imported, and every lazy entry must resolve.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import COMMANDS, cli

HEAVY = ("kopf", "kubernetes", "matplotlib", "optuna", "numpy", "lightgbm", "scipy", "prometheus_client",
         "gputwin.operator", "gputwin.adapters.kube", "gputwin.adapters.slurm", "gputwin.adapters.sweeps", "gputwin.sim.compare",
         "gputwin.sim.tune", "gputwin.sim.plots", "gputwin.cli.emulator")  # fmt: skip

# Runs the CLI as the `gputwin` script does, then prints the loaded modules' names as the process ends.
PROBE = """
import atexit, json, sys
atexit.register(lambda: print(json.dumps(sorted(sys.modules)), file=sys.__stderr__))
from gputwin.cli.main import main
sys.argv[0] = "gputwin"
main()
"""


def loaded_after(*args: str) -> tuple[int, set[str]]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=60)
    return proc.returncode, set(json.loads(proc.stderr.strip().splitlines()[-1]))


def heavy(modules: set[str]) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY))


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "demo-100.csv"
    with demo_trace_path().open() as src:
        path.write_text("".join(itertools.islice(src, 101)))  # the header and 100 jobs
    return path


@pytest.mark.parametrize(
    "args, loads",
    [
        (["--help"], None),
        (["--version"], None),
        (["simulate", "--help"], "gputwin.cli.simulate"),
        (["simulate", "--trace", "{trace}", "--cluster", "{cluster}", "--json"], "gputwin.sim.engine"),
        (["simulate", "--trace", "{trace}", "--cluster", "{cluster}"], "gputwin.sim.engine"),  # the rich table
        (["simulate", "--trace", "/nonexistent.csv", "--cluster", "{cluster}"], "gputwin.cli.simulate"),
    ],
    ids=["help", "version", "simulate-help", "simulate-100-json", "simulate-100-table", "simulate-refused"],
)
def test_a_command_imports_no_heavy_module(args: list[str], loads: str | None, small_trace: Path) -> None:
    args = [a.format(trace=small_trace, cluster=demo_cluster_path()) for a in args]
    code, modules = loaded_after(*args)
    assert code == (2 if "/nonexistent.csv" in args else 0)
    assert heavy(modules) == []
    if loads is None:  # the bare group: no subcommand, not even the simulator or the API models
        assert not modules & {"gputwin.cli.simulate", "gputwin.sim.engine", "gputwin.api", "pydantic", "networkx"}
    else:
        assert loads in modules  # the probe saw the command run (a probe that saw nothing proves nothing)


def test_compare_help_does_import_what_it_needs() -> None:
    """The probe can see a heavy import: `compare` loads the sweeps (its executors)."""
    code, modules = loaded_after("compare", "--help")
    assert code == 0 and "gputwin.adapters.sweeps" in modules


def test_lazy_listing_is_what_click_prints_with_every_command_imported() -> None:
    eager = click.Group(cli.name, help=cli.help, params=cli.params,
                        context_settings=cli.context_settings)  # fmt: skip
    for name, lazy in COMMANDS.items():
        eager.add_command(lazy.load(), name)
    runner = CliRunner()
    for width in (80, 200):
        assert runner.invoke(cli, ["--help"], terminal_width=width).output == \
            runner.invoke(eager, ["--help"], terminal_width=width).output  # fmt: skip


@pytest.mark.parametrize("name", sorted(COMMANDS), ids=sorted(COMMANDS))
def test_every_lazy_command_resolves_to_its_name(name: str) -> None:
    with click.Context(cli) as ctx:
        command = cli.get_command(ctx, name)
    assert isinstance(command, click.Command) and command.name == name
    assert command.get_short_help_str(1000) == COMMANDS[name].short_help
