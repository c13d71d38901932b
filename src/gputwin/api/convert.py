"""Typed resources <-> the core's frozen values (TopologySpec, PolicySpec, PartitionSpec, ClusterSpec,
Candidate): `policy_document` is `policy_spec`'s inverse (what `gputwin tune` writes and a
TraceReplay promotes), `candidate`/`candidate_model` the one conversion of a candidate,
`candidate_result` an evaluation's scores as a TraceReplay's status entry.

Conversion assumes `gputwin.api.validate` found no problems: references resolve and every node
exists. Node order is declaration order: the SwitchTopology's node groups in order, a partition's
hostlist in its own order, a nodeSelector's matches in topology order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import hostlist

from gputwin.api.meta import API_VERSION, expand_hostlist
from gputwin.api.v1alpha1 import (
    RESERVED_PARAMS,
    SHARDS_LABEL,
    GPUPartition,
    GPUPartitionSpec,
    NodeGroup,
    SchedulingPolicy,
    SwitchTopology,
    TenantQuota,
)
from gputwin.api.status import CandidateResult, ReplayMetrics
from gputwin.api.workloads import Candidate
from gputwin.core.model import Candidate as CandidateValue
from gputwin.core.model import (
    ClusterSpec,
    NodeSpec,
    OverheadModel,
    PartitionSpec,
    PolicySpec,
    QuotaSpec,
    SwitchSpec,
    TopologySpec,
)
from gputwin.core.policies import qssf_prior
from gputwin.core.quota import CATCH_ALL


def topology_spec(topology: SwitchTopology) -> TopologySpec:
    """The switch tree with every node group's hostlist expanded onto its leaf."""
    spec = topology.spec
    nodes = tuple(
        NodeSpec(name=name, gpus=group.gpus_per_node, switch=group.switch, labels=_node_labels(group),
                 model=group.model or "")
        for group in spec.node_groups
        for name in expand_hostlist(group.nodes)
    )
    return TopologySpec(
        name=topology.metadata.name,
        switches=tuple(SwitchSpec(s.name, s.parent) for s in spec.switches),
        nodes=nodes,
        overhead=OverheadModel(
            per_tier=spec.comm_overhead.per_tier, cross_node=spec.comm_overhead.cross_node
        ),
        speeds=dict(spec.model_speeds),
        profiles={model: tuple(dict.fromkeys(names)) for model, names in spec.mig_profiles.items()},
    )


def _node_labels(group: NodeGroup) -> dict[str, str]:
    """The group's labels, plus `shardsPerGpu` as SHARDS_LABEL (the core's NodeSpec has no field for
    it; only the SLURM renderer reads it)."""
    labels = dict(group.labels)
    if group.shards_per_gpu is not None:
        labels[SHARDS_LABEL] = str(group.shards_per_gpu)
    return labels


def policy_spec(policy: SchedulingPolicy | None) -> PolicySpec:
    """The core policy; the typed placement and sizing knobs travel in `params`, with the free-form
    params (e.g. `qssf_prior`, `las_thresholds`) that each core plugin reads."""
    if policy is None:
        return PolicySpec()
    spec = policy.spec
    params: dict[str, object] = dict(spec.params)
    params["max_wait"] = spec.placement.max_wait_seconds
    # Empty tuple = any GPU count; sorted so sizing can bisect.
    params["allowed_gpus"] = tuple(sorted(set(spec.sizing.allowed_gpus or ())))
    params["max_factor"] = spec.sizing.max_factor
    if "qssf_prior" in params:  # validated with the resource; the core gets seconds as a float
        params["qssf_prior"] = qssf_prior(params)
    return PolicySpec(
        queue=spec.queue.policy,
        placement=spec.placement.policy,
        sizing=spec.sizing.policy,
        backfill=spec.queue.backfill,
        checkpoint_seconds=spec.preemption.checkpoint_seconds,
        params=params,
        fairness=spec.fairness.policy,
        half_life=spec.fairness.half_life_seconds,
        weights=dict(spec.fairness.weights),
    )


