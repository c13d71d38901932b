"""The shipped manifests, the embedded demo cluster and the Helios VC table load as documented."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from gputwin.api.loader import load_cluster, load_documents
from gputwin.api.resources import demo_cluster_path
from gputwin.api.v1alpha1 import TraceReplay
from gputwin.api.workloads import search_vocabulary
from gputwin.core.model import ClusterSpec
from gputwin.core.topology import Topology
from gputwin.sim.space import Choice, parse_space

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
EXAMPLES = ROOT / "manifests" / "examples"
PHILLY_CSV = ROOT.parent / "shared" / "traces" / "philly_mix1" / "cluster.csv"
needs_philly_csv = pytest.mark.skipif(not PHILLY_CSV.is_file(), reason="shared Philly trace not present")


def gpus(cluster: ClusterSpec) -> int:
    return sum(n.gpus for n in cluster.topology.nodes)


@pytest.mark.parametrize(
    ("path", "partitions", "nodes", "total_gpus", "leaves"),
    [
        (SAMPLES / "two-leaf.yaml", 2, 8, 64, 2),
        (EXAMPLES / "philly.yaml", 11, 352, 2816, 23),
        (demo_cluster_path(), 3, 32, 256, 4),
        pytest.param(PHILLY_CSV, 11, 352, 2816, 23, marks=needs_philly_csv),
    ],
    ids=["two-leaf", "philly-yaml", "demo", "philly-csv"],
)
def test_cluster_sizes(path: Path, partitions: int, nodes: int, total_gpus: int, leaves: int) -> None:
    cluster = load_cluster(path)
    assert (len(cluster.partitions), len(cluster.topology.nodes), gpus(cluster)) == (
        partitions,
        nodes,
        total_gpus,
    )
    assert len(Topology(cluster.topology).leaf_names) == leaves
    # Every node belongs to exactly one partition in all shipped clusters.
    assert sorted(n for p in cluster.partitions for n in p.nodes) == sorted(
        n.name for n in cluster.topology.nodes
    )


@pytest.mark.parametrize(
    ("name", "kinds"),
    [
        (SAMPLES / "policies.yaml", {"SchedulingPolicy": 18}),
        (SAMPLES / "gpujobs.yaml", {"GPUJob": 3}),
        (SAMPLES / "tracereplay.yaml", {"TraceReplay": 1}),
        (SAMPLES / "two-leaf.yaml", {"SwitchTopology": 1, "GPUPartition": 2, "SchedulingPolicy": 2}),
        (EXAMPLES / "philly.yaml", {"SwitchTopology": 1, "GPUPartition": 11, "SchedulingPolicy": 6}),
        (EXAMPLES / "philly-replay.yaml", {"TraceReplay": 3}),
    ],
    ids=lambda v: v.name if isinstance(v, Path) else None,
)
def test_every_sample_parses(name: Path, kinds: dict[str, int]) -> None:
    resources = load_documents(name)
    counts: dict[str, int] = {}
    for r in resources:
        counts[r.kind] = counts.get(r.kind, 0) + 1
    assert counts == kinds


def test_samples_directory_loads_every_file() -> None:
    # samples/ is one coherent cluster (a single SwitchTopology), so `apply -f manifests/samples/` works.
    assert len(load_documents(SAMPLES)) == 18 + 3 + 1 + 5


def test_policies_cover_every_queue_and_placement() -> None:
    pairs = {
        (r.spec.queue.policy, r.spec.placement.policy) for r in load_documents(SAMPLES / "policies.yaml")
    }  # type: ignore[union-attr]
    assert len(pairs) == 6 * 3


def test_two_leaf_converts_to_core_values() -> None:
    cluster = load_cluster(SAMPLES / "two-leaf.yaml")
    train, infer = cluster.partitions
    assert train.nodes == ("gpu01", "gpu02", "gpu03", "gpu04", "gpu05", "gpu06")
    assert (train.policy.queue, train.policy.placement, train.policy.backfill) == (
        "sjf",
        "topology-aware",
        True,
    )
    assert train.policy.params == {"max_wait": 300.0, "allowed_gpus": (), "max_factor": 2.0}
    assert (infer.priority_tier, infer.max_gpus_per_job, infer.policy.placement) == (1, 8, "consolidate")
    overhead = cluster.topology.overhead
    assert (overhead.per_tier, overhead.cross_node) == (0.1, 0.05)
    assert {n.switch for n in cluster.topology.nodes[:4]} == {"leaf0"}


def test_demo_cluster_routes_by_label_and_has_a_catch_all() -> None:
    cluster = load_cluster(demo_cluster_path())
    by_name = {p.name: p for p in cluster.partitions}
    assert {name: p.task_types for name, p in by_name.items()} == {
        "train": ("train",),
        "dev": ("dev",),
        "infer": ("*",),
    }
    assert [len(by_name[n].nodes) for n in ("train", "dev", "infer")] == [20, 4, 8]
    topology = Topology(cluster.topology)
    # train spans both spines, so the placer sees a two-tier choice.
    assert topology.span([topology.node_index[n] for n in by_name["train"].nodes]).tiers == 2


@needs_philly_csv
def test_philly_yaml_matches_the_vc_table() -> None:
    """Same VCs, node names and GPUs as the CSV; only the switch tree and overhead differ."""
    from_yaml = load_cluster(EXAMPLES / "philly.yaml")
    from_csv = load_cluster(PHILLY_CSV)
    assert [(p.name, p.nodes, p.task_types) for p in from_yaml.partitions] == [
        (p.name, p.nodes, p.task_types) for p in from_csv.partitions
    ]
    with PHILLY_CSV.open() as fh:
        table = {row["vc"]: int(row["num_nodes"]) for row in csv.DictReader(fh)}
    assert {p.name: len(p.nodes) for p in from_yaml.partitions} == table
    queues = [p.policy.queue for p in from_yaml.partitions]
    assert queues[:6] == ["fifo", "sjf", "srtf", "las", "qssf", "priority"] and queues[6] == "fifo"


@needs_philly_csv
def test_vc_table_layout() -> None:
    cluster = load_cluster(PHILLY_CSV, gpus_per_node=4, nodes_per_switch=10)
    first = cluster.partitions[0]
    assert (first.name, first.task_types, first.nodes[0], first.nodes[-1]) == (
        "6214e9",
        ("6214e9",),
        "6214e9-n000",
        "6214e9-n063",
    )
    assert gpus(cluster) == 352 * 4
    leaves = {n.switch for n in cluster.topology.nodes if n.name.startswith("6214e9-")}
    assert leaves == {f"6214e9-leaf{k}" for k in range(7)}  # 64 nodes in leaves of at most 10
    assert {s.parent for s in cluster.topology.switches} == {None, "spine"}
    assert (cluster.topology.overhead.per_tier, cluster.topology.overhead.cross_node) == (0.0, 0.0)
    assert all(p.policy.queue == "fifo" for p in cluster.partitions)


def test_every_sample_search_space_is_searchable() -> None:
    """The space of a replay's search is checked by the operator, not the model: check the shipped ones."""
    searches = [
        r.spec.search
        for path in sorted([*SAMPLES.glob("*.yaml"), *EXAMPLES.glob("*.yaml")])
        for r in load_documents(path)
        if isinstance(r, TraceReplay) and r.spec.search is not None
    ]
    assert searches  # manifests/examples/philly-replay.yaml has one
    for search in searches:
        space = parse_space(search.space, "spec.search.space", search_vocabulary())
        assert space.get("queue") == Choice(("fifo", "sjf", "qssf"))
