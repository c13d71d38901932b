"""What one operator process watches, each kind a `gputwin.adapters.kube.watch.Watched` copy:
pods and nodes for the Kubernetes backend (`ClusterWatch`), the gputwin objects for the store
(`ObjectWatches`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable

from kubernetes.client import CoreV1Api, CustomObjectsApi

from gputwin.adapters.kube.store import api_client
from gputwin.adapters.kube.watch import Watched, node_matters, object_matters, pod_matters
from gputwin.api.bodies import Body, Obj
from gputwin.api.crdgen import NAMES
from gputwin.api.meta import GROUP, VERSION
from gputwin.api.v1alpha1 import KINDS


class ClusterWatch:
    """The two copies the Kubernetes backend schedules from: pods (all namespaces) and nodes.

    Each watch has its own `ApiClient` (a client is not thread-safe). `changed` is called on a
    watch thread whenever a change matters (set it before `start`, or any time after)."""

    def __init__(self, pods: Watched, nodes: Watched) -> None:
        self.pods, self.nodes = pods, nodes

    @classmethod
    def connect(cls, changed: Callable[[], None] | None = None) -> ClusterWatch:
        pods = Watched(CoreV1Api(api_client()).list_pod_for_all_namespaces, pods=True, matters=pod_matters,
                       changed=changed)  # fmt: skip
        nodes = Watched(CoreV1Api(api_client()).list_node, matters=node_matters, changed=changed)
        return cls(pods, nodes)

    def wait_synced(self, timeout: float) -> bool:
        return self.pods.wait_synced(timeout) and self.nodes.wait_synced(timeout)

    def stop(self) -> None:
        self.pods.stop()
        self.nodes.stop()


class ObjectWatches:
    """Watched copies of the gputwin kinds, for `KubeStore` (its `ObjectCache`).

    Namespaced kinds are watched in `namespace` when one is given (as the store lists them), else
    in every namespace; cluster-scoped kinds cluster-wide. Each kind has its own thread and
    `ApiClient`. `changed` is called (on a watch thread) when a change matters (`object_matters`).
    """

    def __init__(self, watches: dict[str, Watched], sync_seconds: float = 30.0) -> None:
        self.watches, self.sync_seconds = watches, sync_seconds
        self._waited: set[str] = set()  # kinds whose first list was waited for (once: a missing CRD
        # must not hold every pass for sync_seconds; the store's own list then says what is wrong)

    @classmethod
    def connect(cls, namespace: str | None = None, changed: Callable[[], None] | None = None) -> ObjectWatches:
        watches = {}
        for kind, names in NAMES.items():
            objects = CustomObjectsApi(api_client())
            if namespace and KINDS[kind].scope == "Namespaced":
                lister = functools.partial(objects.list_namespaced_custom_object, GROUP, VERSION, namespace,
                                           names.plural)  # fmt: skip
            else:
                lister = functools.partial(objects.list_cluster_custom_object, GROUP, VERSION, names.plural)
            watches[kind] = Watched(lister, matters=object_matters, changed=changed, name=names.plural)
        return cls(watches)

    def objects(self, kind: str) -> list[Obj] | None:
        """Every object of `kind` in the copy; None when there is no usable copy (read the API server)."""
        watch = self.watches.get(kind)
        if watch is None:
            return None
        first = kind not in self._waited
        self._waited.add(kind)
        if not watch.wait_synced(self.sync_seconds if first else 0.0):
            return None
        return watch.objects()

    def find(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        watch = self.watches.get(kind)
        return watch.find(namespace or "", name) if watch is not None else None

    def written(self, kind: str, obj: Obj) -> None:
        watch = self.watches.get(kind)
        if watch is not None and isinstance(obj, dict) and Body(obj).metadata:
            watch.written(obj)

    def stop(self) -> None:
        for watch in self.watches.values():
            watch.stop()


__all__ = ["ClusterWatch", "ObjectWatches"]
