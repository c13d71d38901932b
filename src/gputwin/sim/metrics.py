"""Simulation metrics: JCT, queueing delay, utilisation, overall and per partition.

Definitions (the same as the reference simulator's, so compat numbers compare):
* JCT = end - submit; queueing delay = every second spent queued (first wait plus each wait after
  a preemption); averages are plain means over jobs, `all` is job-weighted over partitions.
* Percentiles interpolate linearly between closest ranks (numpy's default).
* GPU utilisation = busy GPU-seconds / (GPUs x makespan), makespan = last end - first submit;
  the series gives the same ratio per `interval` seconds of virtual time.
* Per tenant (partitions with quotas, gputwin.core.quota): its jobs' metrics; GPU-hours used and
  borrowed (above its guarantee) from the quota's integrals; `quota_delivered` = the integral of
  min(usage, guarantee) over that of min(demand, guarantee) (1.0 when it never wanted its
  guarantee); Jain's index (sum x)^2 / (n sum x^2) of x = GPU-hours per guaranteed GPU, over the
  tenants with a guarantee (None if there are none).
* Fragmentation (`fragmented_gpus`): the time average, over the makespan, of the free GPUs that
  cannot host the next waiting job, summed over partitions: per partition with a job queued, the
  free GPUs on nodes with fewer free than its queue head asks for (a head larger than a node:
  those on nodes not wholly free), as "Beware of Fragmentation" (Weng et al., ATC '23) counts a
  node's GPUs fragmented for a task that cannot fit there; 0 while nothing waits. Only measured
  when some job asks for more than one GPU (a 1-GPU job fits any free GPU: it would be 0).
* Memory does not grow with how long jobs run: the series has at most `MAX_BUCKETS` buckets.
  When the busy time seen so far would span more, the bucket width doubles (neighbouring
  buckets merge) until it fits, so a trace spanning years (or one job of 1e13 s) gets a coarser
  series, not one bucket per hour. Totals (`area`) are exact whatever the width.
"""

from __future__ import annotations

import math
import operator
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

from gputwin.core.model import JobSpec
from gputwin.core.quota import TenantUsage
from gputwin.core.state import PartitionState
from gputwin.sim.evaluation import JobMetrics, PartitionMetrics, Summary, TenantMetrics
from gputwin.sim.columns import RUN, SortedRuns, picked
from gputwin.sim.finished import FinishedJob, FinishedLog

T = TypeVar("T")

# Buckets in a utilisation series: 2.3 years of hours; beyond that the width doubles.
MAX_BUCKETS = 20_000
_INF = float("inf")


class Busy:
    """One partition's busy GPUs now, since when, their integral and its buckets (`BusyTracker.parts`):
    a change looks up this one record, not four dicts by name (a start and an end every job), and
    compiled its floats are plain C doubles (busy GPUs are counted as a float from 0.0: exact for
    whole GPUs, so the integrals are the same as from an integer count)."""

    def __init__(self) -> None:
        self.busy = 0.0  # a GPU share counts its fraction
        self.since = 0.0
        self.area = 0.0
        # A plain dict (read with `get`), not a defaultdict: compiled, its look-ups are the dict's own
        # C calls, not generic item calls (a start and an end every job add to one).
        self.buckets: dict[int, float] = {}
        # The bucket the last period fell in ("open"): its number, bounds [lo, hi) and sum so far,
        # not yet written to `buckets`. Most periods (between two instants) fall in the open bucket:
        # two float compares and an add, where the bucket's number (two float floor divisions) and a
        # dict read and write were ~800 instructions compiled. The sum is built by the same adds in
        # the same order as in the dict, so it is the same float. None open: lo > hi.
        self.open = 0
        self.lo, self.hi, self.sum = _INF, -_INF, 0.0

    def flush(self) -> None:
        """The open bucket's sum into `buckets`; none open after."""
        if self.lo <= self.hi:
            self.buckets[self.open] = self.sum
            self.lo, self.hi = _INF, -_INF


