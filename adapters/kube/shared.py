"""What one operator process shares between the Kubernetes backends it makes over its life.

A Controller rebuilt after a failed pass gets a new `KubernetesBackend`; the pod and node watches
(`shared_watch`: one list, then watch events, kept for the life of the process) and the hook that
wakes the reconcile loop on a change (`on_cluster_change`, set once by the kopf layer) outlive it.
"""

from __future__ import annotations

from collections.abc import Callable

from gputwin.adapters.kube.cluster_watch import ClusterWatch

_WATCH: ClusterWatch | None = None
_WAKE: list[Callable[[], None]] = []


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


__all__ = ["on_cluster_change", "shared_watch"]
