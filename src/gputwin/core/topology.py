"""The switch tree: fast span queries for the placers, and the networkx graph for whoever wants one.

A `Topology` is built once from a `TopologySpec` and never changes. The placers' queries (which
leaves a job's nodes touch, how many tiers up they meet) are answered from plain tuples and dicts
precomputed from each switch's parent: node index -> leaf index, leaf -> ancestors. Checking that the
spec is one tree uses those parent links too, so building a `Topology` imports no networkx (it costs
a tenth of a second, a sixth of a `gputwin simulate` of a Philly-sized trace). `Topology.graph`, the
networkx `DiGraph` (edges point from a switch to its children, then to nodes) for anything that walks
or renders the tree (`topology.conf`, node labels), is built on first use. Free-GPU bookkeeping is
not here; it lives in `gputwin.core.ledger`, which changes with every start and end.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Iterable, Sequence

from gputwin.core.frozen import Frozen
from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec

if TYPE_CHECKING:
    import networkx as nx


_SPANS = 4096  # most leaf sets `Topology.span` remembers


class TopologyError(ValueError):
    """The declared switch tree is not a tree, or nodes hang where they cannot."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


@dataclass(frozen=True, slots=True)
class Span(Frozen):
    """Where a set of nodes sits in the tree: how many leaves, and tiers up to their meeting point."""

    leaves: int
    tiers: int


class Topology:
    """An immutable switch tree with integer-indexed nodes and leaves."""

    def __init__(self, spec: TopologySpec) -> None:
        self.spec = spec
        # Each switch's parent (None at the root), once the spec is known to be one tree.
        self._parent: dict[str, str | None] = _check_tree(spec)
        self._graph: Any = None  # the networkx DiGraph, built by `graph` on first use
        self.node_names: tuple[str, ...] = tuple(n.name for n in spec.nodes)
        self.node_index: dict[str, int] = {name: i for i, name in enumerate(self.node_names)}
        self.node_gpus: tuple[int, ...] = tuple(n.gpus for n in spec.nodes)
        leaf_names = sorted({n.switch for n in spec.nodes}, key=_switch_order(spec))
        self.leaf_names: tuple[str, ...] = tuple(leaf_names)
        leaf_index = {name: i for i, name in enumerate(leaf_names)}
        self.node_leaf: tuple[int, ...] = tuple(leaf_index[n.switch] for n in spec.nodes)
        # Each leaf's ancestors, nearest first, ending at the root: a span query walks these.
        self._ancestors: tuple[tuple[str, ...], ...] = tuple(
            _ancestors(self._parent, leaf) for leaf in leaf_names
        )
        # `span`'s answers by the bitset of leaves touched: multi-node jobs touch few distinct
        # sets of leaves, and each answer costs a sort and set intersections. Bounded (`_SPANS`).
        self._spans: dict[int, Span] = {}

    @property
    def graph(self) -> nx.DiGraph:
        """The tree as a networkx DiGraph: switches (kind="switch"), then nodes (kind="node", gpus,
        labels), edges from a switch to its children. Built, and networkx imported, on first use."""
        if self._graph is None:
            self._graph = _build_graph(self.spec)
        return self._graph

    @property
    def root(self) -> str:
        return next(name for name, parent in self._parent.items() if parent is None)

    def leaf_of(self, node: str) -> str:
        """The leaf switch a node hangs off: its network group (patent claim 4)."""
        return self.leaf_names[self.node_leaf[self.node_index[node]]]

    def nodes_under(self, switch: str) -> list[str]:
        """Every node below a switch, in declaration order."""
        if switch in self.node_index:
            return []  # a node has nothing below it
        if switch not in self._parent:  # refused as networkx refuses it (NetworkXError)
            below = _descendants(self.graph, switch)
            return [n for n in self.node_names if n in below]
        under = [switch in self._ancestors[leaf] for leaf in range(len(self.leaf_names))]
        return [n for n, leaf in zip(self.node_names, self.node_leaf) if under[leaf]]

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


def _ancestors(parent: dict[str, str | None], switch: str) -> tuple[str, ...]:
    chain = [switch]
    above = parent[switch]
    while above is not None:
        chain.append(above)
        above = parent[above]
    return tuple(chain)


def _check_tree(spec: TopologySpec) -> dict[str, str | None]:
    """Each switch's parent, once the spec is one tree with nodes on leaves only; the same checks,
    in the same order and with the same TopologyErrors, as `_build_graph`, without networkx."""
    parent = _check_switches(spec.switches)
    _check_nodes(spec.nodes, parent)
    if _has_cycle(parent):
        _build_graph(spec)  # raises the cycle as networkx finds it (a rare error: import it then)
    roots = [name for name, above in parent.items() if above is None]
    if len(roots) != 1:
        raise TopologyError("switches", f"expected one root switch, found {len(roots)}: {', '.join(roots)}")
    return parent


def _check_switches(switches: Sequence[SwitchSpec]) -> dict[str, str | None]:
    if not switches:
        raise TopologyError("switches", "no switches declared")
    parent: dict[str, str | None] = {}
    for i, sw in enumerate(switches):
        if sw.name in parent:
            raise TopologyError(f"switches[{i}].name", f"switch {sw.name!r} is declared twice")
        parent[sw.name] = sw.parent
    for i, sw in enumerate(switches):
        if sw.parent is not None and sw.parent not in parent:
            raise TopologyError(f"switches[{i}].parent", f"unknown switch {sw.parent!r}")
    return parent


def _check_nodes(nodes: Sequence[NodeSpec], parent: dict[str, str | None]) -> None:
    if not nodes:
        raise TopologyError("nodes", "no nodes declared")
    has_child_switch = {above for above in parent.values() if above is not None}
    seen: set[str] = set()
    for i, node in enumerate(nodes):
        where = f"nodes[{i}]"
        if node.switch not in parent:
            raise TopologyError(f"{where}.switch", f"node {node.name!r} hangs off unknown switch {node.switch!r}")
        if node.switch in has_child_switch:
            raise TopologyError(
                f"{where}.switch", f"node {node.name!r} hangs off {node.switch!r}, which is not a leaf switch"
            )
        if node.name in parent or node.name in seen:
            raise TopologyError(f"{where}.name", f"node {node.name!r} is declared twice")
        if node.gpus < 0:
            raise TopologyError(f"{where}.gpus", f"must be >= 0, got {node.gpus}")
        seen.add(node.name)


def _has_cycle(parent: dict[str, str | None]) -> bool:
    """Whether following parents from some switch comes back to it (each switch has one parent)."""
    done: set[str] = set()
    for start in parent:
        path: set[str] = set()
        at: str | None = start
        while at is not None and at not in done:
            if at in path:
                return True
            path.add(at)
            at = parent[at]
        done |= path
    return False


def _descendants(graph: nx.DiGraph, switch: str) -> set[str]:
    import networkx as nx

    return set(nx.descendants(graph, switch))


def _build_graph(spec: TopologySpec) -> nx.DiGraph:
    """Check the spec is one tree with nodes on leaves only, and return it as a DiGraph."""
    import networkx as nx  # here, not at the top: only a caller that wants the graph pays for it

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
