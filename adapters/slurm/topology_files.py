"""The switch tree as SLURM reads it: ``topology.conf`` (tree form) and ``topology.yaml``.

- ``topology.conf``, ``topology/tree`` form (``SwitchName=… Nodes=…|Switches=…``): read by every
  release gputwin supports (22.05, 24.11, 25.05). Deepest switches first, then declaration order.
- ``topology.yaml``: the YAML form that SLURM **25.05** introduced ("multiple topologies", see its
  RELEASE_NOTES and topology.yaml(5)); 22.05 and 24.11 do not read it (24.11's topology.conf(5)
  has no such file; it configures topology/block in topology.conf itself). When the file exists,
  25.05 ignores topology.conf. It holds two topologies built from the same networkx graph:
    * ``<name>-tree`` (``cluster_default: true``): the switch tree, leaves with their nodes and
      inner switches with their ``children``, as topology.conf has it;
    * ``<name>-block``: every leaf switch as one ``topology/block`` block, ``block_sizes`` the
      smallest leaf's node count (each block must hold at least the base size). Not the default:
      a partition opts in with ``Topology=<name>-block``.
  Names were checked by `checks.NAME` before rendering; hostlists are YAML strings (quoted by the
  emitter where needed). ``yaml.safe_dump`` with insertion order keeps the bytes deterministic.
"""

from __future__ import annotations

import hostlist
import networkx as nx
import yaml

from gputwin.core.model import ClusterSpec
from gputwin.core.topology import Topology

TOPOLOGY_CONF = "topology.conf"
TOPOLOGY_YAML = "topology.yaml"
YAML_SINCE = "25.05"  # the first SLURM release that reads topology.yaml


def header(what: str, version: str, comment: str = "#") -> str:
    return f"{comment} Managed by gputwin (gputwin slurm apply), SLURM {version}: {what}. Generated; do not edit.\n"


def _tree(cluster: ClusterSpec) -> tuple[nx.DiGraph, list[str]]:
    """The graph and its switches, deepest first, then in declaration order."""
    graph = Topology(cluster.topology).graph
    order = {s.name: i for i, s in enumerate(cluster.topology.switches)}
    root = next(n for n, d in graph.in_degree() if d == 0)
    depth = {name: len(nx.shortest_path(graph, root, name)) for name in order}
    return graph, sorted(order, key=lambda s: (-depth[s], order[s]))


def _children(graph: nx.DiGraph, switch: str) -> tuple[list[str], list[str]]:
    """(nodes, child switches) directly under `switch`, in graph order."""
    children = list(graph.successors(switch))
    nodes = [c for c in children if graph.nodes[c].get("kind") == "node"]
    switches = [c for c in children if graph.nodes[c].get("kind") == "switch"]
    return nodes, switches


def render_topology(cluster: ClusterSpec, version: str) -> str:
    """``SwitchName=`` lines (topology/tree) from the networkx tree."""
    graph, switches = _tree(cluster)
    lines = [header("the switch tree (TopologyPlugin=topology/tree)", version)]
    for name in switches:
        nodes, children = _children(graph, name)
        if nodes:
            lines.append(f"SwitchName={name} Nodes={hostlist.collect_hostlist(nodes)}\n")
        elif children:
            lines.append(f"SwitchName={name} Switches={hostlist.collect_hostlist(children)}\n")
    return "".join(lines)


def render_topology_yaml(cluster: ClusterSpec, version: str) -> str:
    """topology.yaml (SLURM >= 25.05): the tree as the default topology, leaves as blocks."""
    graph, switches = _tree(cluster)
    tree: list[dict[str, str]] = []
    blocks: list[dict[str, str]] = []
    for name in switches:
        nodes, children = _children(graph, name)
        if nodes:
            tree.append({"switch": name, "nodes": hostlist.collect_hostlist(nodes)})
            blocks.append({"block": name, "nodes": hostlist.collect_hostlist(nodes)})
        elif children:
            tree.append({"switch": name, "children": hostlist.collect_hostlist(children)})
    base = min(len(hostlist.expand_hostlist(b["nodes"])) for b in blocks)
    name = cluster.topology.name
    document = [
        {"topology": f"{name}-tree", "cluster_default": True, "tree": {"switches": tree}},
        {
            "topology": f"{name}-block",
            "cluster_default": False,
            "block": {"block_sizes": [base], "blocks": blocks},
        },
    ]
    body = yaml.safe_dump(document, sort_keys=False, default_flow_style=False, width=1000)
    return header("network topologies (topology.yaml: tree default, leaves as blocks)", version) + body


__all__ = ["TOPOLOGY_CONF", "TOPOLOGY_YAML", "YAML_SINCE", "render_topology", "render_topology_yaml"]
