"""The operator's object store over the Kubernetes API: `KubeStore`.

`KubeStore` satisfies the `Store` protocol of `gputwin.operator.store` (structurally: adapters do
not import the operator) with the official `kubernetes` client:

- `list(kind)`: every object of a kind, paged (`limit`/`continue`), sorted by (namespace, name);
  namespaced kinds (GPUJob, TraceReplay) come from one namespace when the store is given one,
  else from all; cluster-scoped kinds always from the whole cluster. Scope and plural come from
  the typed models the CRDs are generated from (`KINDS[kind].scope`, `crdgen.NAMES`).
- `get`: one object, None on 404; `get_configmap`: a core/v1 ConfigMap's `data`, None on 404
  (TraceReplays read traces from ConfigMaps; the operator's RBAC grants `get` on configmaps).
- `patch_status`: a JSON merge patch on the `/status` subresource (`{"status": …}`), so the
  operator never touches what users wrote; `patch_spec`: a merge patch on the object itself.
  A write to an object that is gone raises `ObjectNotFound` (a `LookupError`, as the protocol says).
- `event`: a core/v1 Event whose `involvedObject` names the object (with its uid, so
  `kubectl describe` shows it). Events of cluster-scoped objects go to namespace `default`, as
  kubectl does for Nodes. Posting is best effort: a failed event is logged, never raised, because a
  reconcile pass must not fail over a message about it.

Retries: every call is retried on 409 Conflict, 429 and 5xx answers with a bounded, doubling
backoff (`Retry`). The patches carry no `resourceVersion`, so the API server applies them to
whatever is stored and a 409 can only come from its own internal retries giving up; retrying
the same merge patch is safe because applying it twice gives the same object. Anything else (403,
404, 422, a connection error) is raised at once: 404 as `ObjectNotFound`/None, and a missing CRD
as `MissingCRD`, whose message says what to apply.

A watched copy (`cache`, an `ObjectCache` such as `gputwin.adapters.kube.cluster_watch.ObjectWatches`):
`list` reads it instead of the API server whenever it is usable (it answers None while it is not
listed yet or its watch is resuming: then the store lists), and every object the API server
returns to a `get` or a patch goes into it, so a pass reads its own writes. Without one, every
`list` is a LIST.

Threads: a `KubeStore` is meant for ONE thread. The operator calls it only from its single
reconcile worker thread (`gputwin.operator.service`); the uid cache it keeps for events is a
plain dict with no lock. The underlying `ApiClient` (urllib3 pool) could be shared, the store
object should not.

Deferred status writes (`writer`, a `StatusWriter`): the statuses of the kinds the writer is for
(the operator hands it SwitchTopology, GPUPartition and SchedulingPolicy: reports it never
rebuilds state from) are not written by `patch_status` but handed to the writer, whose own thread
and `ApiClient` write them while the pass goes on; `list` and `get` show those kinds with the
statuses still waiting to be written, so a pass reads its own writes exactly as if they had been
made at once. Every other kind (GPUJob, TraceReplay) is written synchronously, as before. The
class docstring of `StatusWriter` (`gputwin.adapters.kube.status_writer`) says how writes are
coalesced and why nothing is lost.
"""

from __future__ import annotations

import copy
import datetime as dt
import functools
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar, cast

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from gputwin.api.bodies import Body, Obj, Objs, key_of
from gputwin.api.crdgen import NAMES
from gputwin.api.meta import API_VERSION, GROUP, VERSION
from gputwin.api.v1alpha1 import KINDS

T = TypeVar("T")

MERGE_PATCH = "application/merge-patch+json"
RETRIED = frozenset({409, 429, 500, 502, 503, 504})
TIMEOUT = (5.0, 30.0)  # (connect, read) seconds for every request
PAGE = 500  # objects per list page
COMPONENT = "gputwin-operator"
EVENT_NAMESPACE = "default"  # where events about cluster-scoped objects go
MESSAGE_LIMIT = 1024  # events.k8s.io's limit on a note; core/v1 has none, but kubectl shows one line

