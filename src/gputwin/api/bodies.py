"""Typed, read-only views over raw Kubernetes API objects (as kopf's `bodies`), and the one `Obj` alias.

Objects travel through gputwin as the JSON dicts the API server (or the emulator's file store)
gives: the watch copy, the stores and the kubectl-like CLI all hold them as they are. Code that
reads them goes through a view instead of `obj["metadata"]["name"]`:

    pod = Pod(obj)
    pod.key(), pod.labels.get(LABEL), pod.deleting, pod.node_name, pod.phase

A view is a thin wrapper: one slot holding the dict, properties reading it on each access, so it
sees later changes of the dict and copies nothing. Still, a view and its property calls cost 3-4
times a direct lookup: the few loops that touch every pod of a 10,000-pod burst (watch events,
`PodView.apply`, the plain-Pod and run checks) read the dicts directly, say so in a comment, and
use `key_of` (the key without a view) and `EMPTY` (the null-safe default). It never writes: the mappings it returns are the object's own, typed `Mapping` so mypy
refuses writes through them. A field that is missing or null reads as a plain default ("", None,
an empty mapping), never a KeyError, so a half-built or odd object (no metadata, `labels: null`)
reads the same as an empty one. Writers (the stores) still build and patch the dicts themselves.

kopf's `Body` is a live mapping view with `Meta`, `Spec` and `Status` sub-views; ours is smaller:
properties for the fields gputwin reads, `raw` for the rest, `Pod` for a pod's spec and status fields.
Read-only is kept by the types and by slots (no attribute can be set); a `__setattr__` guard
would have tripled the cost of making a view.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final

Obj = dict[str, Any]  # a raw API object, as JSON-decoded: the one alias for it
Objs = list[Obj]  # a name for lists of them (inside a store class, `list` names its method)
Key = tuple[str, str]  # (namespace, name); cluster-scoped objects have namespace ""
EMPTY: Mapping[str, Any] = MappingProxyType({})  # what a missing or null part reads as


class Body:
    """A read-only view of any API object: kind, metadata, spec and status."""

    __slots__ = ("_raw",)

    def __init__(self, raw: Mapping[str, Any] | None) -> None:
        self._raw: Final[Mapping[str, Any]] = raw if raw is not None else EMPTY

    @property
    def raw(self) -> Mapping[str, Any]:
        """The object itself (not a copy), for fields no property reads."""
        return self._raw

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.kind or '?'} {self.namespace}/{self.name})"

    @property
    def kind(self) -> str:
        return str(self._raw.get("kind") or "")

    @property
    def api_version(self) -> str:
        return str(self._raw.get("apiVersion") or "")

    @property
    def metadata(self) -> Mapping[str, Any]:
        return self._raw.get("metadata") or EMPTY

    @property
    def spec(self) -> Mapping[str, Any]:
        return self._raw.get("spec") or EMPTY

    @property
    def status(self) -> Mapping[str, Any]:
        return self._raw.get("status") or EMPTY

    @property
    def name(self) -> str:
        return str(self.metadata.get("name") or "")

    @property
    def namespace(self) -> str:
        """"" for a cluster-scoped object (or one not yet given a namespace)."""
        return str(self.metadata.get("namespace") or "")

    def key(self) -> Key:
        return key_of(self._raw)

    @property
    def uid(self) -> str:
        return str(self.metadata.get("uid") or "")

    @property
    def generation(self) -> int | None:
        """None: the server has not set one (a new object, or a kind without generations)."""
        found = self.metadata.get("generation")
        return found if isinstance(found, int) else None

    @property
    def resource_version(self) -> str:
        return str(self.metadata.get("resourceVersion") or "")

    @property
    def creation_timestamp(self) -> str:
        return str(self.metadata.get("creationTimestamp") or "")

    @property
    def deletion_timestamp(self) -> str | None:
        found = self.metadata.get("deletionTimestamp")
        return str(found) if found else None

    @property
    def deleting(self) -> bool:
        """A deletion was asked for (the object may still hold its resources while it ends)."""
        return bool((self._raw.get("metadata") or EMPTY).get("deletionTimestamp"))

    @property
    def labels(self) -> Mapping[str, str]:
        return (self._raw.get("metadata") or EMPTY).get("labels") or EMPTY

    @property
    def annotations(self) -> Mapping[str, str]:
        return (self._raw.get("metadata") or EMPTY).get("annotations") or EMPTY

    @property
    def owner_references(self) -> tuple[Mapping[str, Any], ...]:
        return tuple(self.metadata.get("ownerReferences") or ())


def key_of(obj: Mapping[str, Any]) -> Key:
    """`Body(obj).key()` without the view: for loops over every pod of a list or watch copy."""
    meta = obj.get("metadata") or EMPTY
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class Pod(Body):
    """A Pod's view: Body's fields plus the few of its spec and status gputwin reads."""

    __slots__ = ()

    @property
    def node_name(self) -> str:
        """"" while the pod is not bound."""
        return str((self._raw.get("spec") or EMPTY).get("nodeName") or "")

    @property
    def scheduler_name(self) -> str:
        return str((self._raw.get("spec") or EMPTY).get("schedulerName") or "")

    @property
    def phase(self) -> str:
        """"" when the status has none yet (the API server reports a new pod as Pending)."""
        return str((self._raw.get("status") or EMPTY).get("phase") or "")


__all__ = ["EMPTY", "Body", "Key", "Obj", "Objs", "Pod", "key_of"]
