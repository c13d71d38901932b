"""Seeded synthetic clusters and deep-learning job traces, for benchmarks and scale tests.

`synthetic_cluster` lays out a three-tier fat tree (one core switch, spines, leaves, nodes) and
carves partitions out of contiguous leaf groups. `synthetic_jobs` draws a job mix shaped like the
published GPU-cluster studies (Philly, Helios): mostly 1-GPU jobs, a thin tail of 16-64-GPU
jobs; log-normal run times with a median of about ten minutes and a tail to two days; a few
hundred users who resubmit the same job names, so history-based estimators (QSSF) can learn;
Poisson arrivals whose rate keeps the cluster about `load` busy.

Both functions are pure: the same arguments and seed give the same result (on a given Python
version: `random`'s algorithms are stable but not promised forever), because every draw comes
from one `random.Random(seed)` in a fixed order. No numpy: a million
jobs take a few seconds and the draws are held in plain lists only while the jobs are built.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import itertools
import math
import random
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from statistics import NormalDist

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

# GPU counts and how often each is asked for: 1-GPU jobs dominate every public DL trace
# (Philly ~60-70 %, Helios ~50-60 %); each doubling is rarer than the last.
GPU_MIX: tuple[tuple[int, float], ...] = (
    (1, 0.60),
    (2, 0.12),
    (4, 0.10),
    (8, 0.10),
    (16, 0.04),
    (32, 0.025),
    (64, 0.015),
)

USERS = 200
MEDIAN_SECONDS = 600.0  # median run time over all jobs: ~10 minutes
MAX_SECONDS = 2 * 86400.0  # cap of the long tail: two days
# Log-space spread of run times: between job templates (what a user's job name predicts) and
# between runs of one template (what it does not). sqrt(1.5^2 + 0.8^2) = 1.7 overall, which puts
# the 99.9th percentile near the two-day cap.
TEMPLATE_SIGMA = 1.5
RUN_SIGMA = 0.8
# Model families users name their jobs after; the numbered variants give QSSF's estimator
# a name-stem fallback (`bert-3` -> `bert-`).
FAMILIES = ("resnet", "bert", "gpt", "vit", "yolo", "unet", "lstm", "t5", "wav2vec", "dlrm", "moe", "clip")


# --- cluster --------------------------------------------------------------------------------------


def synthetic_cluster(
    nodes: int = 2000,
    gpus_per_node: int = 8,
    leaves: int = 16,
    spines: int = 2,
    partitions: int = 4,
    per_tier: float = 0.1,
    cross_node: float = 0.05,
    queue: str = "qssf",
    placement: str = "topology-aware",
) -> ClusterSpec:
    """A fat tree `core -> spine{s} -> leaf{l} -> n{i}`, partitions `p{i}` serving `type{i}`.

    Nodes are split evenly (to within one) over the leaves, leaves evenly over the spines, and
    each partition takes a contiguous run of leaves, so a partition sits under as few spines as
    the split allows. The overhead model charges `cross_node` for spanning nodes and `per_tier`
    per switch tier crossed.
    """
    _require(nodes >= 1 and gpus_per_node >= 1, "nodes and gpus_per_node must be >= 1")
    _require(1 <= spines <= leaves <= nodes, "need 1 <= spines <= leaves <= nodes")
    _require(1 <= partitions <= leaves, "need 1 <= partitions <= leaves (a partition owns whole leaves)")
    switches = [SwitchSpec("core")]
    switches += [SwitchSpec(f"spine{s}", "core") for s in range(spines)]
    switches += [SwitchSpec(f"leaf{leaf}", f"spine{_group(leaf, leaves, spines)}") for leaf in range(leaves)]
    width = len(str(nodes - 1))
    node_specs = tuple(
        NodeSpec(f"n{i:0{width}d}", gpus_per_node, f"leaf{_group(i, nodes, leaves)}") for i in range(nodes)
    )
    members: list[list[str]] = [[] for _ in range(partitions)]
    for i, node in enumerate(node_specs):
        members[_group(_group(i, nodes, leaves), leaves, partitions)].append(node.name)
    policy = PolicySpec(queue=queue, placement=placement)
    parts = tuple(
        PartitionSpec(name=f"p{p}", nodes=tuple(names), task_types=(f"type{p}",), policy=policy)
        for p, names in enumerate(members)
    )
    topology = TopologySpec(
        name=f"synthetic-{nodes}x{gpus_per_node}",
        switches=tuple(switches),
        nodes=node_specs,
        overhead=OverheadModel(per_tier=per_tier, cross_node=cross_node),
    )
    return ClusterSpec(topology=topology, partitions=parts)


def _group(index: int, count: int, groups: int) -> int:
    """Which of `groups` contiguous, near-equal blocks item `index` of `count` falls in."""
    return index * groups // count


def _require(ok: bool, message: str) -> None:
    if not ok:
        raise ValueError(message)


# --- jobs -----------------------------------------------------------------------------------------

# Run-time noise comes from a table of normal quantiles indexed by uniform draws: a lookup inside
# `choices(k=n)` is several times cheaper than one `gauss` call per job, and with 2^16 mid-point
# quantiles the error is far below the whole-second rounding of the durations.
_TABLE = 1 << 16


@dataclass(frozen=True, slots=True)
class _Template:
    """A job a user keeps resubmitting: who, under what name, and its typical run time."""

    user: str
    name: str
    median: float


def _code(bound: int) -> str:
    """The narrowest unsigned array type code for values up to `bound`."""
    return "B" if bound < 2**8 else "H" if bound < 2**16 else "I" if bound < 2**32 else "Q"


def synthetic_jobs(n: int, cluster: ClusterSpec, seed: int = 0, load: float = 0.9) -> list[JobSpec]:
    """`n` jobs for `cluster`, sorted by submit (whole seconds), `seq` = index, ids `j{index}`.

    Every job's task type is one the cluster routes (partitions are picked in proportion to their
    GPUs, so each gets about the same load); GPU counts follow `GPU_MIX`, capped at what the
    partition holds. Arrivals are a Poisson process whose rate makes the offered GPU-seconds
    `load` times the cluster's GPU capacity over the trace's span (ignoring placement overhead).
    """
    _require(n >= 0, "n must be >= 0")
    _require(load > 0, "load must be > 0")
    if n == 0:
        return []
    # A million new objects trigger hundreds of generational collections that find nothing to
    # free (nothing here forms a cycle); pausing the collector halves the generation time.
    with _collector_paused():
        return list(_generate(n, cluster, random.Random(seed), load))


def iter_synthetic_jobs(n: int, cluster: ClusterSpec, seed: int = 0, load: float = 0.9) -> Iterator[JobSpec]:
    """`synthetic_jobs`, the same jobs, built one at a time as they are read: only the drawn
    columns (~20 bytes a job) stay resident, for a replay that streams its input (`Simulator.run`)."""
    _require(n >= 0, "n must be >= 0")
    _require(load > 0, "load must be > 0")
    if n == 0:
        return iter(())
    with _collector_paused():
        return _generate(n, cluster, random.Random(seed), load)


def _generate(n: int, cluster: ClusterSpec, rng: random.Random, load: float) -> Iterator[JobSpec]:
    types, caps = _partition_table(cluster)
    templates, template_weights = _templates(rng)
    # Bulk draws, one column at a time: `choices(k=n)` runs its loop in a list comprehension and
    # bisects in C, several times cheaper than n separate calls.
    # Each column unboxed and narrow as soon as it is drawn: they outlive the draw in a streamed
    # replay (~20 bytes a job), and at most two lists of a pointer a job exist at once.
    drawn = rng.choices(range(len(types)), cum_weights=list(itertools.accumulate(caps)), k=n)
    picked_types = array(_code(len(types)), drawn)
    counts = _gpu_counts(rng, drawn, caps, n)
    del drawn
    gpu_counts = array(_code(max(counts)), counts)
    del counts
    # Template indices, not templates: `choices` draws the same numbers for either population.
    drawn = rng.choices(range(len(templates)), cum_weights=template_weights, k=n)
    template_of = array(_code(len(templates)), drawn)
    del drawn
    medians = [t.median for t in templates]
    spread = [math.exp(RUN_SIGMA * z) for z in _normal_quantiles()]
    noise = rng.choices(spread, k=n)
    run_times = array("d", (min(MAX_SECONDS, float(max(1, round(medians[t] * x)))) for t, x in zip(template_of, noise)))  # fmt: skip
    del noise
    submits = _arrivals(rng, n, _span(gpu_counts, run_times, sum(caps), load))
    users, names = [t.user for t in templates], [t.name for t in templates]
    # Positional, in JobSpec's field order: building a million frozen dataclasses is most of the
    # generation time, and `map` over ready columns is its cheapest form.
    return iter(
        map(
            JobSpec,
            map("j{}".format, range(n)),
            submits,
            run_times,
            gpu_counts,
            map(types.__getitem__, picked_types),
            map(users.__getitem__, template_of),
            map(names.__getitem__, template_of),
            itertools.repeat("COMPLETED"),
            itertools.repeat(0),
            itertools.repeat(0),
            range(n),
        )
    )


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _partition_table(cluster: ClusterSpec) -> tuple[list[str], list[int]]:
    """Per usable partition: a task type it serves and its GPU count (its share of arrivals)."""
    node_gpus = {node.name: node.gpus for node in cluster.topology.nodes}
    types: list[str] = []
    caps: list[int] = []
    for part in cluster.partitions:
        served = [t for t in part.task_types if t != "*"]
        total = sum(node_gpus[name] for name in part.nodes)
        if served and total:
            types.append(served[0])
            caps.append(total)
    _require(bool(types), "the cluster has no partition with GPUs serving a named task type")
    return types, caps


def _gpu_counts(rng: random.Random, part_of: Sequence[int], caps: Sequence[int], n: int) -> list[int]:
    sizes = [g for g, _ in GPU_MIX]
    drawn = rng.choices(sizes, cum_weights=list(itertools.accumulate(w for _, w in GPU_MIX)), k=n)
    if min(caps) >= sizes[-1]:
        return drawn
    # Only tiny clusters have partitions smaller than a 64-GPU job; clamp rather than redraw so
    # the mix of every partition that can hold it stays exactly as designed.
    largest = [max((g for g in sizes if g <= cap), default=1) for cap in caps]
    return [min(g, largest[p]) for g, p in zip(drawn, part_of)]


def _templates(rng: random.Random) -> tuple[list[_Template], list[float]]:
    """Every user's job names and their typical run times, with cumulative pick weights.

    Users are Zipf-popular (a few submit most jobs, as in every shared cluster); each has 1-12
    names from up to three model families, and reruns its first names most: a name's weight is
    the chance that `floor(U1 * U2 * count)` lands on it for two uniforms U1, U2.
    """
    log_median = math.log(MEDIAN_SECONDS)
    templates: list[_Template] = []
    weights: list[float] = []
    for u in range(USERS):
        count = rng.randint(1, 12)
        families = rng.sample(FAMILIES, k=min(3, count))
        user_weight = 1.0 / (u + 1) ** 0.8
        for k in range(count):
            median = math.exp(rng.gauss(log_median, TEMPLATE_SIGMA))
            templates.append(_Template(f"u{u}", f"{families[k % len(families)]}-{k}", median))
            weights.append(user_weight * (_product_cdf((k + 1) / count) - _product_cdf(k / count)))
    return templates, list(itertools.accumulate(weights))


def _product_cdf(x: float) -> float:
    """P(U1 * U2 <= x) for independent uniforms on [0, 1]."""
    return x - x * math.log(x) if x > 0 else 0.0


@functools.cache
def _normal_quantiles() -> tuple[float, ...]:
    """Standard normal quantiles at the mid-points of `_TABLE` equal-probability bins."""
    inv = NormalDist().inv_cdf
    return tuple(inv((k + 0.5) / _TABLE) for k in range(_TABLE))


def _span(gpus: Sequence[int], durations: Sequence[float], capacity: int, load: float) -> float:
    """Seconds over which the offered GPU-seconds equal `load` x capacity."""
    work = math.fsum(g * d for g, d in zip(gpus, durations))
    return work / (load * capacity)


def _arrivals(rng: random.Random, n: int, span: float) -> array[float]:
    """Poisson arrivals (exponential gaps) averaging `n` per `span` seconds, floored to seconds.

    The first job arrives at 0. Flooring a non-decreasing sequence keeps it sorted; whole seconds
    match real traces and let same-second arrivals share one scheduling cycle. Drawn, summed and
    floored one at a time straight into the array (lists of floats here were ~70 bytes a job).
    """
    mean_gap = span / n
    rand, log = rng.random, math.log
    # -log(1 - U) is a unit exponential; 1 - U is in (0, 1], so the log is always defined.
    gaps = (-log(1.0 - rand()) * mean_gap for _ in itertools.repeat(None, n - 1))
    return array("d", itertools.chain((0.0,), map(float, map(math.floor, itertools.accumulate(gaps)))))
