"""A cluster's tenancy as Kueue objects, for sites that already run Kueue (`gputwin export kueue`).

Pure: a `ClusterSpec` in, plain dicts out (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues of
kueue.x-k8s.io/v1beta2, the version Kueue v0.17 stores; v1beta1 is served there but deprecated),
plus one note per thing that does not map. docs/tenancy.md ("Exported to Kueue") gives the mapping:

- a ResourceFlavor per (partition, GPU model): `MODEL.P`, or `P` for nodes that declare no model,
  selecting nodes by `gputwin.io/partition` and `gputwin.io/gpu-model` (a quota is of a partition,
  so a flavor shared by two partitions would let one partition's jobs onto the other's nodes);
- a Cohort `C.P` per cohort C of partition P (gputwin's cohorts never span partitions);
- a ClusterQueue `t.P` per quota of tenant t in P: nominalQuota / borrowingLimit / lendingLimit
  of `nvidia.com/gpu`, split over P's flavors by their GPUs when P mixes models (Kueue's quota is
  per flavor), reclaim as `preemption.reclaimWithinCohort: Any`, fairness weights as
  `fairSharing.weight`; only the tenant's namespace may use it (`namespaceSelector`);
- a LocalQueue `P` in namespace t (or `t.P` in the one `--namespace` given).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from gputwin.core.model import ClusterSpec, PartitionSpec, PolicySpec, QuotaSpec
from gputwin.errors import InputError

API_VERSION = "kueue.x-k8s.io/v1beta2"
KUEUE_VERSION = "v0.17.0"  # the CRDs the live test validates against (scripts/k8s/kueue-crds.sh)
GPU = "nvidia.com/gpu"
PARTITION_LABEL = "gputwin.io/partition"  # the label gputwin.adapters.kube.nodes checks
MODEL_LABEL = "gputwin.io/gpu-model"
TENANT_LABEL = "gputwin.io/tenant"
NAMESPACE_LABEL = "kubernetes.io/metadata.name"  # set by the API server on every Namespace
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
LABEL_VALUE = re.compile(r"([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?")
Obj = dict[str, Any]


class KueueExportError(InputError, ValueError):
    """A cluster that cannot be written as Kueue objects; `str()` is `WHERE: FIELD: reason`."""


@dataclass(frozen=True, slots=True)
class KueueExport:
    """The Kueue objects, in apply order (flavors, cohorts, cluster queues, local queues)."""

    objects: tuple[Obj, ...]
    notes: tuple[str, ...]  # what does not map, one line each
    namespaces: tuple[str, ...]  # where the LocalQueues go: they must exist


@dataclass(frozen=True, slots=True)
class Flavor:
    name: str
    model: str
    gpus: int


def export_kueue(cluster: ClusterSpec, *, namespace: str | None = None,
                 where: Mapping[str, str] | None = None, source: str = "cluster") -> KueueExport:  # fmt: skip
    """Every partition's quotas as Kueue objects. `where` maps `Kind/name` to `FILE:docN` for
    errors (else `source`); `namespace`, when given, holds every LocalQueue."""
    at = _Locator(where or {}, source, cluster.topology.name)
    if namespace is not None and not DNS_LABEL.fullmatch(namespace):
        raise KueueExportError(f"--namespace: {namespace!r:.80} is not a DNS-1123 label (a namespace name)")
    parts = [p for p in cluster.partitions if p.quotas]
    if not parts:
        raise KueueExportError(
            f"{source}: spec.quotas: no GPUPartition declares quotas; nothing maps to Kueue"
        )
    flavors = {p.name: _flavors(cluster, p, at) for p in parts}
    objects: list[Obj] = [_flavor_object(p.name, f) for p in parts for f in flavors[p.name]]
    objects += [
        _cohort(name) for name in dict.fromkeys(_cohort_name(p, q) for p in parts for q in p.quotas) if name
    ]
    objects += [
        _cluster_queue(p, i, flavors[p.name], namespace, at) for p in parts for i in range(len(p.quotas))
    ]
    objects += [_local_queue(p, q, namespace) for p in parts for q in p.quotas]
    _check_names(objects, source)
    namespaces = (
        (namespace,) if namespace else tuple(dict.fromkeys(q.tenant for p in parts for q in p.quotas))
    )
    return KueueExport(tuple(objects), tuple(dict.fromkeys(_notes(cluster, flavors, namespace))), namespaces)


@dataclass(frozen=True, slots=True)
class _Locator:
    where: Mapping[str, str]
    source: str
    topology: str

    def partition(self, name: str) -> str:
        return self.where.get(f"GPUPartition/{name}", self.source)

    def nodes(self) -> str:
        return self.where.get(f"SwitchTopology/{self.topology}", self.source)


# --- flavors --------------------------------------------------------------------------------------


def _flavors(cluster: ClusterSpec, part: PartitionSpec, at: _Locator) -> tuple[Flavor, ...]:
    """The partition's GPU models in node order, each with its GPUs ("" = nodes without a model)."""
    nodes = {n.name: n for n in cluster.topology.nodes}
    gpus: dict[str, int] = {}
    for name in part.nodes:
        node = nodes[name]
        gpus[node.model] = gpus.get(node.model, 0) + node.gpus
    return tuple(Flavor(_flavor_name(part.name, model, at), model, count) for model, count in gpus.items())


