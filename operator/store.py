"""Where the reconcilers read and write gputwin objects: the `Store` protocol and `MemoryStore`.

Objects are plain Kubernetes-shaped dicts (camelCase, `apiVersion`/`kind`/`metadata`/`spec`/
`status`), exactly what kopf hands its handlers and what the emulator keeps in its files, so the
reconcilers of `gputwin.operator.controller` run unchanged against the API server (kopf), the
emulator's state directory (`gputwin.adapters.emulator.filestore`) and this in-memory store.

Kinds are named by their `kind` (`GPUJob`); cluster-scoped objects have namespace None. Patches
are JSON merge patches (`gputwin.api.mergepatch`): a status patch behaves like a merge patch on the
status subresource. A write to an object that no longer exists raises a `LookupError` (it may
have been deleted since it was listed); the controller skips such objects.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from gputwin.api.bodies import Body, Obj, Objs
from gputwin.api.mergepatch import merge_patch

EventType = Literal["Normal", "Warning"]


class Store(Protocol):
    """Read objects, patch their spec or status, post events. Every method is synchronous."""

    def list(self, kind: str) -> Objs:
        """Every object of `kind` (copies), in (namespace, name) order."""
        ...

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        """One object (a copy), or None."""
        ...

    def get_configmap(self, namespace: str, name: str) -> dict[str, str] | None:
        """The `data` of a core/v1 ConfigMap (a copy; {} if it has none), or None if it does not exist."""
        ...

    def patch_status(self, kind: str, namespace: str | None, name: str, status: Obj) -> None:
        """Merge-patch the status subresource; LookupError if the object is gone."""
        ...

    def patch_spec(self, kind: str, namespace: str | None, name: str, spec: Obj) -> None:
        """Merge-patch the spec (bumps metadata.generation); LookupError if the object is gone."""
        ...

    def event(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        reason: str,
        message: str,
        type: EventType = "Normal",
        key: str | None = None,
    ) -> None:
        """Post a Kubernetes-style event about an object.

        With `key`, the event names one transition of the object: posting it again (a pass
        repeated after a crash) must not add a second event.
        """
        ...


@dataclass(frozen=True, slots=True)
class Event:
    """One posted event, as `MemoryStore` records it."""

    kind: str
    namespace: str | None
    name: str
    reason: str
    message: str
    type: EventType = "Normal"


class NotFound(KeyError):
    """The object a write was meant for does not exist (any more)."""


def namespace_of(obj: Obj) -> str | None:
    """The namespace as a Store takes it: None for a cluster-scoped object."""
    return Body(obj).namespace or None


def name_of(obj: Obj) -> str:
    return Body(obj).name


def is_deleted(obj: Obj) -> bool:
    """Marked for deletion (a finalizer still holds it): the reconcilers treat it as gone."""
    return Body(obj).deleting


_Key = tuple[str, str, str]


class MemoryStore:
    """A dict of objects: the store of the controller tests and of anything else without an API."""

    def __init__(self, objects: Iterable[Obj] = ()) -> None:
        self._objects: dict[_Key, Obj] = {}
        self._configmaps: dict[tuple[str, str], dict[str, str]] = {}
        self.events: list[Event] = []
        self._event_keys: set[tuple[str, str | None, str, str]] = set()
        for obj in objects:
            self.put(obj)

    @staticmethod
    def _key(kind: str, namespace: str | None, name: str) -> _Key:
        return (kind, namespace or "", name)

    def put(self, obj: Obj) -> None:
        """Create or replace an object, keeping its status; a changed spec bumps the generation."""
        obj = copy.deepcopy(obj)
        key = self._key(obj["kind"], namespace_of(obj), name_of(obj))
        old = self._objects.get(key)
        meta = obj.setdefault("metadata", {})
        if old is None:
            meta.setdefault("generation", 1)
        else:
            same = old.get("spec") == obj.get("spec")
            meta["generation"] = (Body(old).generation or 1) + (0 if same else 1)
            obj["status"] = old.get("status", obj.get("status"))
        self._objects[key] = obj

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        return self._objects.pop(self._key(kind, namespace, name), None) is not None

    def put_configmap(self, namespace: str, name: str, data: dict[str, str]) -> None:
        """Create or replace a ConfigMap's data (for tests: the Store only reads ConfigMaps)."""
        self._configmaps[(namespace, name)] = dict(data)

    def get_configmap(self, namespace: str, name: str) -> dict[str, str] | None:
        data = self._configmaps.get((namespace, name))
        return dict(data) if data is not None else None

    def list(self, kind: str) -> Objs:
        keys = sorted(k for k in self._objects if k[0] == kind)
        return [copy.deepcopy(self._objects[k]) for k in keys]

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._objects.get(self._key(kind, namespace, name))
        return copy.deepcopy(obj) if obj is not None else None

    def _live(self, kind: str, namespace: str | None, name: str) -> Obj:
        obj = self._objects.get(self._key(kind, namespace, name))
        if obj is None:
            raise NotFound(f"{kind} {namespace + '/' if namespace else ''}{name} not found")
        return obj

    def patch_status(self, kind: str, namespace: str | None, name: str, status: Obj) -> None:
        obj = self._live(kind, namespace, name)
        obj["status"] = merge_patch(obj.get("status"), status)

    def patch_spec(self, kind: str, namespace: str | None, name: str, spec: Obj) -> None:
        obj = self._live(kind, namespace, name)
        new = merge_patch(obj.get("spec"), spec)
        if new != obj.get("spec"):
            obj.setdefault("metadata", {})["generation"] = (Body(obj).generation or 1) + 1
        obj["spec"] = new

    def event(
        self,
        kind: str,
        namespace: str | None,
        name: str,
        reason: str,
        message: str,
        type: EventType = "Normal",
        key: str | None = None,
    ) -> None:
        if key is not None:
            if (kind, namespace, name, key) in self._event_keys:
                return
            self._event_keys.add((kind, namespace, name, key))
        self.events.append(Event(kind, namespace, name, reason, message, type))


__all__ = [
    "Event",
    "EventType",
    "MemoryStore",
    "NotFound",
    "Obj",
    "Store",
    "is_deleted",
    "name_of",
    "namespace_of",
]
