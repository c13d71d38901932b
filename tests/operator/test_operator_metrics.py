"""The operator's Prometheus metrics: recorded values, and `/metrics` scraped from the real probe server."""

from __future__ import annotations

import asyncio
import socket
import urllib.error
import urllib.request
from collections.abc import Iterator

import pytest
from prometheus_client import CONTENT_TYPE_LATEST
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from gputwin.api.status import GPUPartitionStatus
from gputwin.operator.metrics import (
    OperatorMetrics,
    new_metrics,
    record_binding_error,
    record_event_dropped,
    record_partitions,
    record_preemption,
    record_schedule_latency,
)
from gputwin.operator.probes import serve_probes
from gputwin.operator.service import OperatorService


@pytest.fixture
def metrics() -> OperatorMetrics:
    return new_metrics()


def value(metrics: OperatorMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def part(total: int, free: int, queued: int) -> GPUPartitionStatus:
    return GPUPartitionStatus.model_validate({"totalGPUs": total, "freeGPUs": free, "queued": queued})


@pytest.mark.parametrize(
    ("name", "total", "free", "queued", "used"),
    [("train", 48, 20, 3, 28), ("infer", 16, 16, 0, 0), ("empty", 0, 0, 7, 0)],
)
def test_partition_gauges_follow_statuses(
    metrics: OperatorMetrics, name: str, total: int, free: int, queued: int, used: int
) -> None:
    record_partitions({name: part(total, free, queued)}, metrics)
    assert value(metrics, "gputwin_queue_length", partition=name) == queued
    assert value(metrics, "gputwin_gpus_free", partition=name) == free
    assert value(metrics, "gputwin_gpus_used", partition=name) == used


def test_partition_gauges_move_and_a_removed_partition_disappears(metrics: OperatorMetrics) -> None:
    record_partitions({"train": part(48, 20, 3), "infer": part(16, 8, 1)}, metrics)
    record_partitions({"train": part(48, 40, 0)}, metrics)
    assert value(metrics, "gputwin_gpus_free", partition="train") == 40
    assert value(metrics, "gputwin_queue_length", partition="train") == 0
    for gauge in ("gputwin_queue_length", "gputwin_gpus_free", "gputwin_gpus_used"):
        assert value(metrics, gauge, partition="infer") is None


def test_counters_and_latency_histogram(metrics: OperatorMetrics) -> None:
    for seconds in (0.03, 0.4, 1.5, 120.0, -1.0):  # a negative (clock skew) counts as 0
        record_schedule_latency(seconds, metrics)
    record_preemption("train", metrics)
    record_preemption("train", metrics)
    record_preemption("infer", metrics)
    record_binding_error(metrics)
    assert value(metrics, "gputwin_schedule_latency_seconds_count") == 5
    assert value(metrics, "gputwin_schedule_latency_seconds_sum") == pytest.approx(121.93)
    assert value(metrics, "gputwin_schedule_latency_seconds_bucket", le="0.05") == 2
    assert value(metrics, "gputwin_schedule_latency_seconds_bucket", le="2.0") == 4
    assert value(metrics, "gputwin_preemptions_total", partition="train") == 2
    assert value(metrics, "gputwin_preemptions_total", partition="infer") == 1
    assert value(metrics, "gputwin_binding_errors_total") == 1


def test_fresh_registries_do_not_share_values() -> None:
    first, second = new_metrics(), new_metrics()
    record_binding_error(first)
    assert value(first, "gputwin_binding_errors_total") == 1
    assert value(second, "gputwin_binding_errors_total") == 0


# --- /metrics over HTTP ----------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def scrape(metrics: OperatorMetrics) -> Iterator[tuple[str, asyncio.AbstractEventLoop]]:
    """The real probe server (aiohttp) on a free loopback port, serving `metrics`; its URL."""
    loop = asyncio.new_event_loop()
    service = OperatorService(lambda: pytest.fail("no reconcile pass runs in this test"))
    port = free_port()
    runner = loop.run_until_complete(serve_probes(service, port, "127.0.0.1", metrics))
    try:
        yield f"http://127.0.0.1:{port}", loop
    finally:
        loop.run_until_complete(runner.cleanup())
        loop.close()


def get(url: str, loop: asyncio.AbstractEventLoop) -> tuple[int, str, str]:
    """GET from a worker thread while the server's loop runs here."""

    def fetch() -> tuple[int, str, str]:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return int(answer.status), answer.headers["Content-Type"], answer.read().decode()

    return loop.run_until_complete(asyncio.to_thread(fetch))


def samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert isinstance(sample, Sample)
            out[(sample.name, frozenset(sample.labels.items()))] = sample.value
    return out


def test_metrics_endpoint_serves_every_metric_in_text_format(
    metrics: OperatorMetrics, scrape: tuple[str, asyncio.AbstractEventLoop]
) -> None:
    url, loop = scrape
    record_partitions({"train": part(48, 20, 3)}, metrics)
    record_schedule_latency(0.7, metrics)
    record_preemption("train", metrics)
    record_binding_error(metrics)
    record_event_dropped(metrics)
    record_event_dropped(metrics)
    status, content_type, body = get(f"{url}/metrics", loop)
    assert status == 200
    assert content_type == CONTENT_TYPE_LATEST  # Prometheus' text format, with its version
    found = samples(body)
    train = frozenset({("partition", "train")})
    assert found[("gputwin_queue_length", train)] == 3
    assert found[("gputwin_gpus_free", train)] == 20
    assert found[("gputwin_gpus_used", train)] == 28
    assert found[("gputwin_preemptions_total", train)] == 1
    assert found[("gputwin_binding_errors_total", frozenset())] == 1
    assert found[("gputwin_events_dropped_total", frozenset())] == 2
    assert found[("gputwin_schedule_latency_seconds_count", frozenset())] == 1
    assert found[("gputwin_schedule_latency_seconds_bucket", frozenset({("le", "1.0")}))] == 1
    assert found[("gputwin_schedule_latency_seconds_bucket", frozenset({("le", "0.5")}))] == 0
    # Only gputwin's own metrics: no interpreter/process collectors from the global registry.
    assert {name for name, _ in found} <= {
        f"gputwin_{n}"
        for n in ("queue_length", "gpus_free", "gpus_used", "preemptions_total", "preemptions_created",
                  "binding_errors_total", "binding_errors_created", "schedule_latency_seconds_count",
                  "schedule_latency_seconds_sum", "schedule_latency_seconds_bucket",
                  "schedule_latency_seconds_created", "events_dropped_total", "events_dropped_created")  # fmt: skip
    }


def test_probes_still_answer_beside_metrics(scrape: tuple[str, asyncio.AbstractEventLoop]) -> None:
    url, loop = scrape
    # The loop never started: not live, not ready (503) -- the point is that the routes still exist.
    for path in ("/healthz", "/readyz"):
        with pytest.raises(urllib.error.HTTPError) as refused:
            get(f"{url}{path}", loop)
        assert refused.value.code == 503
