"""Policy out: what `render` writes for each policy kind, byte for byte, and what it refuses.

No SLURM needed: these run anywhere (the Lua syntax check skips without `luac5.1`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from gputwin.adapters.slurm import SlurmInputError
from gputwin.adapters.slurm.apply import check_lua, lua_checker
from gputwin.adapters.slurm.render import (
    JOB_SUBMIT,
    MANAGED_FILES,
    PARTITIONS,
    SCHEDULING,
    TOPOLOGY,
    LuaTables,
    estimate_table,
    render,
    sizing_table,
)

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.history import JobHistory
from gputwin.core.model import ClusterSpec, JobSpec, NodeSpec, PartitionSpec, PolicySpec

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"

GOLDEN_TOPOLOGY = b"""\
# Managed by gputwin (gputwin slurm apply), SLURM 22.05: the switch tree (TopologyPlugin=topology/tree). Generated; do not edit.
SwitchName=leaf0 Nodes=gpu[01-04]
SwitchName=leaf1 Nodes=gpu[05-08]
SwitchName=spine Switches=leaf[0-1]
"""
GOLDEN_PARTITIONS = b"""\
# Managed by gputwin (gputwin slurm apply), SLURM 22.05: partition definitions. Generated; do not edit.
PartitionName=train Nodes=gpu[01-06] PriorityTier=0 PreemptMode=OFF MaxTime=INFINITE State=UP Default=YES
PartitionName=infer Nodes=gpu[07-08] PriorityTier=1 PreemptMode=OFF MaxTime=INFINITE State=UP
"""
GOLDEN_SCHEDULING = b"""\
# Managed by gputwin (gputwin slurm apply), SLURM 22.05: scheduling, priority and preemption. Generated; do not edit.
# Preemptive queue policies (srtf, las) -> jobs of a lower PriorityTier are requeued.
PreemptType=preempt/none
PreemptMode=OFF
# No age/size/fairshare reordering: fifo keeps submit order; sjf/qssf set explicit
# priorities in job_submit.lua (SLURM has no per-partition priority weights).
PriorityWeightAge=0
PriorityWeightJobSize=0
PriorityWeightFairshare=0
PriorityWeightPartition=0
PriorityWeightQOS=0
# Event-driven starts (no batch scheduling delay); a backfill loop only for backfill or
# preemptive policies, else strict priority order per partition.
SchedulerParameters=batch_sched_delay=0,bf_interval=1
"""
GOLDEN_LUA_TABLES = b"""\
local ROUTES = {
  ["dev"] = "infer",
  ["infer"] = "infer",
  ["train"] = "train",
}
local CATCH_ALL = nil
local MAX_GPUS = {
  ["infer"] = 8,
}
local SWITCH_WAIT = {
  ["infer"] = 300,
  ["train"] = 300,
}
local PRIORITY_KIND = {
  ["train"] = "sjf",
}
local GPU_SIZES = {}
local ESTIMATES = {}
"""


@pytest.fixture(scope="module")
def two_leaf() -> ClusterSpec:
    return load_cluster(TWO_LEAF)


def _with_partition(cluster: ClusterSpec, index: int, **changes: object) -> ClusterSpec:
    parts = list(cluster.partitions)
    parts[index] = dataclasses.replace(parts[index], **changes)  # type: ignore[arg-type]
    return dataclasses.replace(cluster, partitions=tuple(parts))


def _with_policy(cluster: ClusterSpec, index: int, **changes: object) -> ClusterSpec:
    policy = dataclasses.replace(cluster.partitions[index].policy, **changes)  # type: ignore[arg-type]
    return _with_partition(cluster, index, policy=policy)


# --- golden snapshots and determinism -------------------------------------------------------------


def test_two_leaf_golden(two_leaf: ClusterSpec) -> None:
    rendered = render(two_leaf, version="22.05")
    assert tuple(rendered) == MANAGED_FILES
    assert rendered[TOPOLOGY] == GOLDEN_TOPOLOGY
    assert rendered[PARTITIONS] == GOLDEN_PARTITIONS
    assert rendered[SCHEDULING] == GOLDEN_SCHEDULING
    assert GOLDEN_LUA_TABLES in rendered[JOB_SUBMIT]
    assert rendered.requires == (("JobSubmitPlugins", "lua"), ("TopologyPlugin", "topology/tree"))


def test_render_is_deterministic(two_leaf: ClusterSpec) -> None:
    tables = LuaTables(estimates={("bob", "b"): 9.0, ("alice", "z"): 3.0, ("alice", "a"): 1.0})
    first = render(two_leaf, tables=tables)
    assert render(two_leaf, tables=tables) == first
    # Another interpreter with another hash seed renders the same bytes (no set/dict-order leaks).
    code = (
        "import hashlib; from gputwin.api.loader import load_cluster;"
        "from gputwin.adapters.slurm.render import render, LuaTables;"
        f"r = render(load_cluster({str(TWO_LEAF)!r}), tables=LuaTables(estimates={dict(tables.estimates)!r}));"
        "print(hashlib.sha256(b''.join(r[n] for n in r)).hexdigest())"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={**os.environ, "PYTHONHASHSEED": "12345"}, timeout=60)  # fmt: skip
    assert out.stdout.strip() == hashlib.sha256(b"".join(first[n] for n in first)).hexdigest()


@pytest.fixture(scope="module")
def luac() -> str:
    """SLURM's job_submit/lua links Lua 5.1, so its `luac5.1 -p` is the checker.

    Absent: installed with apt under CI (as root, Debian package lua5.1), else the test skips.
    """
    found = lua_checker()
    ci = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
    if found is None and ci and os.geteuid() == 0 and shutil.which("apt-get"):
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends", "lua5.1"], check=False,
                       capture_output=True, timeout=300, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})  # fmt: skip
        found = lua_checker()
    if found is None:
        pytest.skip("no Lua 5.1 checker (luac5.1, Debian package lua5.1) installed; Lua syntax unchecked")
    return found


def test_lua_parses(two_leaf: ClusterSpec, luac: str) -> None:
    tables = LuaTables(gpu_sizes={("infer", "infer", 2): 4}, estimates={("root", "short"): 5.0})
    qssf = _with_policy(two_leaf, 1, queue="qssf", sizing="history")
    check_lua(render(qssf, tables=tables)[JOB_SUBMIT])
    with pytest.raises(SlurmInputError, match="does not parse"):
        check_lua(b"function slurm_job_submit(\n")


# --- what each policy kind renders ----------------------------------------------------------------


def test_preemptive_policy_renders_partition_prio(two_leaf: ClusterSpec) -> None:
    rendered = render(_with_policy(two_leaf, 0, queue="srtf"))
    assert b"PreemptType=preempt/partition_prio\nPreemptMode=REQUEUE\n" in rendered[SCHEDULING]
    assert b"PartitionName=train Nodes=gpu[01-06] PriorityTier=0 PreemptMode=REQUEUE" in rendered[PARTITIONS]
    assert b"PartitionName=infer Nodes=gpu[07-08] PriorityTier=1 PreemptMode=OFF" in rendered[PARTITIONS]


def test_first_fit_needs_no_switch_request(two_leaf: ClusterSpec) -> None:
    plain = _with_policy(_with_policy(two_leaf, 0, placement="first-fit"), 1, placement="first-fit")
    rendered = render(plain)
    assert b"local SWITCH_WAIT = {}\n" in rendered[JOB_SUBMIT]
    assert rendered.requires == (("JobSubmitPlugins", "lua"),)


def test_qssf_and_history_tables(two_leaf: ClusterSpec) -> None:
    cluster = _with_policy(two_leaf, 1, queue="qssf", sizing="history")
    jobs = [JobSpec(str(i), 0.0, 10.0 * (i + 1), 1, "infer", user="alice", name="bert") for i in range(3)]
    jobs.append(JobSpec("x", 0.0, 5.0, 1, "infer", user="alice", name='x"]=1 os.execute("id") --'))
    estimates = estimate_table(jobs)
    assert estimates == {("alice", "bert"): 20.0}  # the hostile name is skipped, not emitted
    lua = render(cluster, tables=LuaTables(gpu_sizes={("infer", "infer", 2): 4}, estimates=estimates))[
        JOB_SUBMIT
    ]
    assert b'local PRIORITY_KIND = {\n  ["infer"] = "qssf",\n  ["train"] = "sjf",\n}' in lua
    assert b'local ESTIMATES = {\n  ["alice"] = {\n    ["bert"] = 20,\n  },\n}' in lua
    assert b'local GPU_SIZES = {\n  ["infer"] = {\n    ["infer"] = {\n      [2] = 4,\n    },\n  },\n}' in lua


def test_sizing_table_from_history(two_leaf: ClusterSpec) -> None:
    cluster = _with_policy(two_leaf, 1, sizing="history")
    history = JobHistory()
    for i in range(6):  # size 2 waits long; size 4 starts at once and runs about half as long
        history.record("infer", JobSpec(f"a{i}", 0.0, 100.0, 2, "infer"), 2, 100.0, 1000.0)
        history.record("infer", JobSpec(f"b{i}", 0.0, 100.0, 4, "infer"), 4, 55.0, 0.0)
    table = sizing_table(cluster, history)
    assert table[("infer", "infer", 2)] == 4
    assert all(part == "infer" for part, _, _ in table)  # train keeps as-requested sizing


# --- hostile names --------------------------------------------------------------------------------

HOSTILE = ["a;b", "x\nPartitionName=evil", "a=b", "-p", 'x"]=1', "a b", ""]


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_partition_name_refused(two_leaf: ClusterSpec, name: str) -> None:
    with pytest.raises(SlurmInputError, match="partition name"):
        render(_with_partition(two_leaf, 0, name=name))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_task_type_refused(two_leaf: ClusterSpec, name: str) -> None:
    with pytest.raises(SlurmInputError, match="task type"):
        render(_with_partition(two_leaf, 0, task_types=("train", name)))


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_node_name_refused(two_leaf: ClusterSpec, name: str) -> None:
    topology = two_leaf.topology
    nodes = (*topology.nodes[:-1], NodeSpec(name, 8, "leaf1"))
    cluster = dataclasses.replace(two_leaf, topology=dataclasses.replace(topology, nodes=nodes))
    with pytest.raises(SlurmInputError, match="node name"):
        render(cluster)


@pytest.mark.parametrize(
    "tables",
    [
        LuaTables(estimates={("alice", 'x"] = 1; os.execute("rm -rf /") --'): 1.0}),
        LuaTables(estimates={("alice\n", "bert"): 1.0}),
        LuaTables(estimates={("alice", "a]]..os.exit()--[["): 1.0}),
        LuaTables(gpu_sizes={("infer", 'infer"]=nil--', 2): 4}),
    ],
)
def test_lua_injection_in_tables_refused(two_leaf: ClusterSpec, tables: LuaTables) -> None:
    cluster = _with_policy(two_leaf, 1, queue="qssf", sizing="history")
    with pytest.raises(SlurmInputError, match="refused"):
        render(cluster, tables=tables)


def test_unknown_partition_node_refused(two_leaf: ClusterSpec) -> None:
    with pytest.raises(SlurmInputError, match="not in the topology"):
        render(_with_partition(two_leaf, 0, nodes=("gpu01", "gpu99")))


def test_two_partitions_one_task_type_refused(two_leaf: ClusterSpec) -> None:
    with pytest.raises(SlurmInputError, match="served by both"):
        render(_with_partition(two_leaf, 0, task_types=("train", "infer")))


def test_unsupported_version_refused(two_leaf: ClusterSpec) -> None:
    with pytest.raises(SlurmInputError, match="version"):
        render(two_leaf, version="21.08")


def test_partition_spec_defaults_render() -> None:
    """A PolicySpec without params (not from YAML) still renders: max_wait defaults to 300 s."""
    cluster = load_cluster(TWO_LEAF)
    bare = _with_partition(cluster, 0, policy=PolicySpec(placement="topology-aware"))
    assert b'["train"] = 300,' in render(bare)[JOB_SUBMIT]
    assert isinstance(bare.partitions[0], PartitionSpec)


# --- CLI ------------------------------------------------------------------------------------------


def test_cli_render_out(tmp_path: Path, two_leaf: ClusterSpec) -> None:
    result = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(TWO_LEAF), "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    rendered = render(two_leaf)
    for name in MANAGED_FILES:
        assert (tmp_path / name).read_bytes() == rendered[name]


def test_cli_render_prints(two_leaf: ClusterSpec) -> None:
    result = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(TWO_LEAF)])
    assert result.exit_code == 0, result.output
    assert "==> topology.conf <==\n" + GOLDEN_TOPOLOGY.decode() in result.output


# --- scheduler parameters and explicit priorities -------------------------------------------------


@pytest.mark.parametrize(
    ("queue", "backfill", "depth"),
    [
        ("fifo", False, ",bf_max_job_test=1"),
        ("fifo", True, ""),
        ("sjf", False, ",bf_max_job_test=1"),
        ("srtf", False, ""),
        ("las", False, ""),
    ],
)
def test_backfill_depth_only_where_a_policy_needs_it(
    two_leaf: ClusterSpec, queue: str, backfill: bool, depth: str
) -> None:
    # Both partitions get the same policy, so the cluster-wide setting follows it alone.
    cluster = _with_policy(
        _with_policy(two_leaf, 0, queue=queue, backfill=backfill), 1, queue=queue, backfill=backfill
    )
    line = f"SchedulerParameters=batch_sched_delay=0,bf_interval=1{depth}\n".encode()
    assert line in render(cluster)[SCHEDULING]


def test_srtf_and_qssf_get_estimate_priorities(two_leaf: ClusterSpec, luac: str) -> None:
    cluster = _with_policy(_with_policy(two_leaf, 0, queue="srtf"), 1, queue="qssf")
    lua = render(cluster)[JOB_SUBMIT]
    assert b'local PRIORITY_KIND = {\n  ["infer"] = "qssf",\n  ["train"] = "srtf",\n}' in lua
    # qssf ranks by estimate x GPUs (the twin's QSSF key), srtf by the estimate alone.
    assert b'if kind == "qssf" then seconds = seconds * (gpus or 1) end' in lua
    check_lua(lua)


@pytest.mark.parametrize(
    ("queues", "params", "table"),
    [
        pytest.param(("srtf", "qssf"), {}, b'{\n  ["infer"] = 3600,\n}', id="qssf-default-prior"),
        pytest.param(("srtf", "qssf"), {"qssf_prior": 900.4}, b'{\n  ["infer"] = 900,\n}', id="qssf-prior"),
        pytest.param(
            ("qssf", "qssf"),
            {"qssf_prior": "60"},
            b'{\n  ["infer"] = 60,\n  ["train"] = 3600,\n}',
            id="per-partition",
        ),
        pytest.param(("srtf", "sjf"), {"qssf_prior": 60}, b"{}", id="no-qssf-no-prior"),
    ],
)
def test_qssf_prior_is_the_estimate_of_a_job_without_history(
    two_leaf: ClusterSpec, luac: str, queues: tuple[str, str], params: dict[str, object], table: bytes
) -> None:
    cluster = _with_policy(two_leaf, 0, queue=queues[0])
    cluster = _with_policy(
        cluster, 1, queue=queues[1], params={**cluster.partitions[1].policy.params, **params}
    )
    lua = render(cluster)[JOB_SUBMIT]
    assert b"local QSSF_PRIOR = " + table + b"\n" in lua
    assert b'or (kind == "qssf" and QSSF_PRIOR[part]) or DEFAULT_ESTIMATE' in lua  # srtf keeps the default
    check_lua(lua)


def test_a_bad_qssf_prior_is_refused(two_leaf: ClusterSpec) -> None:
    cluster = _with_policy(two_leaf, 1, queue="qssf", params={"qssf_prior": "soon"})
    with pytest.raises(SlurmInputError, match=r"^partition infer: qssf_prior: expected seconds"):
        render(cluster)


# --- topology.yaml (SLURM 25.05) ------------------------------------------------------------------


def test_topology_yaml_only_from_25_05(two_leaf: ClusterSpec) -> None:
    assert "topology.yaml" not in list(render(two_leaf, version="22.05"))
    assert "topology.yaml" not in list(render(two_leaf, version="24.11"))  # 24.11 does not read it
    assert list(render(two_leaf, version="25.05"))[-1] == "topology.yaml"


def test_topology_yaml_tree_and_blocks(two_leaf: ClusterSpec) -> None:
    data = render(two_leaf, version="25.05")["topology.yaml"]
    assert data.startswith(b"# Managed by gputwin")
    assert yaml.safe_load(data) == [
        {"topology": "two-leaf-tree", "cluster_default": True, "tree": {"switches": [
            {"switch": "leaf0", "nodes": "gpu[01-04]"},
            {"switch": "leaf1", "nodes": "gpu[05-08]"},
            {"switch": "spine", "children": "leaf[0-1]"},
        ]}},
        {"topology": "two-leaf-block", "cluster_default": False, "block": {
            "block_sizes": [4],
            "blocks": [{"block": "leaf0", "nodes": "gpu[01-04]"}, {"block": "leaf1", "nodes": "gpu[05-08]"}],
        }},
    ]  # fmt: skip
    assert render(two_leaf, version="25.05")["topology.yaml"] == data  # same input, same bytes


def test_topology_yaml_keeps_yaml_lookalike_names_strings(two_leaf: ClusterSpec) -> None:
    """Names YAML would read as booleans or numbers stay strings (the emitter quotes them)."""
    topology = two_leaf.topology
    switches = tuple(dataclasses.replace(s, name={"leaf0": "on", "leaf1": "1e3"}.get(s.name, s.name),
                                         parent=s.parent) for s in topology.switches)  # fmt: skip
    nodes = tuple(dataclasses.replace(n, name="yes" if n.name == "gpu08" else n.name,
                                      switch={"leaf0": "on", "leaf1": "1e3"}[n.switch]) for n in topology.nodes)  # fmt: skip
    parts = (dataclasses.replace(two_leaf.partitions[0]),
             dataclasses.replace(two_leaf.partitions[1], nodes=("gpu07", "yes")))  # fmt: skip
    cluster = dataclasses.replace(two_leaf, topology=dataclasses.replace(topology, switches=switches, nodes=nodes),
                                  partitions=parts)  # fmt: skip
    loaded = yaml.safe_load(render(cluster, version="25.05")["topology.yaml"])
    tree = loaded[0]["tree"]["switches"]
    assert [s["switch"] for s in tree] == ["on", "1e3", "spine"]
    assert tree[1]["nodes"] == "gpu[05-07],yes" and tree[2]["children"] == "1e3,on"