def select_nodes(spec: GPUPartitionSpec, nodes: Sequence[NodeSpec]) -> list[str]:
    """The partition's node names: its hostlist as written, or the topology nodes its selector matches."""
    if spec.nodes is not None:
        return expand_hostlist(spec.nodes)
    wanted = spec.node_selector.match_labels if spec.node_selector else {}
    return [n.name for n in nodes if all(n.labels.get(k) == v for k, v in wanted.items())]


def partition_spec(
    partition: GPUPartition, nodes: Sequence[NodeSpec], policies: Mapping[str, SchedulingPolicy]
) -> PartitionSpec:
    spec = partition.spec
    return PartitionSpec(
        name=partition.metadata.name,
        nodes=tuple(select_nodes(spec, nodes)),
        task_types=tuple(spec.task_types),
        policy=policy_spec(policies[spec.policy] if spec.policy else None),
        priority_tier=spec.priority_tier,
        max_gpus_per_job=spec.max_gpus_per_job,
        quotas=tuple(quota_spec(q) for q in spec.quotas),
    )


def quota_spec(quota: TenantQuota) -> QuotaSpec:
    """A per-model `gpus` mapping becomes `models`, its "*" entry (none: 0) the plain guarantee."""
    gpus, models = (quota.gpus, {}) if isinstance(quota.gpus, int) else (
        quota.gpus.get(CATCH_ALL, 0), {m: n for m, n in quota.gpus.items() if m != CATCH_ALL})  # fmt: skip
    return QuotaSpec(quota.tenant, gpus, tuple(quota.users or ()), quota.cohort, quota.borrowing_limit,
                     quota.lending_limit, models)  # fmt: skip


def quota_document(quota: QuotaSpec) -> dict[str, Any]:
    """The inverse of `quota_spec`: a `quotas[]` entry as a manifest writes it (unset fields left out)."""
    gpus: int | dict[str, int] = quota.gpus
    if quota.models:
        gpus = {**quota.models, **({CATCH_ALL: quota.gpus} if quota.gpus else {})}
    given = {"tenant": quota.tenant, "users": list(quota.users) or None, "gpus": gpus, "cohort": quota.cohort,
             "borrowingLimit": quota.borrowing_limit, "lendingLimit": quota.lending_limit}  # fmt: skip
    return {k: v for k, v in given.items() if v is not None}


def cluster_spec(
    topology: SwitchTopology, partitions: Sequence[GPUPartition], policies: Sequence[SchedulingPolicy]
) -> ClusterSpec:
    topo = topology_spec(topology)
    by_name = {p.metadata.name: p for p in policies}
    return ClusterSpec(
        topology=topo, partitions=tuple(partition_spec(p, topo.nodes, by_name) for p in partitions)
    )


def candidate(model: Candidate) -> CandidateValue:
    """A TraceReplay's candidate (the wire format) as the core's value."""
    return CandidateValue(model.queue, model.placement, model.sizing, model.backfill)


def candidate_model(value: CandidateValue) -> Candidate:
    """The core's candidate as the API model; a setting left None takes the model's default."""
    given = {"queue": value.queue, "placement": value.placement, "sizing": value.sizing,
             "backfill": value.backfill}  # fmt: skip
    return Candidate.model_validate({k: v for k, v in given.items() if v is not None})


def candidate_patch(value: CandidateValue) -> dict[str, Any]:
    """The merge patch giving a SchedulingPolicy the candidate's names (its knobs kept); a setting
    left None is written as the API model's default."""
    model = candidate_model(value)
    return {"queue": {"policy": model.queue, "backfill": model.backfill},
            "placement": {"policy": model.placement}, "sizing": {"policy": model.sizing}}  # fmt: skip


def candidate_result(name: str, scores: Mapping[str, float], trial: int | None = None) -> CandidateResult:
    """A TraceReplay status entry from an evaluation's scores (metric name -> value, as
    `gputwin.sim.evaluation.Summary.scores` gives them): the metrics its wire format keeps."""
    metrics = ReplayMetrics.model_validate({k: scores[k] for k in ReplayMetrics.model_fields})
    return CandidateResult(name=name, metrics=metrics, trial=trial)


