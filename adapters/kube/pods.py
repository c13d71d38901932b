"""Pods, Bindings and Nodes over the Kubernetes API: the raw calls of the Kubernetes backend.

`PodApi` is what `gputwin.adapters.kube.backend.KubernetesBackend` talks through: create a pod
(a 409 on its deterministic name returns the pod that exists, so a retry after a crash adopts it),
bind it to a node with the Binding subresource, delete it, list pods and nodes, post an event.
Many binds at once, from a few threads: `gputwin.adapters.kube.binds`; what a GPUJob's pods look
like: `gputwin.adapters.kube.manifests`.

Lists are read as raw JSON (`_preload_content=False`): the client's model deserialization costs
milliseconds per pod, which at 10,000 pods is most of a reconcile pass. For the same reason and
for a known client bug the Binding reply is not deserialized either: `create_namespaced_pod_binding`
fails on the server's reply with "Invalid value for `target`, must not be `None`"
(kubernetes-client/python #547, #825) although the binding was made.

Every call is retried on 429/5xx (and 409 where a retry can succeed) with the bounded backoff of
`gputwin.adapters.kube.store.Retry`; 404 on a delete is success (already gone).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar, cast

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gputwin.api.bodies import Body, Obj, Pod

from .store import TIMEOUT, Retry, api_client, drained

T = TypeVar("T")
PAGE = 2000  # pods per list page: fewer round trips, bounded memory
TRANSIENT = frozenset({429, 500, 502, 503, 504})

log = logging.getLogger(__name__)


class BindConflict(RuntimeError):
    """The pod is already bound to another node than the one asked for."""

def _retried(request: Callable[[], T], retry: Retry, sleep: Callable[[float], None] = time.sleep) -> T:
    delays = retry.delays()
    while True:
        try:
            return request()
        except ApiException as exc:
            delay = next(delays, None) if exc.status in TRANSIENT else None
            if delay is None:
                raise
            sleep(delay)


def _raw(response: Any) -> Obj:
    data = drained(response)
    return dict(json.loads(data.decode() if isinstance(data, bytes) else data))


def reason_of(exc: ApiException) -> str:
    """The API server's message for a failed call, in one line."""
    try:
        message = json.loads(exc.body or "").get("message")
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {exc.status}: {message or exc.reason}"


class PodApi:
    """The backend's calls on pods, bindings, nodes and GPUJobs, on one `ApiClient` (one thread)."""

    def __init__(self, api: client.ApiClient, retry: Retry = Retry()) -> None:
        self.api, self.retry = api, retry
        self.core = client.CoreV1Api(api)
        self.requests = 0  # API requests made (a benchmark reads it)

    @classmethod
    def connect(cls) -> PodApi:
        return cls(api_client())

    def _call(self, request: Callable[[], T]) -> T:
        self.requests += 1
        return _retried(request, self.retry)

    # --- pods ---------------------------------------------------------------------------------

    def create(self, pod: Obj) -> tuple[Obj, bool]:
        """Create `pod`; (the pod, True) — or (the pod already there under its name, False)."""
        namespace, name = Body(pod).key()
        try:
            # A dict body is sent as is (the client serializes dicts): no model round trip.
            made = self._call(lambda: self.core.create_namespaced_pod(
                namespace, cast(Any, pod), _preload_content=False, _request_timeout=TIMEOUT))  # fmt: skip
            return _raw(made), True
        except ApiException as exc:
            if exc.status != 409:
                raise
        got = self._call(lambda: self.core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=TIMEOUT))  # fmt: skip
        return _raw(got), False

    def bind(self, namespace: str, name: str, node: str) -> None:
        """Bind the pod to `node`; already bound there is success, elsewhere `BindConflict`."""
        body = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node),
        )
        try:
            drained(self._call(lambda: self.core.create_namespaced_pod_binding(
                name, namespace, body, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except ApiException as exc:
            if exc.status != 409:
                raise
            got = _raw(self._call(lambda: self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
            bound = Pod(got).node_name or None
            if bound != node:
                raise BindConflict(f"pod {namespace}/{name} is already bound to {bound}") from None

    def delete(self, namespace: str, name: str, grace_seconds: int | None = None) -> None:
        """Delete the pod (gone already is fine); `grace_seconds` None: the pod's own grace period."""
        options: Obj = {"_request_timeout": TIMEOUT, "_preload_content": False}
        if grace_seconds is not None:
            options["grace_period_seconds"] = grace_seconds
        try:
            drained(self._call(lambda: self.core.delete_namespaced_pod(name, namespace, **options)))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def pod(self, namespace: str, name: str) -> Obj | None:
        """One pod, None if it does not exist."""
        try:
            return _raw(self._call(lambda: self.core.read_namespaced_pod(
                name, namespace, _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def pods(
        self, field_selector: str = "", label_selector: str = "", namespace: str | None = None
    ) -> list[Obj]:
        """Every pod (of `namespace`, else of all) matching the selectors, as plain dicts."""
        found: list[Obj] = []
        token: str | None = None
        while True:
            options: Obj = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT}
            if field_selector:
                options["field_selector"] = field_selector
            if label_selector:
                options["label_selector"] = label_selector
            if token:
                options["_continue"] = token
            if namespace:
                page = _raw(self._call(lambda: self.core.list_namespaced_pod(namespace, **options)))
            else:
                page = _raw(self._call(lambda: self.core.list_pod_for_all_namespaces(**options)))
            found.extend(page.get("items") or [])
            token = Body(page).metadata.get("continue") or None
            if token is None:
                return found

    def nodes(self) -> list[Obj]:
        got = self._call(lambda: self.core.list_node(_preload_content=False, _request_timeout=TIMEOUT))
        return list(_raw(got).get("items") or [])

    def event(self, pod: Obj, reason: str, message: str, type: str = "Normal") -> None:
        """A core/v1 Event about a pod, as kube-scheduler posts them (best effort: never raises)."""
        about = Body(pod)
        namespace, name = about.key()
        now = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body: Obj = {
            "metadata": {"generateName": f"{name}.", "namespace": namespace},
            "involvedObject": {"apiVersion": "v1", "kind": "Pod", "name": name,
                               "namespace": namespace, "uid": about.metadata.get("uid")},
            "reason": reason, "message": message[:1024], "type": type, "count": 1,
            "firstTimestamp": now, "lastTimestamp": now, "source": {"component": "gputwin"},
            "reportingComponent": "gputwin", "reportingInstance": "gputwin",
        }  # fmt: skip
        try:
            drained(self._call(lambda: self.core.create_namespaced_event(
                namespace, cast(Any, body), _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except (ApiException, OSError) as exc:
            log.warning(
                "could not post event %s on pod %s/%s: %s", reason, namespace, name, exc
            )


__all__ = ["PAGE", "BindConflict", "PodApi", "reason_of"]
