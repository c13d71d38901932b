"""Cluster and job builders shared by the core's and the simulator's tests (plain functions; the
fixtures that hand them to tests are in tests/core/conftest.py and tests/sim/conftest.py).

Layouts are written as nested dicts so a test can show its whole cluster in one line:

    {"l0": [8, 8], "l1": [4]}                         one root, two leaves
    {"s0": {"l0": [4, 4], "l1": [4]}, "s1": {...}}     root -> spines -> leaves

Switches are named as written, the root is "root", and nodes are "n0", "n1", ... in declaration
order, so node index i is node "n{i}" (the topology's global index).

A module with its own name (not a conftest) so conftests can import it unambiguously; tests/ is on
sys.path because of tests/conftest.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from gputwin.core.ledger import Ledger
from gputwin.core.model import (
    ClusterSpec,
    JobSpec,
    NodeSpec,
    OverheadModel,
    PartitionSpec,
    PolicySpec,
    SwitchSpec,
    TopologySpec,
)
from gputwin.core.state import JobState
from gputwin.core.topology import Topology

Layout = Mapping[str, Any]
NO_OVERHEAD = OverheadModel()
DEFAULT_POLICY = PolicySpec()


def build_topology_spec(layout: Layout, overhead: OverheadModel = NO_OVERHEAD) -> TopologySpec:
    switches = [SwitchSpec("root")]
    nodes: list[NodeSpec] = []

    def walk(parent: str, sub: Layout) -> None:
        for name, child in sub.items():
            switches.append(SwitchSpec(name, parent))
            if isinstance(child, Mapping):
                walk(name, child)
            else:
                for gpus in child:
                    nodes.append(NodeSpec(f"n{len(nodes)}", gpus, name))

    walk("root", layout)
    return TopologySpec("t", tuple(switches), tuple(nodes), overhead)


def build_ledger(
    layout: Layout, allocations: Iterable[tuple[int, int]] = (), nodes: Sequence[int] | None = None
) -> Ledger:
    """A ledger over `nodes` (default: every node) with `(node, gpus)` already allocated."""
    topo = Topology(build_topology_spec(layout))
    ledger = Ledger(topo, range(len(topo.node_names)) if nodes is None else nodes)
    for slot in allocations:
        ledger.allocate([slot])
    return ledger


def build_cluster(
    layout: Layout,
    policy: PolicySpec = DEFAULT_POLICY,
    *,
    overhead: OverheadModel = NO_OVERHEAD,
    partitions: Iterable[tuple[str, Iterable[int], Iterable[str]]] | None = None,
    max_gpus_per_job: int = 0,
) -> ClusterSpec:
    """One partition "p" serving every task type over all nodes, unless `partitions` is given as
    (name, node indexes, task types) triples (all with `policy`)."""
    topo = build_topology_spec(layout, overhead)
    names = [n.name for n in topo.nodes]
    if partitions is None:
        partitions = [("p", range(len(names)), ("*",))]
    parts = tuple(
        PartitionSpec(
            name, tuple(names[i] for i in idx), tuple(types), policy, max_gpus_per_job=max_gpus_per_job
        )
        for name, idx, types in partitions
    )
    return ClusterSpec(topo, parts)


def build_jobs(rows: Iterable[tuple]) -> list[JobSpec]:
    """Jobs from (id, submit, duration, gpus[, extra fields dict]) rows, `seq` in row order."""
    out = []
    for seq, row in enumerate(rows):
        job_id, submit, duration, gpus, *rest = row
        extra = dict(rest[0]) if rest else {}
        out.append(JobSpec(job_id, submit, duration, gpus, extra.pop("task_type", "x"), seq=seq, **extra))
    return sorted(out, key=lambda j: (j.submit, j.seq))


def job_state(user: str = "u", gpus: int = 1, order: int = 0, partition: str = "p") -> JobState:
    """A queued job as the scheduler tracks it, made by hand (its tenant not stored: looked up from
    its user). A real JobState, not a mock: the compiled core's functions take nothing else."""
    job = JobState(JobSpec(f"{user}{order}", 0.0, 1.0, gpus, "x", user=user), partition, gpus, 1.0, 1.0)
    job.order = order
    return job


def assert_placers_see(
    led: Ledger, free_of: list[int], free_gpus: int, leaf_free: list[int], best_fit_8: int | None,
    idle: list[int],
) -> None:
    """The free GPUs every index of a 4-node, 2-leaf ledger shows placers (per node, in all, per leaf,
    best fit for 8, idle and available nodes)."""
    assert [led.free_of(n) for n in range(4)] == free_of
    assert led.free_gpus == free_gpus
    assert [led.leaf_free(lf) for lf in (0, 1)] == leaf_free
    assert led.best_fit_node(8) == best_fit_8
    assert list(led.idle_nodes()) == idle
    assert list(led.avail_nodes()) == [n for n in range(4) if free_of[n]]
