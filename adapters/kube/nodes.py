"""Which declared GPU nodes the live cluster lets the Kubernetes backend use, and why not the others.

Pure functions over Node objects (plain dicts as listed): the SwitchTopology says what a node
should be (its leaf switch, its GPUs, its partition); the Node says what it is. `node_problem`
judges one node (the backend judges a node again only when it changed:
`gputwin.adapters.kube.view.NodeView`). A node is out of service when any of these holds, in this
order (the first reason is reported):

- no Node of that name exists;
- it is not Ready (condition Ready != True);
- it is cordoned (`spec.unschedulable`);
- it carries a NoSchedule or NoExecute taint whose key is not tolerated (`tolerated`: the taint
  keys our pods tolerate, e.g. `nvidia.com/gpu` on GPU pools, KWOK's `kwok.x-k8s.io/node`);
- its allocatable `nvidia.com/gpu` is below the GPUs the topology declares for it;
- its label `gputwin.io/switch` or `gputwin.io/partition` (when present) names another leaf
  switch or partition than the declaration: the topology and the cluster disagree, so neither
  is trusted.

`held_by_others` says how many of a node's declared GPUs pods of other schedulers hold (the API
server lets any scheduler bind anywhere; only a kubelet would refuse an over-full node).
`mig_shortfall` says why a node cannot take one more pod of a MIG profile: it advertises fewer
`nvidia.com/mig-<profile>` than our pods there would then request (its device plugin's layout
has no such free slice; a kubelet would refuse the pod as `OutOfnvidia.com/mig-...`).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass

from gputwin.api.bodies import Body, Obj

from .manifests import node_gpus

SWITCH_LABEL = "gputwin.io/switch"
PARTITION_LABEL = "gputwin.io/partition"
BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")


@dataclass(frozen=True, slots=True)
class Expected:
    """What the declaration says about one node."""

    switch: str
    gpus: int
    partition: str | None = None


def node_problem(node: Obj | None, expected: Expected, tolerated: Collection[str] = ()) -> str | None:
    """Why this node must not get new work (one line), or None when it may."""
    if node is None:
        return "no such Node in the cluster"
    body = Body(node)
    conditions = body.status.get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    if ready is None or ready.get("status") != "True":
        return "NotReady"
    spec = body.spec
    if spec.get("unschedulable"):
        return "cordoned (spec.unschedulable)"
    for taint in spec.get("taints") or []:
        if taint.get("effect") in BLOCKING_EFFECTS and taint.get("key") not in tolerated:
            return f"tainted {taint.get('key')}:{taint.get('effect')}"
    gpus = node_gpus(node)
    if gpus < expected.gpus:
        return f"allocatable nvidia.com/gpu is {gpus}, the topology declares {expected.gpus}"
    labels = body.labels
    switch = labels.get(SWITCH_LABEL)
    if switch is not None and switch != expected.switch:
        return f"label {SWITCH_LABEL}={switch}, the topology puts it under {expected.switch}"
    partition = labels.get(PARTITION_LABEL)
    if partition is not None and expected.partition is not None and partition != expected.partition:
        return f"label {PARTITION_LABEL}={partition}, it is declared in partition {expected.partition}"
    return None


def held_by_others(
    allocatable: Mapping[str, int], expected: Mapping[str, Expected], foreign: Mapping[str, int]
) -> dict[str, int]:
    """Declared node name -> GPUs of its declared count that others' pods hold (`allocatable`: each
    node's allocatable GPUs; `foreign`: GPUs per node requested by bound pods that are not ours). A
    node may advertise more GPUs than declared; others' pods use that surplus first, only the rest
    is taken from what we declared."""
    held: dict[str, int] = {}
    for name, gpus in foreign.items():
        want = expected.get(name)
        if want is None or gpus <= 0:
            continue
        surplus = max(allocatable.get(name, want.gpus) - want.gpus, 0)
        if gpus > surplus:
            held[name] = gpus - surplus
    return held


def mig_shortfall(node: Obj | None, name: str, resource: str, wanted: int) -> str | None:
    """Why Node `node` (named `name`; None: not seen) cannot run `wanted` pods' `resource` (ours
    there, the starting one included); None: it can."""
    advertised = node_gpus(node, resource) if node is not None else 0
    if wanted <= advertised:
        return None
    return (f"node {name} advertises {advertised} {resource}, this start would make {wanted}: its MIG layout "
            "(the device plugin's mixed strategy) has no such slice free")


__all__ = ["PARTITION_LABEL", "SWITCH_LABEL", "Expected", "held_by_others", "mig_shortfall", "node_problem"]
