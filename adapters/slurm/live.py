"""The live cluster's hardware as gputwin sees it: nodes, GPUs per node and the switch tree.

`live_topology()` reads ``scontrol show node --oneliner`` (``Gres=gpu[:type]:N``) and
``scontrol show topology`` (``SwitchName=… Nodes=…|Switches=…``) into a `TopologySpec`, so a
policy can be compiled for, and simulated on, exactly the cluster that runs it (the sim-to-real
benchmark does). Nodes without GPUs or outside every leaf switch are left out. Names from the
controller pass the same strict check as names from a resource before they are used.
"""

from __future__ import annotations

import re

import hostlist

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec

from .checks import check_name
from .commands import run_command

_GRES_GPUS = re.compile(r"\bGres=gpu:(?:[A-Za-z0-9_]+:)?(\d+)")


def live_topology(name: str = "live") -> TopologySpec:
    """Nodes (sorted by name) with their GPU count and leaf switch; switches roots first."""
    gpus: dict[str, int] = {}
    for line in run_command(["scontrol", "show", "node", "--oneliner"]).splitlines():
        node = re.search(r"^NodeName=(\S+)", line)
        gres = _GRES_GPUS.search(line)
        if node and gres:
            gpus[check_name(node.group(1), "node name")] = int(gres.group(1))
    switches, leaf_of = _live_switches()
    nodes = tuple(NodeSpec(n, gpus[n], leaf_of[n]) for n in sorted(gpus) if n in leaf_of)
    return TopologySpec(name, switches, nodes)


def _live_switches() -> tuple[tuple[SwitchSpec, ...], dict[str, str]]:
    parent: dict[str, str | None] = {}
    leaf_of: dict[str, str] = {}
    for line in run_command(["scontrol", "show", "topology"]).splitlines():
        fields = dict(re.findall(r"(\w+)=(\S+)", line))
        if "SwitchName" not in fields:
            continue
        switch = check_name(fields["SwitchName"], "switch name")
        parent.setdefault(switch, None)
        for child in hostlist.expand_hostlist(fields.get("Switches", "")):
            parent[check_name(child, "switch name")] = switch
        if "Switches" not in fields:  # a leaf: its nodes hang off it
            leaf_of.update((node, switch) for node in hostlist.expand_hostlist(fields.get("Nodes", "")))
    roots_first = sorted(parent, key=lambda s: (parent[s] is not None, s))
    return tuple(SwitchSpec(s, parent[s]) for s in roots_first), leaf_of
