"""What one operator process shares between the Kubernetes backends it makes over its life.

A Controller rebuilt after a failed pass gets a new `KubernetesBackend`; the pod and node watches
(`shared_watch`: one list, then watch events, kept for the life of the process) and the hook that
wakes the reconcile loop on a change (`on_cluster_change`, set once by the kopf layer) outlive it.
`OperatorMetricsHooks` is the backend's `Metrics` seam into the operator's Prometheus registry.
"""

from __future__ import annotations

from collections.abc import Callable

from gputwin.adapters.kube.watch import ClusterWatch
from gputwin.operator.metrics import record_binding_error, record_preemption, record_schedule_latency

_WATCH: ClusterWatch | None = None
_WAKE: list[Callable[[], None]] = []


class OperatorMetricsHooks:
    """`Metrics` into the operator's Prometheus registry (`gputwin.operator.metrics`)."""

    def binding_error(self, partition: str) -> None:
        record_binding_error()

    def preemption(self, partition: str) -> None:
        record_preemption(partition)

    def schedule_latency(self, seconds: float) -> None:
        record_schedule_latency(max(seconds, 0.0))


def shared_watch() -> ClusterWatch:
    """This process's pod and node watches (started by the first pass that reads them): a
    Controller rebuilt after a failed pass keeps using them."""
    global _WATCH
    if _WATCH is None:
        _WATCH = ClusterWatch.connect(_wake)
    return _WATCH


def on_cluster_change(wake: Callable[[], None]) -> None:
    """Call `wake` (on a watch thread) whenever a pod or node change matters to scheduling."""
    _WAKE[:] = [wake]


def _wake() -> None:
    for wake in _WAKE:
        wake()


__all__ = ["OperatorMetricsHooks", "on_cluster_change", "shared_watch"]
