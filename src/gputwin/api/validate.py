"""Cross-object checks of a declared cluster: what no single resource can validate on its own.

`check_cluster` takes the parsed documents (each already valid by its own schema) and returns every
problem it finds: duplicate names, not exactly one SwitchTopology, a switch tree that is not a
tree (via `gputwin.core.topology.Topology`), partition references that do not resolve, partition
nodes missing from the topology or claimed twice, a task type (or the "*" catch-all) served by two
partitions, fairness weights naming a tenant no quota declares (where every partition the policy
orders has quotas: in one without, each user is a tenant, so any name may be one), a GPUJob's MIG
profile its GPU model does not declare (SwitchTopology migProfiles). Nothing is
raised, so the loader can report all problems at once and the operator can turn each into a
status condition.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from gputwin.api.convert import select_nodes, topology_spec
from gputwin.api.meta import CATCH_ALL, expand_hostlist
from gputwin.api.problems import Problem
from gputwin.api.v1alpha1 import GPUJob, GPUPartition, Resource, SchedulingPolicy, SwitchTopology, TenantQuota
from gputwin.core.model import NodeSpec, TopologySpec
from gputwin.core.topology import Topology, TopologyError


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed resource and where it came from (`FILE:docN`, or `Kind/name` in the operator)."""

    where: str
    resource: Resource


def check_cluster(documents: Sequence[Document], source: str) -> list[Problem]:
    """Every cross-object problem; `source` names the whole input for problems of no one document."""
    problems = _duplicate_names(documents)
    topologies = [(d.where, d.resource) for d in documents if isinstance(d.resource, SwitchTopology)]
    if not topologies:
        return [*problems, Problem(source, "kind", "no SwitchTopology found; exactly one is required")]
    if len(topologies) > 1:
        # Which topology partitions should match is unclear, so stop before reference checks.
        first = topologies[0][0]
        return problems + [
            Problem(
                where, "kind", f"a second SwitchTopology (the first is in {first}); exactly one is allowed"
            )
            for where, _ in topologies[1:]
        ]
    where, topology = topologies[0]
    spec = topology_spec(topology)
    problems += _tree_problems(where, topology, spec)
    problems += _partition_problems(documents, topology.metadata.name, spec.nodes)
    problems += _task_type_problems(documents)
    problems += _weight_problems(documents)
    problems += _profile_problems(documents, topology)
    return problems


def _profile_problems(documents: Sequence[Document], topology: SwitchTopology) -> list[Problem]:
    """GPUJobs asking for a MIG profile their GPU model's GPUs are not split into."""
    declared = topology.spec.mig_profiles
    problems = []
    for doc in documents:
        job = doc.resource
        if not isinstance(job, GPUJob) or not job.spec.gpu_profile:
            continue
        model, profile = job.spec.gpu_model, job.spec.gpu_profile
        if profile in declared.get(model, ()):
            continue
        known = ", ".join(declared.get(model, ())) or "none (SwitchTopology spec.migProfiles)"
        problems.append(Problem(doc.where, "spec.gpuProfile",
                                f"{profile} is not a MIG profile of GPU model {model!r}; declared: {known}"))  # fmt: skip
    return problems


def _duplicate_names(documents: Sequence[Document]) -> list[Problem]:
    first: dict[tuple[str, str | None, str], str] = {}
    problems = []
    for doc in documents:
        meta = doc.resource.metadata
        key = (doc.resource.kind, meta.namespace, meta.name)
        if key in first:
            reason = f"{doc.resource.kind} {meta.name!r} is already declared in {first[key]}"
            problems.append(Problem(doc.where, "metadata.name", reason))
        first.setdefault(key, doc.where)
    return problems


_NODE_FIELD = re.compile(r"nodes\[(\d+)\]\.(\w+)")
_GROUP_FIELD = {"name": "nodes", "switch": "switch", "gpus": "gpusPerNode"}


def _tree_problems(where: str, topology: SwitchTopology, spec: TopologySpec) -> list[Problem]:
    try:
        Topology(spec)
    except TopologyError as exc:
        return [Problem(where, _manifest_field(exc.field, topology), exc.reason)]
    return []


def _manifest_field(core_field: str, topology: SwitchTopology) -> str:
    """Translate the core's `nodes[17].switch` into the manifest's `spec.nodeGroups[2].switch`."""
    match = _NODE_FIELD.fullmatch(core_field)
    if match is None:
        # switches[i] line up one to one; bare "nodes" means the node groups as a whole.
        return "spec." + ("nodeGroups" if core_field == "nodes" else core_field)
    groups = [g for g, group in enumerate(topology.spec.node_groups) for _ in expand_hostlist(group.nodes)]
    node, attr = int(match[1]), match[2]
    return f"spec.nodeGroups[{groups[node]}].{_GROUP_FIELD.get(attr, attr)}"


def _partition_problems(
    documents: Sequence[Document], topo_name: str, nodes: Sequence[NodeSpec]
) -> list[Problem]:
    policies = sorted(d.resource.metadata.name for d in documents if isinstance(d.resource, SchedulingPolicy))
    owner: dict[str, str] = {}
    problems: list[Problem] = []
    for doc in documents:
        if not isinstance(doc.resource, GPUPartition):
            continue
        spec = doc.resource.spec
        if spec.topology != topo_name:
            problems.append(
                Problem(
                    doc.where,
                    "spec.topology",
                    f"unknown SwitchTopology {spec.topology!r}; declared: {topo_name!r}",
                )
            )
        if spec.policy is not None and spec.policy not in policies:
            declared = ", ".join(repr(p) for p in policies) or "none"
            problems.append(
                Problem(
                    doc.where,
                    "spec.policy",
                    f"unknown SchedulingPolicy {spec.policy!r}; declared: {declared}",
                )
            )
        problems += _node_problems(doc.where, doc.resource, nodes, topo_name, owner)
        problems += _quota_problems(doc.where, doc.resource, nodes)
    return problems


