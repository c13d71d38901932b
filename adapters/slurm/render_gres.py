"""Node GRES for the site's slurm.conf and gres.conf: typed GPUs and GPU shards (SLURM's `gres/shard`).

Node GRES change only with a restart of the daemons, so nothing here is written by `apply`: `render`
shows the lines (``gputwin-nodes.conf`` for slurm.conf, ``gres.conf`` lines beside the site's own
``Name=gpu ... File=`` lines) and `apply` checks that slurmctld already reports them.

**Shards** (SLURM 22.05's GRES sharding, gres.html "Sharding"). A node group's `shardsPerGpu` S
(reaching the core's NodeSpec as the label `SHARDS_LABEL`) becomes, on its nodes of G GPUs:

- ``GresTypes=gpu,shard``, ``NodeName=... Gres=gpu[:MODEL]:G,shard:G*S`` in slurm.conf;
- ``NodeName=... Name=shard Count=G*S`` in gres.conf: with Name and Count only, SLURM spreads the
  count evenly over the node's GPUs (S on each, the documented "no File" case);
- ``AccountingStorageTRES=...,gres/shard``, so AllocTRES (and sacct history) carries the shards.

SLURM allocates a GPU either as ``gres/gpu`` or as shards, never both, and a job's shards fit on one
GPU of each node (unless ``SelectTypeParameters`` has ``MULTIPLE_SHARING_GRES_PJ``). A share of
`milli` milli-GPU asks for `shards_for(milli, S)` = ceil(milli x S / 1000) shards: rounded up, so the
shards on one GPU never add up to more than 1000 milli (never over-committed), but a GPU may hold
fewer shares than the twin packs on it (S = 4: two 300-milli shares take 2 + 2 shards, a third
waits, where the twin fits three). job_submit.lua applies the same rule (`render_lua`).
"""

from __future__ import annotations

import hostlist

from gputwin.api.meta import MAX_SHARDS_PER_GPU, SHARDS_LABEL
from gputwin.core.model import ClusterSpec, NodeSpec

from .checks import check_name
from .errors import SlurmInputError
from .render_tenancy import accounting_tres

SHARD_TRES = "gres/shard"
WHOLE = 1000  # milli-GPU in one GPU


def node_shards(node: NodeSpec) -> int:
    """Shards per GPU of `node` (0: not shared), checked as the API bounds them."""
    text = node.labels.get(SHARDS_LABEL)
    if text is None:
        return 0
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_SHARDS_PER_GPU):
        raise SlurmInputError(f"node {node.name}: shardsPerGpu {text!r:.20} is not a whole number "
                              f"1..{MAX_SHARDS_PER_GPU}")  # fmt: skip
    return int(text)


def shards_for(milli: int, per_gpu: int) -> int:
    """Shards a share of `milli` milli-GPU asks for: ceil(milli x per_gpu / 1000), at least 1."""
    return max(1, -(-milli * per_gpu // WHOLE))


def partition_shards(cluster: ClusterSpec) -> dict[str, int]:
    """Shards per GPU of each partition with shared nodes; job_submit.lua maps a fraction with one
    count per partition, so nodes of one partition that differ are refused."""
    by_name = {n.name: n for n in cluster.topology.nodes}
    found: dict[str, int] = {}
    for part in cluster.partitions:
        counts = sorted({s for s in (node_shards(by_name[n]) for n in part.nodes if n in by_name) if s})
        if len(counts) > 1:
            raise SlurmInputError(f"partition {part.name}: its nodes split GPUs into {counts} shards (shardsPerGpu); "
                                  "job_submit.lua maps a fraction with one count per partition")  # fmt: skip
        if counts:
            found[part.name] = counts[0]
    return found


def cluster_shards(cluster: ClusterSpec) -> int:
    """The cluster's one shards-per-GPU count for reading sacct history back (`gres/shard=N` as the
    share N / S of a GPU); 0 when no partition shares, or when partitions differ (whole GPUs then)."""
    counts = set(partition_shards(cluster).values())
    return counts.pop() if len(counts) == 1 else 0


def _groups(cluster: ClusterSpec) -> dict[tuple[str, int, int], list[str]]:
    """(model, GPUs, shards per GPU) -> node names, in node order; every name checked."""
    groups: dict[tuple[str, int, int], list[str]] = {}
    for node in cluster.topology.nodes:
        check_name(node.name, "node name")
        if node.model:
            check_name(node.model, f"node {node.name} GPU model")
        groups.setdefault((node.model, node.gpus, node_shards(node)), []).append(node.name)
    return groups


def render_nodes(cluster: ClusterSpec) -> str:
    """NodeName lines with typed GRES (``Gres=gpu:MODEL:N``, untyped without a model) and shards, for
    the site's slurm.conf: node GRES change only with a restart, so `apply` checks them, never writes."""
    groups = _groups(cluster)
    shared = any(s for _, _, s in groups)
    lines = ["# gputwin: node GRES for slurm.conf (and gres.conf Type=), needs a restart to change.\n"]
    tres = accounting_tres(cluster)
    if shared:  # shards in AllocTRES: sacct history reads them back as fractions
        tres = ",".join(filter(None, [tres or "gres/gpu", SHARD_TRES]))
        lines.append("GresTypes=gpu,shard\n")
    if tres is not None:  # per-model quotas: QOS GrpTRES=gres/gpu:MODEL=N counts only listed TRES
        lines.append(f"AccountingStorageTRES={tres}\n")
    for (model, gpus, shards), names in groups.items():
        gres = f"gpu:{model}:{gpus}" if model else f"gpu:{gpus}"
        if shards and gpus:
            gres += f",shard:{gpus * shards}"
        lines.append(f"NodeName={hostlist.collect_hostlist(names)} Gres={gres}\n")
    return "".join(lines)


def render_gres_conf(cluster: ClusterSpec) -> str:
    """gres.conf lines for the shared nodes (empty when none): Name and Count, spread evenly."""
    groups = _groups(cluster).items()
    shared = [(gpus, shards, names) for (_, gpus, shards), names in groups if shards and gpus]
    if not shared:
        return ""
    lines = ["# gputwin: gres.conf shard lines, beside the site's Name=gpu lines; SLURM spreads each Count\n",
             "# evenly over the node's GPUs. Needs a restart to change.\n"]  # fmt: skip
    for gpus, shards, names in shared:
        lines.append(f"NodeName={hostlist.collect_hostlist(names)} Name=shard Count={gpus * shards}\n")
    return "".join(lines)


def node_models(cluster: ClusterSpec) -> tuple[tuple[str, str], ...]:
    """(node, model) for nodes that declare a model: `apply` checks slurmctld reports that type."""
    nodes = cluster.topology.nodes
    return tuple((n.name, check_name(n.model, f"node {n.name} GPU model")) for n in nodes if n.model)


def node_shard_counts(cluster: ClusterSpec) -> tuple[tuple[str, int], ...]:
    """(node, shards on it) for shared nodes: `apply` checks slurmctld reports ``shard:COUNT``."""
    return tuple((n.name, n.gpus * s) for n in cluster.topology.nodes if (s := node_shards(n)) and n.gpus)


__all__ = ["SHARD_TRES", "cluster_shards", "node_models", "node_shard_counts", "node_shards",
           "partition_shards", "render_gres_conf", "render_nodes", "shards_for"]  # fmt: skip