class BusyTracker:
    """Integrates busy GPUs over virtual time, per partition, into totals and fixed-width buckets.

    `interval` is the bucket width: the one asked for, doubled as often as MAX_BUCKETS requires.
    """

    def __init__(self, totals: dict[str, int], interval: float) -> None:
        self.totals = totals
        self.interval = interval
        self.parts: dict[str, Busy] = {name: Busy() for name in totals}
        self._span: tuple[int, int] | None = None  # first and last bucket touched, all partitions

    @property
    def busy(self) -> dict[str, float]:
        """Busy GPUs now, per partition."""
        return {name: part.busy for name, part in self.parts.items()}

    @property
    def area(self) -> dict[str, float]:
        """Busy GPU-seconds so far, per partition."""
        return {name: part.area for name, part in self.parts.items()}

    @property
    def buckets(self) -> dict[str, dict[int, float]]:
        """Busy GPU-seconds per bucket of `interval` seconds, per partition."""
        for part in self.parts.values():
            part.flush()
        return {name: part.buckets for name, part in self.parts.items()}

    def change(self, partition: str, now: float, delta: float) -> None:
        part = self.parts[partition]
        busy, since = part.busy, part.since
        if busy and now > since:
            part.area += busy * (now - since)
            # Within the open bucket (`Busy.open`): start // width == end // width == its number
            # exactly when lo <= start and end < hi (lo and hi are exact multiples of the width).
            if part.lo <= since and now < part.hi:
                part.sum += busy * (now - since)
            else:
                self._spread(part, since, now, busy)
        part.busy = busy + delta
        part.since = now

    def _spread(self, part: Busy, start: float, end: float, busy: float) -> None:
        part.flush()
        width, span = self.interval, self._span
        first, last = int(start // width), int(end // width)
        if span is None or first < span[0] or last > span[1]:  # else `_fit`'s usual case, inlined
            first, last = self._fit(start, end)
            width = self.interval
        buckets = part.buckets
        if first == last:  # the bucket is open now: later periods in it add to `part.sum`
            part.open, part.lo, part.hi = first, first * width, (first + 1) * width
            part.sum = buckets.get(first, 0.0) + busy * (end - start)
            return
        buckets[first] = buckets.get(first, 0.0) + busy * ((first + 1) * width - start)
        for b in range(first + 1, last):
            buckets[b] = buckets.get(b, 0.0) + busy * width
        if end > last * width:  # a period ending exactly on a border adds nothing to the next
            buckets[last] = buckets.get(last, 0.0) + busy * (end - last * width)

    def _fit(self, start: float, end: float) -> tuple[int, int]:
        """The buckets of `start` and `end`, after widening them until all fit in MAX_BUCKETS."""
        while True:
            first, last = int(start // self.interval), int(end // self.interval)
            low, high = (
                (first, last) if self._span is None else (min(self._span[0], first), max(self._span[1], last))
            )
            if high - low < MAX_BUCKETS:
                self._span = (low, high)
                return first, last
            self._coarsen()

    def _coarsen(self) -> None:
        """Double the bucket width: buckets 2k and 2k+1 become bucket k."""
        self.interval *= 2
        for part in self.parts.values():
            part.flush()
            merged: dict[int, float] = {}
            for bucket in sorted(part.buckets):
                merged[bucket // 2] = merged.get(bucket // 2, 0.0) + part.buckets[bucket]
            part.buckets = merged
        if self._span is not None:
            self._span = (self._span[0] // 2, self._span[1] // 2)


class FragmentTracker:
    """Integrates the fragmented GPUs of every partition over virtual time (see the module doc).

    `touched` is the scheduler's `cycled`: the partitions its cycles decided for, a superset of
    those any start, preemption, end or submit changed (each marks its partition for the cycle).
    The driver calls `sample` after each instant's cycle: the count those partitions are left
    with holds until the next instant that touches one (the others' state, hence their count,
    did not change). Sampling clears the set; no per-transition marking is needed."""

    def __init__(self, partitions: Mapping[str, PartitionState], touched: set[str]) -> None:
        # One dict look-up a touched partition: its state and the count it was last sampled with.
        self.sampled: dict[str, _Sampled] = {name: _Sampled(part) for name, part in partitions.items()}
        touched.clear()
        self.touched = touched
        self.current = 0
        self.since: float | None = None
        self.area = 0.0

    def sample(self, now: float) -> None:
        touched = self.touched
        if not touched:
            return
        if self.since is not None:
            self.area += self.current * (now - self.since)
        self.since = now
        sampled = self.sampled
        for name in touched:
            entry = sampled[name]
            part = entry.part
            # Nothing waits (tested first: most touched partitions, once their queue drains), no
            # GPU is free (a busy one), or the head takes one GPU (any free GPU hosts it): none
            # fragmented.
            if not part.queued or not (free := part.ledger.free_gpus) or (head := part.head()) is None:
                count = 0
            elif (gpus := head.gpus) == 1:
                count = 0
            else:
                # `free_gpus` is what placers see, summed over nodes: when the head asks for more
                # than that, no node has enough and every free GPU counts - what `fragmented`
                # would sum up node by node.
                ledger = part.ledger
                count = free if free < gpus <= ledger.max_node_gpus else ledger.fragmented(gpus)
            if count != entry.count:
                self.current += count - entry.count
                entry.count = count
        touched.clear()


class _Sampled:
    """A partition `FragmentTracker` samples, and its fragmented GPUs when it last did."""

    def __init__(self, part: PartitionState) -> None:
        self.part = part
        self.count = 0


def horizon_figures(
    taken_at: float, submits: Sequence[float], samples: Iterable[tuple[Sequence[float], Sequence[float], Any, Any]],
    horizon: float,
) -> dict[str, float]:
    """The metrics of the jobs queued at `taken_at` (submitted at `submits`) over forecast `samples`
    ((starts, ends, …) per sample, in the jobs' order): each the mean over samples, a job not ended
    by `taken_at + horizon` counted as ending there (what `gputwin whatif` and a live TraceReplay rank)."""
    until = taken_at + horizon
    per: dict[str, list[float]] = defaultdict(list)
    for starts, ends, _, _ in samples:
        jct = sorted(min(e, until) - s for e, s in zip(ends, submits))
        queue = sorted(min(t, until) - s for t, s in zip(starts, submits))
        figures = {"jobs": sum(e <= until for e in ends), "avg_jct": math.fsum(jct) / len(jct) if jct else 0.0,
                   "p50_jct": percentile(jct, 50), "p95_jct": percentile(jct, 95), "p99_jct": percentile(jct, 99),
                   "avg_queue": math.fsum(queue) / len(queue) if queue else 0.0, "p99_queue": percentile(queue, 99),
                   "makespan": max((min(e, until) for e in ends), default=taken_at) - taken_at}  # fmt: skip
        for key, value in figures.items():
            per[key].append(float(value))
    return {key: math.fsum(values) / len(values) for key, values in per.items()}  # statistics.fmean's sum


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile of pre-sorted values (q in 0..100)."""
    if not sorted_values:
        return 0.0
    pos = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def job_metrics(jobs: Sequence[FinishedJob]) -> JobMetrics:
    """Count, mean/percentile JCT and queueing delay, overhead paid, preemptions."""
    if not jobs:
        return JobMetrics()
    jct = sorted(j.end - j.spec.submit for j in jobs)
    queue = sorted(j.wait for j in jobs)
    n = len(jobs)
    return JobMetrics(
        jobs=n,
        avg_jct=round(math.fsum(jct) / n, 3),
        avg_queue=round(math.fsum(queue) / n, 3),
        p50_jct=round(percentile(jct, 50), 3),
        p95_jct=round(percentile(jct, 95), 3),
        p99_jct=round(percentile(jct, 99), 3),
        p99_queue=round(percentile(queue, 99), 3),
        preemptions=sum(j.preemptions for j in jobs),
        avg_overhead=round(math.fsum(j.overhead for j in jobs) / n, 5),
    )


def utilization(tracker: BusyTracker, partitions: Iterable[str], start: float, end: float) -> float:
    span = end - start
    gpus = sum(tracker.totals[p] for p in partitions)
    if span <= 0 or gpus == 0:
        return 0.0
    return round(sum(tracker.area[p] for p in partitions) / (gpus * span), 4)


def utilization_series(tracker: BusyTracker, partitions: Sequence[str]) -> list[dict[str, float]]:
    """Busy fraction per interval of virtual time, over the given partitions."""
    gpus = sum(tracker.totals[p] for p in partitions) or 1
    keys = sorted({b for p in partitions for b in tracker.buckets[p]})
    width = tracker.interval
    return [
        {
            "t": b * width,
            "gpu_utilization": round(
                sum(tracker.buckets[p].get(b, 0.0) for p in partitions) / (gpus * width), 4
            ),
        }
        for b in keys
    ]


def summarize(jobs: FinishedLog, tracker: BusyTracker) -> Summary:
    """The summary: overall metrics plus per-partition ones (the run's counts left for the caller),
    read from the log's columns (no per-job rows are built)."""
    first = min(jobs.submit, default=0.0)
    last = max(jobs.end, default=first)
    at = jobs.by_partition()
    partitions = {
        name: PartitionMetrics(**log_metrics(jobs, at.get(name, ())).to_json(), gpus=tracker.totals[name],
                               gpu_utilization=utilization(tracker, [name], first, last))
        for name in sorted(tracker.totals)
    }  # fmt: skip
    overall = utilization(tracker, tracker.totals, first, last)
    return Summary(**log_metrics(jobs, range(len(jobs))).to_json(), makespan=round(last - first, 3),
                   gpu_utilization=overall, partitions=partitions)  # fmt: skip


def log_metrics(log: FinishedLog, at: Sequence[int]) -> JobMetrics:
    """`job_metrics` of the log's jobs at positions `at`, from its columns."""
    n = len(at)
    if not n:
        return JobMetrics()
    pick = _Pick(at, len(log))
    # Sorted runs of unboxed floats (gputwin.sim.columns), one column at a time: a sorted list
    # would hold 32 bytes a job of float objects at the run's peak.
    jct = SortedRuns(map(operator.sub, pick(log.end), pick(log.submit)))
    avg_jct, p50, p95, p99 = jct.total() / n, percentile(jct, 50), percentile(jct, 95), percentile(jct, 99)
    del jct
    queue = SortedRuns(pick(log.wait))
    return JobMetrics(
        jobs=n, avg_jct=round(avg_jct, 3), avg_queue=round(queue.total() / n, 3), p50_jct=round(p50, 3),
        p95_jct=round(p95, 3), p99_jct=round(p99, 3), p99_queue=round(percentile(queue, 99), 3),
        preemptions=sum(pick(log.preemptions)), avg_overhead=round(math.fsum(pick(log.overhead)) / n, 5),
    )  # fmt: skip


class _Pick:
    """A column's values at positions `at` (of a log of `size` jobs): every position as the column
    itself; up to a sorted run's worth as one tuple, by an `itemgetter` made once for all the
    columns read (one C call a column, where a generator resumes once a value and a getter made
    per column boxes every position again); more than that by `picked`, a chunk at a time."""

    def __init__(self, at: Sequence[int], size: int) -> None:
        self.at = at
        self.every = isinstance(at, range) and at == range(size)
        self.getter = operator.itemgetter(*at) if not self.every and 1 < len(at) <= RUN else None

    def __call__(self, column: Sequence[T]) -> Iterable[T]:
        if self.every:
            return column
        if self.getter is not None:
            return self.getter(column)  # type: ignore[no-any-return]
        return picked(column, self.at)


def tenant_metrics(
    log: FinishedLog, usage: Sequence[TenantUsage], tenant_of: Callable[[str, JobSpec], str | None]
) -> dict[str, TenantMetrics]:
    """Per-tenant metrics by name: `usage` from the quotas of every partition, `tenant_of` the
    tenant of a job of a partition (None in a partition without quotas). The jobs' metrics come
    from the log's columns (`log_metrics`): a row per finished job cost ~1.2 s CPU at 100k jobs."""
    by_tenant: dict[str, list[int]] = defaultdict(list)
    names, part = log.partitions, log.part
    seen: dict[tuple[int, str, str], str | None] = {}  # a trace repeats its users: one lookup each
    specs = log.specs  # a list, or columns that build each spec when read (a streamed replay)
    for i in range(len(specs)):
        spec = specs[i]
        k = (part[i], spec.user, spec.model)
        tenant = seen[k] if k in seen else seen.setdefault(k, tenant_of(names[k[0]], spec))
        if tenant is not None:
            by_tenant[tenant].append(i)
    areas: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0, 0.0])
    for u in usage:
        area = areas[u.tenant]
        for i, value in enumerate((u.used, u.borrowed, u.delivered, u.entitled, u.guaranteed)):
            area[i] += value
    out = {}
    for name in sorted(areas):
        used, borrowed, delivered, entitled, guaranteed = areas[name]
        out[name] = TenantMetrics(**log_metrics(log, by_tenant[name]).to_json(), gpu_hours=round(used / 3600, 3),
                                  borrowed_gpu_hours=round(borrowed / 3600, 3), guaranteed_gpus=int(guaranteed),
                                  quota_delivered=round(delivered / entitled, 4) if entitled else 1.0)  # fmt: skip
    return out


def jain_index(tenants: dict[str, TenantMetrics]) -> float | None:
    """Jain's fairness index of GPU-hours per guaranteed GPU over tenants with a guarantee."""
    shares = [t.gpu_hours / t.guaranteed_gpus for t in tenants.values() if t.guaranteed_gpus]
    squares = math.fsum(x * x for x in shares)
    if not shares or squares == 0.0:
        return None
    return round(math.fsum(shares) ** 2 / (len(shares) * squares), 4)