def _quota_problems(where: str, partition: GPUPartition, nodes: Sequence[NodeSpec]) -> list[Problem]:
    """Guarantees adding up to more GPUs than the partition has (of one model: than it has of that
    model): some could never be honoured. A model no node has is a typo."""
    quotas = partition.spec.quotas
    problems = _quota_model_problems(where, quotas, nodes)
    guaranteed = sum(q.gpus if isinstance(q.gpus, int) else sum(q.gpus.values()) for q in quotas)
    if not guaranteed or problems:
        return problems
    mine = [n for n in nodes if n.name in set(select_nodes(partition.spec, nodes))]
    total = sum(n.gpus for n in mine)
    if guaranteed > total:
        return [Problem(where, "spec.quotas", f"guarantees add up to {guaranteed} GPUs; the partition has {total}")]
    for model in sorted({m for q in quotas if isinstance(q.gpus, dict) for m in q.gpus} - {CATCH_ALL}):
        wanted = sum(q.gpus.get(model, 0) for q in quotas if isinstance(q.gpus, dict))
        have = sum(n.gpus for n in mine if n.model == model)
        if wanted > have:
            problems.append(Problem(where, "spec.quotas",
                                    f"guarantees of model {model!r} add up to {wanted} GPUs; the partition has {have}"))
    return problems  # fmt: skip


def _quota_model_problems(where: str, quotas: Sequence[TenantQuota], nodes: Sequence[NodeSpec]) -> list[Problem]:
    """Per-model guarantees of a GPU model no node of the SwitchTopology has."""
    declared = sorted({n.model for n in nodes if n.model})
    known = ", ".join(declared) or "none"
    return [Problem(where, f"spec.quotas[{i}].gpus.{model}",
                    f"no node group of the SwitchTopology has GPU model {model!r}; declared: {known}")
            for i, q in enumerate(quotas) if isinstance(q.gpus, dict)
            for model in q.gpus if model != CATCH_ALL and model not in declared]  # fmt: skip


def _weight_problems(documents: Sequence[Document]) -> list[Problem]:
    """Fairness weights of a tenant no partition's quotas know: a typo would silently weigh 1."""
    partitions = [d.resource for d in documents if isinstance(d.resource, GPUPartition)]
    tenants = {q.tenant for p in partitions for q in p.spec.quotas}
    problems = []
    for doc in documents:
        policy = doc.resource
        if not isinstance(policy, SchedulingPolicy) or not tenants:
            continue
        name = policy.metadata.name
        if any(p.spec.policy == name and not p.spec.quotas for p in partitions):
            continue  # a partition without quotas: its users are its tenants
        known = ", ".join(sorted(tenants))
        problems += [Problem(doc.where, f"spec.fairness.weights.{tenant}",
                             f"no such tenant: no partition's spec.quotas declares it; declared: {known}")
                     for tenant in sorted(policy.spec.fairness.weights) if tenant not in tenants]  # fmt: skip
    return problems


def _task_type_problems(documents: Sequence[Document]) -> list[Problem]:
    """A task type served by two partitions: which one a job goes to would depend on file order."""
    served: dict[str, tuple[str, str]] = {}  # task type -> (partition, where it is declared)
    problems = []
    for doc in documents:
        if not isinstance(doc.resource, GPUPartition):
            continue
        name = doc.resource.metadata.name
        for i, task in enumerate(doc.resource.spec.task_types):
            other, where = served.setdefault(task, (name, doc.where))
            if other == name:
                continue
            what = "the catch-all '*'" if task == CATCH_ALL else f"task type {task!r}"
            reason = f"{what} is served by GPUPartition {name!r} here and by GPUPartition {other!r} ({where})"
            problems.append(Problem(doc.where, f"spec.taskTypes[{i}]", f"{reason}; one partition per task type"))
    return problems


def _node_problems(
    where: str, partition: GPUPartition, nodes: Sequence[NodeSpec], topo_name: str, owner: dict[str, str]
) -> list[Problem]:
    """Nodes the partition selects that do not exist or another partition already holds."""
    spec, name = partition.spec, partition.metadata.name
    field = "spec.nodes" if spec.nodes is not None else "spec.nodeSelector.matchLabels"
    selected = select_nodes(spec, nodes)
    if not selected:
        return [Problem(where, field, f"selects no nodes of SwitchTopology {topo_name!r}")]
    known = {n.name for n in nodes}
    problems = []
    missing = [n for n in selected if n not in known]
    if missing:
        problems.append(Problem(where, field, f"{_names(missing)} not in SwitchTopology {topo_name!r}"))
    clashes: dict[str, list[str]] = defaultdict(list)
    for node in selected:
        if node in owner:
            clashes[owner[node]].append(node)
        owner.setdefault(node, name)
    for other, taken in clashes.items():
        problems.append(Problem(where, field, f"{_names(taken)} already in GPUPartition {other!r}"))
    return problems


def _names(nodes: Sequence[str], shown: int = 3) -> str:
    """`node 'a'` or `nodes 'a', 'b', 'c' and 5 more`: enough to find them, short enough to read."""
    if len(nodes) == 1:
        return f"node {nodes[0]!r}"
    head = ", ".join(repr(n) for n in nodes[:shown])
    more = f" and {len(nodes) - shown} more" if len(nodes) > shown else ""
    return f"{len(nodes)} nodes {head}{more}"
