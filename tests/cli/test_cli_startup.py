"""Start-up (issue 17 item 1): a command imports only what it uses, checked in a fresh interpreter.

Each case runs `gputwin ARGS` in a subprocess and reads `sys.modules` as the process exits: the heavy
dependencies (kopf, the Kubernetes client, matplotlib, optuna) and the operator, the sweeps and the
SLURM adapter must not be there after `--help` or a simulate. A simulate of a Helios CSV trace on a
VC-table cluster (the Philly-shaped trace's shape) must load no pydantic, no API model, no networkx
(the placers' span queries use the topology's parent maps) and, under --json, no rich. The lazy group's command listing must match the one click would print with every
command imported, and every lazy entry must resolve.
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
# What a VC-table cluster does not need: the YAML side of the API and its models, and (under --json) rich.
MODELS = ("pydantic", "pydantic_core", "yaml", "gputwin.api.documents", "gputwin.api.v1alpha1", "gputwin.api.meta",
          "gputwin.api.validate", "gputwin.api.convert")  # fmt: skip
TABLES = ("rich", "gputwin.cli.output")
# The switch tree as a graph: only `Topology.graph`'s users (topology.conf, the SLURM adapter) need it.
GRAPH = ("networkx",)

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


def heavy(modules: set[str], names: tuple[str, ...] = HEAVY) -> list[str]:
    return sorted(m for m in modules if any(m == h or m.startswith(h + ".") for h in names))


@pytest.fixture(scope="module")
def small_trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("startup") / "demo-100.csv"
    with demo_trace_path().open() as src:
        path.write_text("".join(itertools.islice(src, 101)))  # the header and 100 jobs
    return path


@pytest.fixture(scope="module")
def vc_table(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A Philly-shaped pair: a Helios CSV trace of 100 jobs and its VC table (vc,num_nodes)."""
    folder = tmp_path_factory.mktemp("vc-table")
    cluster, trace = folder / "cluster.csv", folder / "jobs.csv"
    cluster.write_text("vc,num_nodes\n6214e9,4\n7f04ca,2\n")
    rows = [f"{i},vc_u{i % 7},{('6214e9', '7f04ca')[i % 2]},job{i},{1 << (i % 4)},COMPLETED,{i * 30},{60 + i}"
            for i in range(100)]  # fmt: skip
    trace.write_text("job_id,user,vc,jobname,gpu_num,state,submit_time,duration\n" + "\n".join(rows) + "\n")
    return trace, cluster


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_a_vc_table_simulate_builds_no_api_model(as_json: bool, vc_table: tuple[Path, Path]) -> None:
    """The Philly-shaped case (CSV trace, VC-table cluster): no pydantic model is built, and under
    --json (a script reading it) nothing of rich is imported either; the table does need rich."""
    trace, cluster = vc_table
    code, modules = loaded_after("simulate", "--trace", str(trace), "--cluster", str(cluster),
                                 *(["--json"] if as_json else []))  # fmt: skip
    assert code == 0 and "gputwin.sim.engine" in modules and "gputwin.api.helios" in modules
    assert heavy(modules) == [] and heavy(modules, MODELS) == []
    assert (heavy(modules, TABLES) == []) == as_json


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "table"])
def test_a_vc_table_simulate_builds_no_graph(as_json: bool, vc_table: tuple[Path, Path]) -> None:
    """The Philly-shaped case places multi-node jobs by span (a job's 8 GPUs need two 4-GPU nodes
    here) from the topology's parent maps: networkx is never imported."""
    trace, cluster = vc_table
    code, modules = loaded_after("simulate", "--trace", str(trace), "--cluster", str(cluster), "--gpus-per-node", "4",
                                 *(["--json"] if as_json else []))  # fmt: skip
    assert code == 0 and "gputwin.core.topology" in modules and "gputwin.core.placement" in modules
    assert heavy(modules, GRAPH) == []


def test_a_yaml_simulate_builds_no_graph_either(small_trace: Path) -> None:
    """A declared Topology (the demo cluster's YAML) is checked to be one tree without networkx too."""
    code, modules = loaded_after("simulate", "--trace", str(small_trace), "--cluster", str(demo_cluster_path()),
                                 "--json")  # fmt: skip
    assert code == 0 and "gputwin.api.validate" in modules
    assert heavy(modules, GRAPH) == []


def test_a_yaml_simulate_under_json_draws_no_table(small_trace: Path) -> None:
    code, modules = loaded_after("simulate", "--trace", str(small_trace), "--cluster", str(demo_cluster_path()),
                                 "--json")  # fmt: skip
    assert code == 0 and "gputwin.api.v1alpha1" in modules  # the YAML cluster does need its models
    assert heavy(modules, TABLES) == []


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
        assert not modules & {"gputwin.cli.simulate", "gputwin.sim.engine", "gputwin.api", "pydantic", "networkx",
                              "rich", "gputwin.sim.atomic"}  # fmt: skip
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
