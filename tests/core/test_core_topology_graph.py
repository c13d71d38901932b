"""Topology without networkx: the parent-map checks and queries answer as the networkx graph does.

`Topology` checks a spec and answers span, root, ancestor and subtree queries from each switch's
parent, and builds its networkx graph only when asked (`Topology.graph`). `_build_graph` is the
graph construction with the checks it always made; for random trees, valid or not, both must
refuse the same spec with the same field and reason, and a valid one must give the answers the
graph gives (root, each leaf's ancestors, the nodes under every switch).
"""

from __future__ import annotations

import networkx as nx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.core.topology import Topology, TopologyError, _build_graph

NAMES = [f"s{i}" for i in range(6)]


@st.composite
def specs(draw: st.DrawFn, valid: bool) -> TopologySpec:
    """A switch tree: with `valid`, each switch's parent is an earlier one; else mostly declared
    switches in any order (cycles, several roots, nodes on inner switches), now and then a name
    declared twice, an unknown parent or switch, a node named like a switch, negative GPUs."""
    count = draw(st.integers(1 if valid else 0, len(NAMES)))
    names = NAMES[:count] if valid else draw(st.permutations(NAMES))[:count]
    if not valid and count > 1 and draw(st.integers(0, 5)) == 0:
        names[-1] = names[0]
    switches = []
    for i, name in enumerate(names):
        if valid:
            parent = None if i == 0 else draw(st.sampled_from(NAMES[:i]))
        else:
            parent = draw(st.sampled_from([None, *names, *names, "ghost" if i % 3 else None]))
        switches.append(SwitchSpec(name, parent))
    parents = {s.parent for s in switches}
    leaves = [s.name for s in switches if s.name not in parents] or NAMES[:1]
    pool = leaves if valid else [*leaves * 4, *names, "ghost"]
    nodes = tuple(
        NodeSpec(f"n{i}" if valid or draw(st.integers(0, 7)) else draw(st.sampled_from(["n0", "s0"])),
                 draw(st.integers(0 if valid else -1, 8)), draw(st.sampled_from(pool)))
        for i in range(draw(st.integers(1 if valid else 0, 5)))
    )  # fmt: skip
    return TopologySpec("t", tuple(switches), nodes)


def outcome(build: object, spec: TopologySpec) -> tuple[str, str] | None:
    try:
        build(spec)  # type: ignore[operator]
    except TopologyError as exc:
        return exc.field, exc.reason
    return None


@settings(max_examples=400, deadline=None)
@given(specs(valid=False))
def test_a_spec_is_refused_as_the_graph_refuses_it(spec: TopologySpec) -> None:
    assert outcome(Topology, spec) == outcome(_build_graph, spec)


@settings(max_examples=200, deadline=None)
@given(specs(valid=True))
def test_queries_answer_as_the_graph_does(spec: TopologySpec) -> None:
    topo, graph = Topology(spec), _build_graph(spec)
    root = next(n for n, d in graph.in_degree() if d == 0)
    assert topo.root == root
    for i, leaf in enumerate(topo.leaf_names):
        chain = nx.shortest_path(graph, root, leaf)[::-1]  # the leaf, up to the root
        assert topo.leaf_parent(i) == (chain[1] if len(chain) > 1 else chain[0])
    for name in [s.name for s in spec.switches] + [n.name for n in spec.nodes]:
        below = nx.descendants(graph, name)
        assert topo.nodes_under(name) == [n for n in topo.node_names if n in below]


def test_the_graph_is_built_on_first_use_with_every_attribute(topology_spec) -> None:
    topo = Topology(topology_spec({"s0": {"l0": [4, 4]}, "s1": {"l1": [8]}}))
    assert topo._graph is None  # the queries did not need it
    graph = topo.graph
    assert graph is topo.graph  # built once
    assert list(graph.nodes(data=True)) == list(_build_graph(topo.spec).nodes(data=True))
    assert list(graph.edges) == list(_build_graph(topo.spec).edges)


def test_an_unknown_switch_is_refused_as_networkx_refuses_it(topology_spec) -> None:
    with pytest.raises(nx.NetworkXError):
        Topology(topology_spec({"s0": {"l0": [4]}})).nodes_under("nowhere")
