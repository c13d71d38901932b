"""Topology: span/tiers queries, leaf and subtree lookups, and every way a declared tree is refused."""

from __future__ import annotations

import pytest

from gputwin.core.model import NodeSpec, SwitchSpec, TopologySpec
from gputwin.core.topology import Span, Topology, TopologyError

# root -> s0 -> l0 (n0, n1), l1 (n2)
#      -> s1 -> l2 (n3), l3 (n4)
TWO_SPINES = {"s0": {"l0": [4, 4], "l1": [4]}, "s1": {"l2": [4], "l3": [8]}}


@pytest.mark.parametrize(
    ("nodes", "span"),
    [
        pytest.param([0], Span(1, 0), id="one-node"),
        pytest.param([0, 1], Span(1, 0), id="two-nodes-one-leaf"),
        pytest.param([0, 2], Span(2, 1), id="two-leaves-one-spine-meet-at-spine"),
        pytest.param([3, 4], Span(2, 1), id="two-leaves-other-spine"),
        pytest.param([0, 3], Span(2, 2), id="two-spines-meet-at-root"),
        pytest.param([0, 1, 2, 3], Span(3, 2), id="three-leaves-two-spines"),
        pytest.param([], Span(0, 0), id="no-nodes"),
    ],
)
def test_span_counts_leaves_and_tiers_up_to_the_meeting_switch(topology_spec, nodes, span) -> None:
    topo = Topology(topology_spec(TWO_SPINES))
    assert topo.span(nodes) == span


def test_span_of_leaves_at_uneven_depth_counts_the_deeper_climb() -> None:
    # l0 sits under s0 (l0 -> s0 -> root: 2 hops to root); lx hangs off root directly (1 hop).
    # They meet at root, and the deeper leaf climbs 2 tiers to get there.
    spec = TopologySpec(
        "t",
        (SwitchSpec("root"), SwitchSpec("s0", "root"), SwitchSpec("l0", "s0"), SwitchSpec("lx", "root")),
        (NodeSpec("a", 8, "l0"), NodeSpec("b", 8, "lx")),
    )
    assert Topology(spec).span([0, 1]) == Span(2, 2)


def test_single_switch_tree_has_the_root_as_its_only_leaf() -> None:
    spec = TopologySpec("t", (SwitchSpec("root"),), (NodeSpec("a", 8, "root"), NodeSpec("b", 8, "root")))
    topo = Topology(spec)
    assert topo.root == "root"
    assert topo.leaf_names == ("root",)
    assert topo.span([0, 1]) == Span(1, 0)
    assert topo.leaf_parent(0) == "root"  # a root leaf is its own parent


@pytest.mark.parametrize(
    ("node", "leaf"),
    [("n0", "l0"), ("n1", "l0"), ("n2", "l1"), ("n3", "l2"), ("n4", "l3")],
)
def test_leaf_of_names_the_switch_a_node_hangs_off(topology_spec, node, leaf) -> None:
    assert Topology(topology_spec(TWO_SPINES)).leaf_of(node) == leaf


@pytest.mark.parametrize(
    ("switch", "nodes"),
    [
        ("root", ["n0", "n1", "n2", "n3", "n4"]),
        ("s0", ["n0", "n1", "n2"]),
        ("s1", ["n3", "n4"]),
        ("l0", ["n0", "n1"]),
        ("l3", ["n4"]),
    ],
)
def test_nodes_under_lists_a_subtree_in_declaration_order(topology_spec, switch, nodes) -> None:
    assert Topology(topology_spec(TWO_SPINES)).nodes_under(switch) == nodes


def test_indexes_follow_declaration_order(topology_spec) -> None:
    topo = Topology(topology_spec(TWO_SPINES))
    assert topo.node_names == ("n0", "n1", "n2", "n3", "n4")
    assert topo.node_gpus == (4, 4, 4, 4, 8)
    assert topo.leaf_names == ("l0", "l1", "l2", "l3")
    assert topo.node_leaf == (0, 0, 1, 2, 3)
    assert [topo.leaf_parent(i) for i in range(4)] == ["s0", "s0", "s1", "s1"]
    assert topo.switches_spanned(["n4", "n0", "n1"]) == ["l0", "l3"]
    assert topo.root == "root"


def _sw(*pairs: tuple[str, str | None]) -> tuple[SwitchSpec, ...]:
    return tuple(SwitchSpec(n, p) for n, p in pairs)


@pytest.mark.parametrize(
    ("switches", "nodes", "field", "reason_part"),
    [
        pytest.param(
            _sw(("root", None), ("a", "b"), ("b", "a"), ("leaf", "root")),
            (NodeSpec("n", 8, "leaf"),),
            "switches",
            "cycle",
            id="cycle",
        ),
        pytest.param(
            _sw(("root", None), ("a", "a"), ("leaf", "root")),
            (NodeSpec("n", 8, "leaf"),),
            "switches",
            "cycle",
            id="self-parent",
        ),
        pytest.param(
            _sw(("root", None), ("leaf", "nowhere")),
            (NodeSpec("n", 8, "leaf"),),
            "switches[1].parent",
            "unknown switch 'nowhere'",
            id="unknown-parent",
        ),
        pytest.param(
            _sw(("root", None), ("leaf", "root")),
            (NodeSpec("n", 8, "root"),),
            "nodes[0].switch",
            "not a leaf switch",
            id="node-on-non-leaf",
        ),
        pytest.param(
            _sw(("root", None)),
            (NodeSpec("n", 8, "ghost"),),
            "nodes[0].switch",
            "unknown switch 'ghost'",
            id="node-on-unknown-switch",
        ),
        pytest.param(
            _sw(("root", None), ("leaf", "root")),
            (NodeSpec("n", 8, "leaf"), NodeSpec("m", 8, "leaf"), NodeSpec("n", 4, "leaf")),
            "nodes[2].name",
            "declared twice",
            id="duplicate-node",
        ),
        pytest.param(
            _sw(("root", None), ("leaf", "root"), ("leaf", "root")),
            (NodeSpec("n", 8, "leaf"),),
            "switches[2].name",
            "declared twice",
            id="duplicate-switch",
        ),
        pytest.param(
            _sw(("r1", None), ("r2", None)),
            (NodeSpec("n", 8, "r1"), NodeSpec("m", 8, "r2")),
            "switches",
            "expected one root switch, found 2",
            id="two-roots",
        ),
        pytest.param(_sw(("root", None)), (), "nodes", "no nodes", id="no-nodes"),
        pytest.param((), (NodeSpec("n", 8, "x"),), "switches", "no switches", id="no-switches"),
        pytest.param(
            _sw(("root", None)),
            (NodeSpec("n", -1, "root"),),
            "nodes[0].gpus",
            "must be >= 0",
            id="negative-gpus",
        ),
    ],
)
def test_invalid_trees_are_refused_naming_the_field(switches, nodes, field, reason_part) -> None:
    with pytest.raises(TopologyError) as err:
        Topology(TopologySpec("t", switches, nodes))
    assert err.value.field == field
    assert reason_part in err.value.reason
    assert str(err.value).startswith(f"{field}: ")