def _flavor_name(partition: str, model: str, at: _Locator) -> str:
    if not model:
        return partition
    if len(model) > 63 or not LABEL_VALUE.fullmatch(model):
        raise KueueExportError(f"{at.nodes()}: spec.nodeGroups[].model: {model!r:.80} is not a Kubernetes label "
                               "value (alphanumeric ends)")  # fmt: skip
    name = f"{model.lower().replace('_', '-')}.{partition}"
    if not DNS_SUBDOMAIN.fullmatch(name):
        raise KueueExportError(f"{at.nodes()}: spec.nodeGroups[].model: {model!r:.80} makes no ResourceFlavor "
                               f"name ({name!r:.100} is not a DNS-1123 subdomain)")  # fmt: skip
    return name


def _flavor_object(partition: str, flavor: Flavor) -> Obj:
    labels = {PARTITION_LABEL: partition, **({MODEL_LABEL: flavor.model} if flavor.model else {})}
    return _object("ResourceFlavor", flavor.name, {PARTITION_LABEL: partition}, {"nodeLabels": labels})


# --- queues ---------------------------------------------------------------------------------------


def _cohort_name(part: PartitionSpec, quota: QuotaSpec) -> str | None:
    return None if quota.cohort is None else f"{quota.cohort}.{part.name}"


def _cohort(name: str) -> Obj:
    return _object("Cohort", name, {PARTITION_LABEL: name.rsplit(".", 1)[1]}, {})


def _queue_name(part: PartitionSpec, quota: QuotaSpec) -> str:
    return f"{quota.tenant}.{part.name}"


def _cluster_queue(part: PartitionSpec, index: int, flavors: Sequence[Flavor], namespace: str | None,
                   at: _Locator) -> Obj:  # fmt: skip
    quota = part.quotas[index]
    ns = namespace or quota.tenant
    if not DNS_LABEL.fullmatch(ns):
        raise KueueExportError(f"{at.partition(part.name)}: spec.quotas[{index}].tenant: {quota.tenant!r:.80} "
                               "is not a DNS-1123 label, so not a namespace name: give --namespace")  # fmt: skip
    spec: Obj = {}
    cohort = _cohort_name(part, quota)
    if cohort is not None:
        spec["cohortName"] = cohort
    spec["namespaceSelector"] = {"matchLabels": {NAMESPACE_LABEL: ns}}
    spec["queueingStrategy"] = "BestEffortFIFO" if part.policy.backfill else "StrictFIFO"
    spec["resourceGroups"] = [{"coveredResources": [GPU], "flavors": _quota_flavors(quota, flavors)}]
    if cohort is not None:
        spec["preemption"] = {"reclaimWithinCohort": "Any", "withinClusterQueue": "Never"}
    if part.policy.fairness != "none":
        spec["fairSharing"] = {"weight": _quantity(part.policy.weights.get(quota.tenant, 1.0))}
    labels = {PARTITION_LABEL: part.name, TENANT_LABEL: quota.tenant}
    return _object("ClusterQueue", _queue_name(part, quota), labels, spec)


