"""The test cluster scripts/slurm/start.sh builds: nodes, fake GPUs, switches, managed includes."""

from __future__ import annotations

import re
from pathlib import Path

import hostlist
from slurm_testcluster import Cluster


def _nodes(cluster: Cluster) -> dict[str, dict[str, str]]:
    """`scontrol show node -o`: one line per node, `Key=Value` pairs."""
    out = cluster.run("scontrol", "show", "node", "-o").stdout
    nodes = {}
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        nodes[fields["NodeName"]] = fields
    return nodes


def _expected_gres(cluster: Cluster) -> str:
    """gpu:h100:8, plus the shards of a cluster started with --shards S (its layout file says S);
    22.05 reports shards typed as their GPUs: shard:h100:8*S."""
    layout = dict(item.split("=") for item in (cluster.state / "layout").read_text().split())
    shards = int(layout.get("shards", "0"))
    return "gpu:h100:8" + (f",shard:h100:{8 * shards}" if shards else "")


def test_sixteen_nodes_with_eight_gpus_each(slurm_cluster: Cluster) -> None:
    nodes = _nodes(slurm_cluster)
    want = _expected_gres(slurm_cluster)
    assert len(nodes) >= 16
    assert all(node["Gres"] == want for node in nodes.values()), {n: v["Gres"] for n, v in nodes.items()}
    sinfo = slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N %G").stdout.split("\n")
    gres = {line.split()[0]: line.split()[1] for line in sinfo if line.strip()}
    assert len(gres) >= 16 and set(gres.values()) == {want}


def test_switches_are_visible_in_scontrol_show_topology(slurm_cluster: Cluster) -> None:
    out = slurm_cluster.run("scontrol", "show", "topology").stdout
    switches = {}
    for line in out.splitlines():
        fields = dict(item.split("=", 1) for item in line.split() if "=" in item)
        switches[fields["SwitchName"]] = fields
    leaves = {name: s for name, s in switches.items() if s["Level"] == "0"}
    assert len(leaves) >= 2
    covered = [node for s in leaves.values() for node in hostlist.expand_hostlist(s["Nodes"])]
    assert sorted(covered) == sorted(_nodes(slurm_cluster))  # every node under exactly one leaf
    assert any(s["Level"] == "1" for s in switches.values())


def test_managed_files_exist_and_partitions_come_from_the_include(slurm_cluster: Cluster) -> None:
    conf = Path(slurm_cluster.env["SLURM_CONF"])
    etc = conf.parent
    includes = re.findall(r"^Include (\S+)$", conf.read_text(), flags=re.MULTILINE)
    assert str(etc / "gputwin-partitions.conf") in includes
    assert str(etc / "gputwin-scheduling.conf") in includes
    for name in ("topology.conf", "job_submit.lua", "gres.conf"):
        assert (etc / name).is_file()
    declared = re.findall(
        r"^PartitionName=(\S+)", (etc / "gputwin-partitions.conf").read_text(), flags=re.MULTILINE
    )
    assert "PartitionName" not in conf.read_text()  # partitions live only in the managed include
    live = slurm_cluster.run("sinfo", "-h", "-o", "%R").stdout.split()
    assert sorted(declared) == sorted(live)


def test_state_folder_has_env_and_pids(slurm_cluster: Cluster) -> None:
    assert {"SLURM_CONF", "GPUTWIN_SLURM_STATE", "GPUTWIN_SLURM_VERSION"} <= set(slurm_cluster.env)
    assert re.fullmatch(r"(22\.05|24\.11)\.\d+", slurm_cluster.env["GPUTWIN_SLURM_VERSION"])
    names = [line.split()[0] for line in (slurm_cluster.state / "pids").read_text().splitlines()]
    assert names[:5] == ["munged", "mariadbd", "slurmdbd", "slurmctld", "slurmd-gpu01"]
    assert sum(name.startswith("slurmd-") for name in names) >= 16