log = logging.getLogger(__name__)

if TYPE_CHECKING:
    from .status_writer import StatusWriter


class ObjectNotFound(KeyError):
    """The object a write was meant for does not exist (any more)."""


class MissingCRD(RuntimeError):
    """The API server does not know a gputwin kind: its CRD is not installed."""


@dataclass(frozen=True, slots=True)
class Retry:
    """How often and how patiently a call is retried: `attempts` tries in all, delays doubling."""

    attempts: int = 5
    first: float = 0.05
    cap: float = 1.0

    def delays(self) -> Iterator[float]:
        """The waits between attempts (one fewer than attempts)."""
        delay = self.first
        for _ in range(self.attempts - 1):
            yield min(delay, self.cap)
            delay *= 2


class ObjectCache(Protocol):
    """A copy of the gputwin objects kept current by watches (`gputwin.adapters.kube.watch`)."""

    def objects(self, kind: str) -> Objs | None:
        """Every object of `kind` (not to be changed by the reader), or None: list the API server."""
        ...

    def find(self, kind: str, namespace: str | None, name: str) -> Obj | None: ...

    def written(self, kind: str, obj: Obj) -> None:
        """The object as the API server just returned it (kept unless the copy has a newer one)."""
        ...


def api_client() -> client.ApiClient:
    """An API client from the pod's service account, else from the kubeconfig (`$KUBECONFIG`)."""
    configuration = client.Configuration()
    # kubernetes.config is the one untyped corner of the (otherwise typed) client.
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        # $KUBECONFIG as it is now: the client's own default was read once, when it was imported.
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.environ.get("KUBECONFIG"), client_configuration=configuration
        )
    return client.ApiClient(configuration)


def drained(response: Any) -> Any:
    """Read an unparsed (`_preload_content=False`) reply to its end, then give its connection back.
    Without `release_conn` urllib3 keeps the connection and the next request opens a new TLS
    connection (that handshake was 60% of a bind). Without the read, the unread body goes back
    with the connection: the next request on it reads that body as its status line
    (BadStatusLine), whenever it comes before urllib3 sees the socket readable and drops it."""
    data = response.data
    response.release_conn()
    return data