def policy_document(policy: PolicySpec) -> dict[str, Any]:
    """The inverse of `policy_spec`: the SchedulingPolicy spec (camelCase, as a manifest writes it)
    that converts back to exactly `policy`, for a policy whose typed knobs (`max_wait`,
    `max_factor`, `allowed_gpus`) are in its params as `policy_spec` puts them. A checkpoint cost of
    None writes no preemption section; an empty GPU-count list writes `allowedGPUs: null` (any)."""
    params = policy.params
    allowed = [int(g) for g in params.get("allowed_gpus", ())]  # type: ignore[attr-defined]
    spec: dict[str, Any] = {
        "queue": {"policy": policy.queue, "backfill": policy.backfill},
        "placement": {"policy": policy.placement, "maxWaitSeconds": params["max_wait"]},
        "sizing": {"policy": policy.sizing, "maxFactor": params["max_factor"],
                   "allowedGPUs": allowed or None},
    }
    if policy.checkpoint_seconds is not None:
        spec["preemption"] = {"checkpointSeconds": policy.checkpoint_seconds}
    if policy.fairness != "none":
        spec["fairness"] = {"policy": policy.fairness, "halfLifeSeconds": policy.half_life,
                            "weights": dict(policy.weights)}  # fmt: skip
    spec["params"] = {k: v for k, v in params.items() if k not in RESERVED_PARAMS}
    return spec


def cluster_documents(cluster: ClusterSpec) -> list[dict[str, Any]]:
    """The inverse of `cluster_spec`: manifests (one SwitchTopology, a GPUPartition and a
    SchedulingPolicy per partition) that declare `cluster`, e.g. a Helios VC table for the
    emulator. Nodes keep their order (node indices, hence placements, are the same)."""
    topo = cluster.topology
    overhead = {"perTier": topo.overhead.per_tier, "crossNode": topo.overhead.cross_node}
    groups = [{"switch": n.switch, "nodes": n.name, "gpusPerNode": n.gpus,
               "labels": {k: v for k, v in n.labels.items() if k != SHARDS_LABEL},
               **({"model": n.model} if n.model else {}),
               **({"shardsPerGpu": int(n.labels[SHARDS_LABEL])} if SHARDS_LABEL in n.labels else {})}
              for n in topo.nodes]  # fmt: skip
    switches = [{"name": s.name, **({"parent": s.parent} if s.parent else {})} for s in topo.switches]
    docs: list[dict[str, Any]] = [
        _document("SwitchTopology", topo.name, {"switches": switches, "nodeGroups": groups, "commOverhead": overhead,
                                                **({"modelSpeeds": dict(topo.speeds)} if topo.speeds else {}),
                                                **({"migProfiles": {m: list(p) for m, p in topo.profiles.items()}}
                                                   if topo.profiles else {})})  # fmt: skip
    ]
    for part in cluster.partitions:
        policy = f"{part.name}-policy"
        docs.append(_document("SchedulingPolicy", policy, _policy_manifest(part.policy)))
        docs.append(_document("GPUPartition", part.name, {
            "topology": topo.name, "nodes": hostlist.collect_hostlist(list(part.nodes)), "taskTypes": list(part.task_types),
            "policy": policy, "priorityTier": part.priority_tier, "maxGPUsPerJob": part.max_gpus_per_job,
            **({"quotas": [quota_document(q) for q in part.quotas]} if part.quotas else {}),
        }))  # fmt: skip
    return docs


def _policy_manifest(policy: PolicySpec) -> dict[str, Any]:
    if "max_wait" in policy.params:
        return policy_document(policy)
    # A policy built in code (a Helios VC table's): its knobs are the resource's defaults.
    spec: dict[str, Any] = {"queue": {"policy": policy.queue, "backfill": policy.backfill},
                            "placement": {"policy": policy.placement}, "sizing": {"policy": policy.sizing}}  # fmt: skip
    if policy.checkpoint_seconds is not None:
        spec["preemption"] = {"checkpointSeconds": policy.checkpoint_seconds}
    if policy.params:
        spec["params"] = dict(policy.params)
    return spec


def _document(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name}, "spec": spec}