def _quota_flavors(quota: QuotaSpec, flavors: Sequence[Flavor]) -> list[Obj]:
    """nominalQuota and the limits per flavor: each split by the flavors' GPUs (largest remainder);
    a per-model quota's models map exactly (`_model_flavors`)."""
    if quota.models:
        return _model_flavors(quota, flavors)
    weights = [f.gpus for f in flavors]
    nominal = split(quota.gpus, weights)
    borrow = (
        None
        if quota.cohort is None or quota.borrowing_limit is None
        else split(quota.borrowing_limit, weights)
    )
    lend = (
        None if quota.cohort is None or quota.lending_limit is None else split(quota.lending_limit, weights)
    )
    out: list[Obj] = []
    for i, flavor in enumerate(flavors):
        resource: Obj = {"name": GPU, "nominalQuota": nominal[i]}
        if borrow is not None:
            resource["borrowingLimit"] = borrow[i]
        if lend is not None:
            resource["lendingLimit"] = min(lend[i], nominal[i])
        out.append({"name": flavor.name, "resources": [resource]})
    return out


def _model_flavors(quota: QuotaSpec, flavors: Sequence[Flavor]) -> list[Obj]:
    """A per-model quota: each named model's flavor takes that model's guarantee as nominalQuota and
    the limits as they are (gputwin applies them per model, as Kueue per flavor); the any-model part
    (`gpus`) is split by GPUs over the other flavors (over all where every model is named)."""
    others = [f for f in flavors if f.model not in quota.models] or list(flavors)
    rest = dict(zip((f.name for f in others), split(quota.gpus, [f.gpus for f in others])))
    rest_borrow = None if quota.borrowing_limit is None else split(quota.borrowing_limit, [f.gpus for f in others])
    out: list[Obj] = []
    for flavor in flavors:
        named = flavor.model in quota.models
        nominal = quota.models.get(flavor.model, 0) + rest.get(flavor.name, 0)
        resource: Obj = {"name": GPU, "nominalQuota": nominal}
        if quota.cohort is not None and quota.borrowing_limit is not None:
            resource["borrowingLimit"] = quota.borrowing_limit if named or rest_borrow is None else (
                rest_borrow[others.index(flavor)])  # fmt: skip
        if quota.cohort is not None and quota.lending_limit is not None:
            resource["lendingLimit"] = min(quota.lending_limit, nominal)
        out.append({"name": flavor.name, "resources": [resource]})
    return out