class KubeStore:
    """gputwin objects in a Kubernetes API server, read and written as plain dicts."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str | None = None,
        *,
        retry: Retry = Retry(),
        component: str = COMPONENT,
        instance: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
        cache: ObjectCache | None = None,
        writer: StatusWriter | None = None,
    ) -> None:
        self.namespace = namespace or None
        self.cache = cache
        self.writer = writer  # writes the statuses of `writer.kinds` off this thread (module docstring)
        self.retry, self.component, self._sleep = retry, component, sleep
        self.instance = instance or socket.gethostname()
        self._api = api
        self._objects = client.CustomObjectsApi(api)
        self._core = client.CoreV1Api(api)
        self._uids: dict[tuple[str, str | None, str], str] = {}

    @classmethod
    def connect(
        cls,
        namespace: str | None = None,
        cache: ObjectCache | None = None,
        writer: StatusWriter | None = None,
    ) -> KubeStore:
        """A store on the cluster this process is configured for (in-cluster or kubeconfig)."""
        return cls(api_client(), namespace, cache=cache, writer=writer)

    def close_client(self) -> None:
        """Close the `ApiClient` (its connection pool); the store is not used afterwards."""
        self._api.close()  # type: ignore[no-untyped-call]

    def _deferred(self, kind: str) -> StatusWriter | None:
        writer = self.writer
        return writer if writer is not None and kind in writer.kinds else None

    # --- the Store protocol -------------------------------------------------------------------

    def list(self, kind: str) -> Objs:
        found = self._list(kind)
        writer = self._deferred(kind)
        return writer.overlay(kind, found) if writer is not None else found

    def _list(self, kind: str) -> Objs:
        copied = self.cache.objects(kind) if self.cache is not None else None
        if copied is not None:  # the objects are the copy's own: readers do not change them
            return sorted(copied, key=key_of)
        plural, namespaced = _plural(kind), _namespaced(kind)
        found: Objs = []
        token: str | None = None
        while True:
            page = self._call(kind, functools.partial(self._list_page, plural, namespaced, token))
            found.extend(self._keep(kind, item) for item in page.get("items") or [])
            token = Body(page).metadata.get("continue") or None
            if token is None:
                break
        return sorted(found, key=key_of)

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        try:
            got = self._object_call(kind, namespace, name, "get_{}_custom_object")
        except ObjectNotFound:
            return None
        self._written(kind, copy.deepcopy(got))  # the caller's object is its own to change
        found = self._keep(kind, cast(Obj, got))
        writer = self._deferred(kind)
        return writer.overlay(kind, [found])[0] if writer is not None else found

    def get_configmap(self, namespace: str, name: str) -> dict[str, str] | None:
        request = functools.partial(
            self._core.read_namespaced_config_map, name, namespace, _request_timeout=TIMEOUT
        )
        try:
            got = self._call("ConfigMap", request)
        except (ObjectNotFound, MissingCRD):  # core/v1 is always served: any 404 is a missing ConfigMap
            return None
        return {str(k): str(v) for k, v in (got.data or {}).items()}

    def patch_status(self, kind: str, namespace: str | None, name: str, status: Obj) -> None:
        writer = self._deferred(kind)
        if writer is not None and writer.put(kind, namespace, name, status):
            return  # the writer's thread writes it; `list`/`get` show it meanwhile
        got = self._object_call(kind, namespace, name, "patch_{}_custom_object_status", {"status": status},
                                _content_type=MERGE_PATCH)  # fmt: skip
        self._written(kind, got)

    def patch_spec(self, kind: str, namespace: str | None, name: str, spec: Obj) -> None:
        got = self._object_call(kind, namespace, name, "patch_{}_custom_object", {"spec": spec},
                                _content_type=MERGE_PATCH)  # fmt: skip
        self._written(kind, got)

    def _written(self, kind: str, got: object) -> None:
        if self.cache is not None and isinstance(got, dict):
            self.cache.written(kind, cast(Obj, got))

    def event(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        reason: str,
        message: str,
        type: Literal["Normal", "Warning"] = "Normal",
        key: str | None = None,
    ) -> None:
        target = namespace if _namespaced(kind) else None
        try:
            uid = self._uid(kind, target, name)
            body = self._event_body(kind, target, name, uid, reason, message, type)
            if key is not None:
                # One name per transition of this object (uid included, so a re-created object
                # starts afresh): posting it again after a crash is a 409, not a second event.
                body["metadata"]["name"] = f"{name}.{(uid or '')[:8]}.{key}".lower()
                del body["metadata"]["generateName"]
            where = target or EVENT_NAMESPACE
            # A dict body is sent as is and the reply is not deserialized into models: a backlog's
            # pass posts one event per job, and the client's models cost more CPU than the request.
            drained(self._call("Event", lambda: self._core.create_namespaced_event(
                where, cast(Any, body), _preload_content=False, _request_timeout=TIMEOUT)))  # fmt: skip
        except ApiException as exc:
            if exc.status != 409:
                log.warning("could not post event %s on %s %s: %s", reason, kind, name, exc)
        except (LookupError, MissingCRD, OSError, HTTPError) as exc:  # best effort: never fails a pass
            log.warning("could not post event %s on %s %s: %s", reason, kind, name, exc)

    # --- requests ----------------------------------------------------------------------------

    def _list_page(self, plural: str, namespaced: bool, token: str | None) -> Obj:
        options: dict[str, Any] = {"limit": PAGE, "_request_timeout": TIMEOUT}
        if token:
            options["_continue"] = token
        if namespaced and self.namespace:
            got = self._objects.list_namespaced_custom_object(
                GROUP, VERSION, self.namespace, plural, **options
            )
        else:
            got = self._objects.list_cluster_custom_object(GROUP, VERSION, plural, **options)
        return cast(Obj, got)

    def _object_call(self, kind: str, namespace: str | None, name: str, method: str, *body: Obj,
                     **options: Any) -> object:  # fmt: skip
        """One object's request: `method` names the client's call with `{}` for namespaced|cluster."""
        if _namespaced(kind):
            call = getattr(self._objects, method.format("namespaced"))
            where: tuple[str, ...] = (_require(namespace, kind), _plural(kind), name)
        else:
            call = getattr(self._objects, method.format("cluster"))
            where = (_plural(kind), name)
        request = functools.partial(call, GROUP, VERSION, *where, *body, _request_timeout=TIMEOUT, **options)
        return self._call(kind, request)

    def _call(self, kind: str, request: Callable[[], T]) -> T:
        """One API request, retried on conflicts and overload; 404 becomes ObjectNotFound/MissingCRD."""
        delays = self.retry.delays()
        while True:
            try:
                return request()
            except ApiException as exc:
                if exc.status == 404:
                    raise _not_found(kind, exc) from None
                delay = next(delays, None) if exc.status in RETRIED else None
                if delay is None:
                    raise
                log.debug("%s: HTTP %s, retrying in %.2f s", kind, exc.status, delay)
                self._sleep(delay)

    def _keep(self, kind: str, obj: Obj) -> Obj:
        """Remember the object's uid (for events); drop managedFields, which nobody here reads."""
        meta = obj.setdefault("metadata", {})
        meta.pop("managedFields", None)
        namespace = meta.get("namespace") or None
        if meta.get("uid"):
            self._uids[(kind, namespace, str(meta.get("name", "")))] = str(meta["uid"])
        return obj

    def _uid(self, kind: str, namespace: str | None, name: str) -> str | None:
        key = (kind, namespace, name)
        copied = self.cache.find(kind, namespace, name) if self.cache is not None else None
        if copied is not None and key not in self._uids:
            self._keep(kind, copied)
        if key not in self._uids:
            self.get(kind, namespace, name)  # fills the cache when the object exists
        return self._uids.get(key)

    def _event_body(
        self, kind: str, namespace: str | None, name: str, uid: str | None, reason: str, message: str,
        type: str,
    ) -> Obj:  # fmt: skip
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        reference = {"apiVersion": API_VERSION, "kind": kind, "name": name, "namespace": namespace, "uid": uid}
        return {
            "metadata": {"generateName": f"{name}.", "namespace": namespace or EVENT_NAMESPACE},
            "involvedObject": {k: v for k, v in reference.items() if v is not None},
            "reason": reason, "message": message[:MESSAGE_LIMIT], "type": type,
            "source": {"component": self.component}, "firstTimestamp": now, "lastTimestamp": now,
            "count": 1, "reportingComponent": self.component, "reportingInstance": self.instance,
        }  # fmt: skip


def _plural(kind: str) -> str:
    return NAMES[kind].plural


def _namespaced(kind: str) -> bool:
    return KINDS[kind].scope == "Namespaced"


def _require(namespace: str | None, kind: str) -> str:
    if not namespace:
        raise ValueError(f"{kind} is namespaced: a namespace is required")
    return namespace


def _not_found(kind: str, exc: ApiException) -> Exception:
    """404 on an object is ObjectNotFound; 404 on the whole resource means its CRD is missing.

    The API server answers a missing object with a `Status` whose reason is NotFound, and a
    resource it does not serve with a plain-text "404 page not found".
    """
    try:
        status = json.loads(exc.body or "")
    except ValueError:
        status = None
    if isinstance(status, dict) and status.get("reason") == "NotFound":
        return ObjectNotFound(f"{kind}: {status.get('message', 'not found')}")
    plural = NAMES[kind].plural if kind in NAMES else kind.lower()
    return MissingCRD(
        f"the API server does not serve {plural}.{GROUP}: install the CRDs (kubectl apply -k crds/)"
    )


__all__ = [
    "COMPONENT", "KubeStore", "MissingCRD", "ObjectCache", "ObjectNotFound", "Retry", "api_client", "drained",
]  # fmt: skip
