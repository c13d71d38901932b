"""The switch tree as a networkx graph, plus the fast span queries the placers need.

A `Topology` is built once from a `TopologySpec` and never changes. It keeps the networkx
`DiGraph` (edges point from a switch to its children, then to nodes) for anything that wants to
walk or render the tree — `topology.conf`, node labels — and precomputes integer indexes for the
hot path: node index -> leaf index, leaf -> ancestors. Free-GPU bookkeeping is not here; it lives in
`gputwin.core.ledger`, which changes with every start and end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import networkx as nx

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec


_SPANS = 4096  # most leaf sets `Topology.span` remembers


class TopologyError(ValueError):
    """The declared switch tree is not a tree, or nodes hang where they cannot."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Span:
    """Where a set of nodes sits in the tree: how many leaves, and tiers up to their meeting point."""

    leaves: int
    tiers: int


class Topology:
    """An immutable switch tree with integer-indexed nodes and leaves."""

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        self.graph = _build_graph(spec)
        self.node_names: tuple[str, ...] = tuple(n.name for n in spec.nodes)
        self.node_index: dict[str, int] = {name: i for i, name in enumerate(self.node_names)}
        self.node_gpus: tuple[int, ...] = tuple(n.gpus for n in spec.nodes)
        leaf_names = sorted({n.switch for n in spec.nodes}, key=_switch_order(spec))
        self.leaf_names: tuple[str, ...] = tuple(leaf_names)
        leaf_index = {name: i for i, name in enumerate(leaf_names)}
        self.node_leaf: tuple[int, ...] = tuple(leaf_index[n.switch] for n in spec.nodes)
        # Each leaf's ancestors, nearest first, ending at the root: a span query walks these.
        self._ancestors: tuple[tuple[str, ...], ...] = tuple(
            tuple(_ancestors(self.graph, leaf)) for leaf in leaf_names
        )
        # `span`'s answers by the bitset of leaves touched: multi-node jobs touch few distinct
        # sets of leaves, and each answer costs a sort and set intersections. Bounded (`_SPANS`).
        self._spans: dict[int, Span] = {}

    @property
    def root(self) -> str:
        return str(next(n for n, d in self.graph.in_degree() if d == 0))

    def leaf_of(self, node: str) -> str:
        """The leaf switch a node hangs off: its network group (patent claim 4)."""
        return self.leaf_names[self.node_leaf[self.node_index[node]]]

    def nodes_under(self, switch: str) -> list[str]:
        """Every node below a switch, in declaration order."""
        below = nx.descendants(self.graph, switch)
        return [n for n in self.node_names if n in below]

    def span_of_leaves(self, leaves: Iterable[int]) -> Span:
        """Leaves touched and switch tiers crossed to connect them (0 when under one leaf)."""
        distinct = sorted(set(leaves))
        if len(distinct) <= 1:
            return Span(len(distinct), 0)
        chains = [self._ancestors[leaf] for leaf in distinct]
        common = set(chains[0]).intersection(*chains[1:])
        # Tiers crossed = how far up the deepest-reaching leaf must go to meet the others.
        tiers = max(next(i for i, s in enumerate(chain) if s in common) for chain in chains)
        return Span(len(distinct), tiers)

    def span(self, node_indexes: Sequence[int]) -> Span:
        return self.span_of_slots([(i, 0) for i in node_indexes])

    def span_of_slots(self, slots: Sequence[tuple[int, int]]) -> Span:
        """`span` of the nodes of these (node index, GPUs) slots: a placement's."""
        node_leaf, mask = self.node_leaf, 0
        for i, _ in slots:
            mask |= 1 << node_leaf[i]
        span = self._spans.get(mask)
        if span is None:
            if len(self._spans) >= _SPANS:
                self._spans.clear()  # a pathological spread: start over rather than grow
            span = self._spans[mask] = self.span_of_leaves(node_leaf[i] for i, _ in slots)
        return span

    def leaf_parent(self, leaf: int) -> str:
        """The switch a leaf hangs off (the leaf itself when it is the root)."""
        chain = self._ancestors[leaf]
        return chain[1] if len(chain) > 1 else chain[0]

    def switches_spanned(self, nodes: Iterable[str]) -> list[str]:
        """The leaf switches a set of nodes sits under, in tree order."""
        leaves = {self.node_leaf[self.node_index[n]] for n in nodes}
        return [self.leaf_names[i] for i in sorted(leaves)]


def _switch_order(spec: TopologySpec) -> Callable[[str], int]:
    order = {s.name: i for i, s in enumerate(spec.switches)}
    return lambda name: order[name]


def _ancestors(graph: nx.DiGraph, switch: str) -> list[str]:
    chain = [switch]
    while True:
        parents = list(graph.predecessors(chain[-1]))
        if not parents:
            return chain
        chain.append(parents[0])


def _build_graph(spec: TopologySpec) -> nx.DiGraph:
    """Check the spec is one tree with nodes on leaves only, and return it as a DiGraph."""
    graph: nx.DiGraph = nx.DiGraph()
    _add_switches(graph, spec.switches)
    _add_nodes(graph, spec.nodes)
    if not nx.is_directed_acyclic_graph(graph):
        cycle = " -> ".join(str(e[0]) for e in nx.find_cycle(graph))
        raise TopologyError("switches", f"the switch graph has a cycle: {cycle}")
    roots = [n for n, d in graph.in_degree() if d == 0]
    if len(roots) != 1:
        raise TopologyError("switches", f"expected one root switch, found {len(roots)}: {', '.join(roots)}")
    return graph


def _add_switches(graph: nx.DiGraph, switches: Sequence[SwitchSpec]) -> None:
    names = [s.name for s in switches]
    if not names:
        raise TopologyError("switches", "no switches declared")
    for i, sw in enumerate(switches):
        if sw.name in graph:
            raise TopologyError(f"switches[{i}].name", f"switch {sw.name!r} is declared twice")
        graph.add_node(sw.name, kind="switch")
    for i, sw in enumerate(switches):
        if sw.parent is None:
            continue
        if sw.parent not in graph:
            raise TopologyError(f"switches[{i}].parent", f"unknown switch {sw.parent!r}")
        graph.add_edge(sw.parent, sw.name)


def _add_nodes(graph: nx.DiGraph, nodes: Sequence[NodeSpec]) -> None:
    if not nodes:
        raise TopologyError("nodes", "no nodes declared")
    has_child_switch = {u for u, v in graph.edges}
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if node.switch not in graph or graph.nodes[node.switch].get("kind") != "switch":
            raise TopologyError(f"{where}.switch", f"node {node.name!r} hangs off unknown switch {node.switch!r}")
        if node.switch in has_child_switch:
            raise TopologyError(
                f"{where}.switch", f"node {node.name!r} hangs off {node.switch!r}, which is not a leaf switch"
            )
        if node.name in graph:
            raise TopologyError(f"{where}.name", f"node {node.name!r} is declared twice")
        if node.gpus < 0:
            raise TopologyError(f"{where}.gpus", f"must be >= 0, got {node.gpus}")
        graph.add_node(node.name, kind="node", gpus=node.gpus, labels=dict(node.labels))
        graph.add_edge(node.switch, node.name)
