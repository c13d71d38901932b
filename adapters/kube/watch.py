"""A live copy of the cluster's pods, nodes or gputwin objects, kept by list + watch on a thread of its own.

What an informer is to kube-scheduler, `Watched` is to the Kubernetes backend: instead of listing
every pod and node at each reconcile pass (10,000 pods are megabytes of JSON for the API server to
encode and for us to parse, several times a second), one list, then one watch from its
resourceVersion; every event updates the copy, and `changed` wakes the operator's loop when an
event matters to scheduling (`matters`). A pass reads a snapshot (`snapshot`) at no API cost.

Pods: the copy holds the pods that have not ended. A pod that reaches Succeeded/Failed or is
deleted leaves it and is reported once by `snapshot` under `ended` (with `gone=True` if it was
deleted before it ended), so the backend learns how a run ended without reading the pod again.

The watch resumes from the last resourceVersion it saw (bookmarks keep that fresh); when the API
server no longer has that version (410 Gone) the kind is listed again, and whatever the new list
lacks is reported as deleted: nothing is missed, only late. Replies are parsed as plain JSON:
the client's model deserialization costs milliseconds per object.

What one process watches (`gputwin.adapters.kube.cluster_watch`): `ClusterWatch`, pods and nodes
for the backend; `ObjectWatches`, the gputwin objects (SwitchTopology, GPUPartition, SchedulingPolicy, GPUJob,
TraceReplay) are copied the same way, so a reconcile pass lists none of them
(`gputwin.adapters.kube.store.KubeStore` reads the copy). The operator writes their statuses, and
its next pass must see its own writes: the object a write returns goes into the copy at once
(`written`), and the copy never takes an older version of an object than the one it has. Versions
are compared as the API server defines them since Kubernetes 1.35 (resourceVersions are decimal
integers that grow with every write; anything else is taken as newer, as before).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines

from gputwin.api.bodies import EMPTY, Body, Key, Obj, key_of

from .pods import PAGE
from .store import TIMEOUT

DONE = ("Succeeded", "Failed")
SERVER_TIMEOUT = 240  # seconds a watch request lasts before the API server ends it (we resume)
BACKOFF = (0.5, 1.0, 2.0, 5.0)

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Ended:
    """A pod that left the copy: its last state, and whether it was deleted before it ended."""

    pod: Obj
    gone: bool


# `_ended` and `pod_matters` run on the watch thread for every pod event (10,000s per burst) and hold
# the GIL the reconcile pass needs: direct lookups there, as `Pod(obj).phase` etc. would read them.
# Measured: two Pod views made `pod_matters` about 4x slower.


def _ended(obj: Obj) -> bool:
    return ((obj.get("status") or EMPTY).get("phase") or "") in DONE


class Watched:
    """Objects of one kind by (namespace, name), as of the last watch event seen.

    `lister` is a CoreV1Api list call (`list_pod_for_all_namespaces`, `list_node`). `pods=True`
    keeps only pods not yet ended and reports the ended ones. `matters(old, new)` says whether a
    change should wake the loop (None: every change does); `changed` is that wake-up, called on
    the watch thread.
    """

    def __init__(
        self,
        lister: Callable[..., Any],
        *,
        pods: bool = False,
        matters: Callable[[Obj | None, Obj | None], bool] | None = None,
        changed: Callable[[], None] | None = None,
        sleep: Callable[[float], None] = time.sleep,
        name: str = "",
    ) -> None:
        self._list, self.pods, self.matters, self.changed = lister, pods, matters, changed
        self.name = name or ("pods" if pods else "nodes")
        self.behind = False  # the watch broke and has not resumed yet: the copy may miss changes
        self._sleep = sleep
        self._lock = threading.Lock()
        self._objects: dict[Key, Obj] = {}
        self._ended: dict[Key, Ended] = {}
        # keys changed since the last `changes` (a dict: in event order); None until a reader asks
        self._touched: dict[Key, None] | None = None
        self._applied = ""  # resourceVersion of the last event (or list) in the copy
        self.taken = ""  # that version when `changes` last returned: what the reader's view includes
        self._version: str | None = None
        self._synced = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self._response: Any = None
        self.events = self.lists = 0  # counted, for tests and diagnostics
        self.error = ""

    # --- the reader's side ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the thread (once); the first list fills the copy."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="gputwin-watch", daemon=True)
            self._thread.start()

    def wait_synced(self, timeout: float) -> bool:
        """True once the first list is in (started if it was not)."""
        self.start()
        return self._synced.wait(timeout)

    def changes(self, full: bool = False) -> tuple[dict[Key, Obj | None], dict[Key, Ended]]:
        """What changed since the last call, for a reader that keeps its own view up to date:
        each key touched meanwhile (in the order its events came) with its object now, None if it
        left the copy; and the pods that ended since the last call (each reported once). `full`:
        every object in the copy instead (the reader starts over; nothing is reported as left), as
        is the first call: changes are recorded only once somebody reads them.
        One reader per copy: a call takes the changes it returns."""
        with self._lock:
            ended, self._ended = self._ended, {}
            touched, self._touched = self._touched, {}
            self.taken = self._applied
            if full or touched is None:
                return dict(self._objects), ended
            objects = self._objects
            return {key: objects.get(key) for key in touched}, ended

    def stop(self) -> None:
        """Stop following: the thread ends at once, also when blocked reading a quiet stream.

        The stream is shut down, not closed: `close()` from this thread waits for the reader's
        lock, i.e. until the API server next sends something (up to minutes), which held an
        operator's exit on SIGTERM. urllib3's `shutdown()` wakes the reader, which closes it."""
        self._stopped.set()
        response = self._response
        shutdown = getattr(response, "shutdown", None)  # urllib3 >= 2.3
        if shutdown is not None:
            try:
                shutdown()
            except Exception:  # a stream that is already broken
                log.debug("shutting the watch stream down failed", exc_info=True)

    # --- the watch thread -----------------------------------------------------------------------

    def _run(self) -> None:
        failed = 0
        while not self._stopped.is_set():
            try:
                if self._version is None:
                    self._relist()
                self._follow()
                failed = 0
            except Exception as exc:  # noqa: BLE001 - a broken stream: resume from the last version
                if self._stopped.is_set():
                    return
                self.error = f"{type(exc).__name__}: {exc}"[:300]
                self.behind = True
                if isinstance(exc, ApiException) and exc.status == 410:
                    self._version = None
                else:
                    log.warning("watch of %s broke (%s); resuming", self._kind(), self.error)
                self._sleep(BACKOFF[min(failed, len(BACKOFF) - 1)])
                failed += 1

    def _kind(self) -> str:
        return self.name

    def written(self, obj: Obj) -> None:
        """An object as the API server returned it after our write (or read): into the copy unless
        the copy already has a newer version, so a read after a write never goes back in time."""
        with self._lock:
            key = key_of(obj)
            if _newer(obj, self._objects.get(key)):
                self._put(key, _lean(obj), True)

    def objects(self) -> list[Obj] | None:
        """The objects now (the copy's own: do not change them), None while the copy may be behind
        (not listed yet, or its watch broke and is resuming): then read the API server."""
        if not self._synced.is_set() or self.behind:
            return None
        with self._lock:
            return list(self._objects.values())

    def find(self, namespace: str, name: str) -> Obj | None:
        with self._lock:
            return self._objects.get((namespace, name))

    def _relist(self) -> None:
        items: list[Obj] = []
        token: str | None = None
        version = ""
        while True:
            options: Obj = {"limit": PAGE, "_preload_content": False, "_request_timeout": TIMEOUT}
            if token:
                options["_continue"] = token
            response = self._list(**options)
            page = json.loads(response.data)
            response.release_conn()
            items.extend(page.get("items") or [])
            head = Body(page)  # a List's metadata: its version, and where the next page starts
            version = version or head.resource_version
            token = head.metadata.get("continue") or None
            if token is None:
                break
        fresh = {key_of(o): _lean(o) for o in items}
        listed = {"metadata": {"resourceVersion": version}}
        with self._lock:
            old = self._objects
            for key in set(old) - set(fresh):
                if _newer(old[key], listed):  # our own write, after the list: keep it
                    fresh[key] = old[key]
                else:  # deleted while we were not watching
                    self._leave(key, old[key], gone=True)
            self._objects = {}
            for key, obj in fresh.items():
                self._put(key, obj if _newer(obj, old.get(key)) else old[key], key in old)
            self._applied = version
        self._version = version
        self.behind = False
        self.lists += 1
        self._synced.set()
        self._wake(True)

    def _follow(self) -> None:
        response = self._list(watch=True, resource_version=self._version, allow_watch_bookmarks=True,
                              timeout_seconds=SERVER_TIMEOUT, _preload_content=False,
                              _request_timeout=(TIMEOUT[0], SERVER_TIMEOUT + 30))  # fmt: skip
        self._response = response
        self.behind = False
        try:
            for line in iter_resp_lines(response):  # type: ignore[no-untyped-call]
                if self._stopped.is_set():
                    return
                if line and self._apply(json.loads(line)):
                    self._wake(True)
        finally:
            self._response = None
            response.close()
            response.release_conn()

    def _apply(self, event: Obj) -> bool:
        """One watch event into the copy; True if it matters to scheduling."""
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            raise ApiException(status=int(obj.get("code") or 500), reason=str(obj.get("message") or ""))
        version = Body(obj).resource_version
        if version:
            self._version = version
        if kind == "BOOKMARK":
            return False
        self.events += 1
        key = key_of(obj)
        with self._lock:
            if version:
                self._applied = version
            old = self._objects.get(key)
            if not _newer(obj, old):  # we wrote a newer version already (`written`)
                return False
            obj = _lean(obj)
            if kind == "DELETED":
                if old is not None or not self.pods or not _ended(obj):
                    self._leave(key, obj, gone=not _ended(obj))
                return self._matters(old, None)
            self._put(key, obj, old is not None or kind == "ADDED")
            return self._matters(old, obj)

    def _put(self, key: Key, obj: Obj, news: bool) -> None:
        """Into the copy; an ended pod out of it, reported if it ended just now (`news`: it was
        in the copy, or is new), not on every later change (its deletion, a label)."""
        if self._touched is not None:
            self._touched[key] = None
        if self.pods and _ended(obj):
            self._objects.pop(key, None)
            if news:
                self._ended[key] = Ended(obj, gone=False)
        else:
            self._objects[key] = obj

    def _leave(self, key: Key, obj: Obj, gone: bool) -> None:
        if self._touched is not None:
            self._touched[key] = None
        self._objects.pop(key, None)
        if self.pods:
            self._ended[key] = Ended(obj, gone)

    def _matters(self, old: Obj | None, new: Obj | None) -> bool:
        return self.matters is None or self.matters(old, new)

    def _wake(self, matters: bool) -> None:
        if matters and self.changed is not None:
            try:
                self.changed()
            except Exception:  # a wake-up that fails (the loop is gone) changes nothing here
                log.debug("wake-up failed", exc_info=True)


def _version(obj: Obj | None) -> int | None:
    found = Body(obj).resource_version
    return int(found) if found.isdigit() else None


def _newer(obj: Obj, than: Obj | None) -> bool:
    """`obj` is not older than `than` (None, or versions that are no integers: taken as newer)."""
    mine, theirs = _version(obj), _version(than)
    return mine is None or theirs is None or mine >= theirs


def _lean(obj: Obj) -> Obj:
    """Without managedFields: nobody here reads them, and they are most of a small object's size."""
    meta = obj.get("metadata")
    if isinstance(meta, dict) and "managedFields" in meta:
        meta.pop("managedFields")
    return obj


def pod_matters(old: Obj | None, new: Obj | None) -> bool:
    """A pod change that can change scheduling: it appeared or left, was bound, ended, or is being
    deleted (status updates of a running pod do not)."""
    if old is None or new is None:
        return True
    o_spec, n_spec = old.get("spec") or EMPTY, new.get("spec") or EMPTY  # direct: see `_ended`
    return (
        o_spec.get("nodeName") != n_spec.get("nodeName")
        or (old.get("status") or EMPTY).get("phase") != (new.get("status") or EMPTY).get("phase")
        or bool((old.get("metadata") or EMPTY).get("deletionTimestamp"))
        != bool((new.get("metadata") or EMPTY).get("deletionTimestamp"))
    )


def object_matters(old: Obj | None, new: Obj | None) -> bool:
    """A gputwin object change the reconciler must act on: it appeared or left, its spec changed
    (generation), or it is being deleted. Status writes (ours, every pass) do not wake the loop,
    nor does a write of ours whose answer reached the copy before its watch event (`written`)."""
    if old is None or new is None:
        return True
    o, n = Body(old), Body(new)
    return o.generation != n.generation or o.deleting != n.deleting


def node_matters(old: Obj | None, new: Obj | None) -> bool:
    """A node change that can change which nodes are usable: labels, taints, cordon, Ready,
    allocatable (not the heartbeats that rewrite its conditions' timestamps)."""
    if old is None or new is None:
        return True
    return _node_view(old) != _node_view(new)


def _node_view(node: Obj) -> tuple[Any, ...]:
    body = Body(node)
    spec, status = body.spec, body.status
    ready = [c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"]
    return (body.labels, spec.get("unschedulable"), spec.get("taints"), status.get("allocatable"), ready)


__all__ = ["Ended", "Watched", "key_of", "node_matters", "object_matters", "pod_matters"]
