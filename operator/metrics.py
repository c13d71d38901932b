"""The operator's Prometheus metrics: one registry, and small functions that record into it.

Served as `/metrics` (text exposition format) by `gputwin.operator.probes`, on the probe port.

| metric | type | labels | recorded by |
|---|---|---|---|
| `gputwin_queue_length` | gauge | partition | `record_partitions`, from the GPUPartition statuses of each pass |
| `gputwin_gpus_free` | gauge | partition | same |
| `gputwin_gpus_used` | gauge | partition | same (total - free) |
| `gputwin_schedule_latency_seconds` | histogram | | `record_schedule_latency`, submit -> bind |
| `gputwin_preemptions_total` | counter | partition | `record_preemption` |
| `gputwin_binding_errors_total` | counter | | `record_binding_error` |
| `gputwin_events_dropped_total` | counter | | `record_event_dropped`: pod events not posted, the poster being behind |

A process has one registry (`METRICS`), not prometheus_client's global default one: the default
one also carries the interpreter's own collectors, and tests need fresh registries (`new_metrics`)
whose values they can read without another test's leftovers. Every function takes the registry as
an optional last argument for that reason.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from gputwin.api.status import GPUPartitionStatus

# Submit -> bind: sub-second when GPUs are free, minutes to hours when a job queues.
LATENCY_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 300.0, 900.0, 3600.0, 14400.0)


@dataclass(frozen=True)
class OperatorMetrics:
    """The registry and the metric families in it."""

    registry: CollectorRegistry
    queue_length: Gauge
    gpus_free: Gauge
    gpus_used: Gauge
    schedule_latency: Histogram
    preemptions: Counter
    binding_errors: Counter
    events_dropped: Counter


def new_metrics() -> OperatorMetrics:
    """A fresh registry with every gputwin metric registered (and nothing else)."""
    registry = CollectorRegistry(auto_describe=True)
    by_partition = ("partition",)
    return OperatorMetrics(
        registry=registry,
        queue_length=Gauge("gputwin_queue_length", "Jobs waiting in the partition's queue.",
                           by_partition, registry=registry),  # fmt: skip
        gpus_free=Gauge("gputwin_gpus_free", "GPUs of the partition not allocated to a running job.",
                        by_partition, registry=registry),  # fmt: skip
        gpus_used=Gauge("gputwin_gpus_used", "GPUs of the partition allocated to running jobs.",
                        by_partition, registry=registry),  # fmt: skip
        schedule_latency=Histogram("gputwin_schedule_latency_seconds",
                                   "Time from a job's submission to the binding of its pods.",
                                   buckets=LATENCY_BUCKETS, registry=registry),  # fmt: skip
        preemptions=Counter("gputwin_preemptions_total", "Jobs preempted (pods deleted, job re-queued).",
                            by_partition, registry=registry),  # fmt: skip
        binding_errors=Counter("gputwin_binding_errors_total",
                               "Binding subresource calls the API server refused or that failed.",
                               registry=registry),  # fmt: skip
        events_dropped=Counter("gputwin_events_dropped_total",
                               "Pod events dropped because too many were waiting to be posted.",
                               registry=registry),  # fmt: skip
    )


METRICS = new_metrics()  # the operator process's registry, served by the probe server


def record_partitions(statuses: Mapping[str, GPUPartitionStatus], metrics: OperatorMetrics = METRICS) -> None:
    """Set the queue and GPU gauges of every partition; forget partitions no longer declared."""
    for name, status in statuses.items():
        metrics.queue_length.labels(name).set(status.queued)
        metrics.gpus_free.labels(name).set(status.free_gpus)
        metrics.gpus_used.labels(name).set(max(status.total_gpus - status.free_gpus, 0))
    for gauge in (metrics.queue_length, metrics.gpus_free, metrics.gpus_used):
        # A deleted partition must disappear from the scrape, not report its last values forever.
        for partition in _partitions_of(gauge) - statuses.keys():
            gauge.remove(partition)


def record_schedule_latency(seconds: float, metrics: OperatorMetrics = METRICS) -> None:
    """One job bound `seconds` after it was submitted (negative clock skew counts as 0)."""
    metrics.schedule_latency.observe(max(seconds, 0.0))


def record_preemption(partition: str, metrics: OperatorMetrics = METRICS) -> None:
    metrics.preemptions.labels(partition).inc()


def record_binding_error(metrics: OperatorMetrics = METRICS) -> None:
    metrics.binding_errors.inc()


def record_event_dropped(metrics: OperatorMetrics = METRICS) -> None:
    metrics.events_dropped.inc()


class OperatorMetricsHooks:
    """The Kubernetes backend's `Metrics` seam (`gputwin.adapters.kube.plain_pods.Metrics`), into
    this registry: the operator wires it in, the backend imports nothing of the operator."""

    def __init__(self, metrics: OperatorMetrics = METRICS) -> None:
        self.metrics = metrics

    def binding_error(self, partition: str) -> None:
        record_binding_error(self.metrics)

    def preemption(self, partition: str) -> None:
        record_preemption(partition, self.metrics)

    def schedule_latency(self, seconds: float) -> None:
        record_schedule_latency(seconds, self.metrics)

    def event_dropped(self) -> None:
        record_event_dropped(self.metrics)


def exposition(metrics: OperatorMetrics = METRICS) -> tuple[bytes, str]:
    """The registry in Prometheus' text format, and the Content-Type to serve it with."""
    return generate_latest(metrics.registry), CONTENT_TYPE_LATEST


def _partitions_of(gauge: Gauge) -> set[str]:
    """The partitions a gauge has a series for (prometheus_client has no public list of children)."""
    return {sample.labels["partition"] for family in gauge.collect() for sample in family.samples}


__all__ = [
    "METRICS",
    "OperatorMetrics",
    "OperatorMetricsHooks",
    "exposition",
    "new_metrics",
    "record_binding_error",
    "record_event_dropped",
    "record_partitions",
    "record_preemption",
    "record_schedule_latency",
]