def split(total: int, weights: Sequence[int]) -> list[int]:
    """`total` in whole parts proportional to `weights` (largest remainder, ties to the first), summing
    to `total`; all of it to the first part when every weight is 0."""
    whole = sum(weights)
    if whole == 0:
        return [total if i == 0 else 0 for i in range(len(weights))]
    parts = [total * w // whole for w in weights]
    order = sorted(range(len(weights)), key=lambda i: (-(total * weights[i] % whole), i))
    for i in order[: total - sum(parts)]:
        parts[i] += 1
    return parts


def _local_queue(part: PartitionSpec, quota: QuotaSpec, namespace: str | None) -> Obj:
    name = part.name if namespace is None else _queue_name(part, quota)
    labels = {PARTITION_LABEL: part.name, TENANT_LABEL: quota.tenant}
    body = _object("LocalQueue", name, labels, {"clusterQueue": _queue_name(part, quota)})
    body["metadata"] = {"name": name, "namespace": namespace or quota.tenant, "labels": labels}
    return body


def _object(kind: str, name: str, labels: Mapping[str, str], spec: Obj) -> Obj:
    return {
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": spec,
    }


def _quantity(value: float) -> int | str:
    """A Kubernetes quantity: integers as they are, fractions as strings (the schema takes int or string)."""
    return int(value) if float(value).is_integer() else repr(float(value))


def _check_names(objects: Sequence[Obj], source: str) -> None:
    """Every name, namespace and label value one the API server takes, and no two objects one name.
    The API already holds tenants and partitions to this; a ClusterSpec built in code may not."""
    seen: set[tuple[str, str | None, str]] = set()
    for obj in objects:
        meta = obj["metadata"]
        kind, name, namespace = obj["kind"], meta["name"], meta.get("namespace")
        if len(name) > 253 or not DNS_SUBDOMAIN.fullmatch(name):
            raise KueueExportError(
                f"{source}: metadata.name: {kind} name {name!r:.100} is not a DNS-1123 subdomain"
            )
        bad = [v for v in meta["labels"].values() if len(v) > 63 or not LABEL_VALUE.fullmatch(v)]
        if bad or (namespace is not None and (len(namespace) > 63 or not DNS_LABEL.fullmatch(namespace))):
            raise KueueExportError(f"{source}: metadata: {kind} {name}: {(bad or [namespace])[0]!r:.100} is not "
                                   "a label value or namespace name")  # fmt: skip
        if (kind, namespace, name) in seen:
            raise KueueExportError(f"{source}: metadata.name: two {kind}s would be named {name!r:.100} "
                                   "(names join tenant or model and partition with '.'): rename one")  # fmt: skip
        seen.add((kind, namespace, name))


# --- what does not map ----------------------------------------------------------------------------


def _notes(cluster: ClusterSpec, flavors: Mapping[str, Sequence[Flavor]], namespace: str | None) -> list[str]:
    notes = [f"Kueue admits by namespace, not user: quotas[].users do not map; tenant t's jobs go in "
             f"namespace {'t' if namespace is None else namespace} with the queue-name label of its LocalQueue"]  # fmt: skip
    for part in cluster.partitions:
        if not part.quotas:
            notes.append(f"partition {part.name}: no quotas, not exported (Kueue would hold jobs gputwin lets use "
                         "any GPU)")  # fmt: skip
            continue
        notes += _policy_notes(part.name, part.policy)
        models = [f.model or "(none)" for f in flavors[part.name]]
        if len(models) > 1 and any(not q.models for q in part.quotas):
            notes.append(f"partition {part.name}: quotas split over GPU models {', '.join(models)} by their GPUs "
                         "(Kueue's quota is per flavor and a workload takes one flavor)")  # fmt: skip
        if any(q.models and q.gpus for q in part.quotas):
            notes.append(f"partition {part.name}: per-model quotas map to their flavors' nominalQuota; their "
                         "any-model part (\"*\") is split over the other flavors by GPUs (Kueue has no any-flavor "
                         "quota)")  # fmt: skip
        if part.priority_tier:
            notes.append(
                f"partition {part.name}: priorityTier does not map (Kueue: a WorkloadPriorityClass per job)"
            )
    if cluster.topology.profiles:
        notes.append("migProfiles do not map: Kueue counts MIG slices as resources of their own "
                     "(nvidia.com/mig-1g.5gb, ...), gputwin's quotas count a slice as one GPU")  # fmt: skip
    notes.append(
        "gpuFraction does not map: Kueue counts nvidia.com/gpu in whole devices (a share asks for 1)"
    )
    notes.append(f"ClusterQueues cover {GPU} only: pods asking for cpu or memory too need them covered, or "
                 "excluded in Kueue's Configuration (resources.excludeResourcePrefixes)")  # fmt: skip
    return notes


def _policy_notes(name: str, policy: PolicySpec) -> list[str]:
    notes = []
    if policy.queue != "fifo":
        notes.append(f"partition {name}: queue policy {policy.queue} does not map: Kueue orders a ClusterQueue by "
                     "priority, then creation time")  # fmt: skip
    if policy.fairness == "fairshare":
        notes.append(f"partition {name}: fairshare's halfLifeSeconds does not map: Kueue's fair sharing weighs "
                     "current usage above nominal quota (weights -> fairSharing.weight; enable fairSharing in "
                     "Kueue's Configuration)")  # fmt: skip
    elif policy.fairness == "drf":
        notes.append(f"partition {name}: drf -> Kueue's fair sharing, whose dominant share counts usage above "
                     "nominal quota, not all GPUs held (enable fairSharing in Kueue's Configuration)")  # fmt: skip
    if policy.checkpoint_seconds:
        notes.append(f"partition {name}: checkpointSeconds does not map: Kueue evicts reclaimed workloads, "
                     "their restart costs what it costs")  # fmt: skip
    if policy.placement != "first-fit":
        notes.append(f"partition {name}: placement {policy.placement} does not map: kube-scheduler places "
                     "(Kueue's Topology Aware Scheduling is not exported)")  # fmt: skip
    return notes


def render_yaml(export: KueueExport, source: str) -> str:
    """The objects as one multi-document YAML stream, the notes and namespaces as leading comments."""
    head = [f"# Kueue {KUEUE_VERSION} objects for the tenancy of {source} (gputwin export kueue; docs/tenancy.md).",
            f"# Nodes must carry the flavors' nodeLabels ({PARTITION_LABEL}, {MODEL_LABEL}); LocalQueues go in "
            f"namespace(s) {', '.join(export.namespaces)}, which must exist.",
            *(f"# note: {note}" for note in export.notes)]  # fmt: skip
    docs = [yaml.safe_dump(obj, sort_keys=False, default_flow_style=False) for obj in export.objects]
    return "\n".join(head) + "\n---\n" + "---\n".join(docs)
