"""The live cluster's hardware read back as a TopologySpec (what the sim-to-real benchmark compiles for)."""

from __future__ import annotations

from gputwin.adapters.slurm.live import live_topology
from slurm_testcluster import Cluster  # tests/slurm/ helpers

from gputwin.core.topology import Topology


def test_live_topology_matches_sinfo(slurm_cluster: Cluster) -> None:
    topology = live_topology("here")
    listed = set(slurm_cluster.run("sinfo", "-h", "-N", "-o", "%N").stdout.split())
    assert {n.name for n in topology.nodes} == listed
    assert {n.gpus for n in topology.nodes} == {8}
    roots = [s.name for s in topology.switches if s.parent is None]
    assert roots == ["spine"]  # scripts/slurm/start.sh: leaves under one spine
    leaves = {n.switch for n in topology.nodes}
    assert leaves and all(
        next(s for s in topology.switches if s.name == leaf).parent == "spine" for leaf in leaves
    )
    assert len(Topology(topology).graph) == len(topology.nodes) + len(
        topology.switches
    )  # the core accepts it
