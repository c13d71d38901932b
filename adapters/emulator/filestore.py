"""The embedded emulator's object store: one JSON file per object under a state directory.

    STATE/
      objects/<plural>/<name>.json               cluster-scoped kinds (switchtopologies, …)
      objects/<plural>/<namespace>/<name>.json   namespaced kinds (gpujobs, tracereplays, configmaps)
      clock.json                                 the virtual clock: {"now": epoch seconds, "time": RFC 3339}
      events.jsonl                               one event per line, oldest first
      .lock                                      held by the command that has the directory open

`FileStore` satisfies the operator's `Store` protocol (`gputwin.operator.store`), so the same
reconcilers run on it. Every file is replaced atomically (written beside, then `os.replace`), and
a command holds `lock()` for as long as it works, so two commands never interleave. Objects are
cached in memory after the first read: while the lock is held nobody else writes them.

The virtual clock starts at 2026-01-01T00:00:00Z (`EPOCH`) and only moves when `gputwin run`
advances it, so the emulator's output is the same on every machine and every run.

Besides the gputwin kinds, the store keeps core/v1 ConfigMaps (`CORE_KINDS`), because a
TraceReplay may read its trace from one (`get_configmap`); they are applied and deleted like the
rest, and have no status or generation.
"""

from __future__ import annotations

import copy
import fcntl
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from gputwin.api.bodies import Body, Obj, Objs, key_of
from gputwin.api.crdgen import NAMES
from gputwin.api.mergepatch import merge_patch
from gputwin.api.status import rfc3339
from gputwin.api.v1alpha1 import KINDS

Outcome = Literal["created", "configured", "unchanged"]
EPOCH = 1767225600.0  # 2026-01-01T00:00:00Z
CORE_KINDS = {"ConfigMap": "configmaps"}  # core/v1 kinds kept too (all namespaced): kind -> plural
# Metadata the server owns: an applied object's values for these are ignored.
SERVER_FIELDS = (
    "creationTimestamp",
    "generation",
    "resourceVersion",
    "uid",
    "managedFields",
    "deletionTimestamp",
)


class ObjectNotFound(KeyError):
    """A write to an object that is not stored (a LookupError, as the Store protocol says)."""


class FileStore:
    """Objects, clock and events of one emulated cluster, kept in a state directory."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._cache: dict[str, dict[tuple[str, str], Obj]] = {}
        self._now: float | None = None

    # --- locking and the clock ----------------------------------------------------------------

    @contextmanager
    def lock(self, exclusive: bool = True) -> Iterator[FileStore]:
        """Hold the state directory (shared for readers); the cache lives as long as the lock."""
        if not exclusive and not self.root.is_dir():
            yield self  # nothing stored yet: a reader must not create the directory
            return
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a+") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
            try:
                if exclusive and not (self.root / "clock.json").is_file():
                    self.set_now(EPOCH)
                yield self
            finally:
                self._cache.clear()
                self._now = None
                fcntl.flock(handle, fcntl.LOCK_UN)

    @property
    def now(self) -> float:
        """Virtual time, epoch seconds."""
        if self._now is None:
            path = self.root / "clock.json"
            self._now = float(json.loads(path.read_text())["now"]) if path.is_file() else EPOCH
        return self._now

    def set_now(self, now: float) -> None:
        self._now = now
        _write_json(self.root / "clock.json", {"now": now, "time": rfc3339(now)})

    # --- the Store protocol -------------------------------------------------------------------

    def list(self, kind: str) -> Objs:
        objects = self._objects(kind)
        return [copy.deepcopy(objects[key]) for key in sorted(objects)]

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        obj = self._objects(kind).get((namespace or "", name))
        return copy.deepcopy(obj) if obj is not None else None

    def get_configmap(self, namespace: str, name: str) -> dict[str, str] | None:
        obj = self._objects("ConfigMap").get((namespace, name))
        if obj is None:
            return None
        return {str(k): str(v) for k, v in (obj.get("data") or {}).items()}

    def patch_status(self, kind: str, namespace: str | None, name: str, status: Obj) -> None:
        obj = self._live(kind, namespace, name)
        obj["status"] = merge_patch(obj.get("status"), status)
        self._save(obj)

    def patch_spec(self, kind: str, namespace: str | None, name: str, spec: Obj) -> None:
        obj = self._live(kind, namespace, name)
        new = merge_patch(obj.get("spec"), spec)
        if new != obj.get("spec"):
            obj.setdefault("metadata", {})["generation"] = (Body(obj).generation or 1) + 1
            obj["spec"] = new
            self._save(obj)

    def event(
        self, kind: str, namespace: str | None, name: str, reason: str, message: str,
        type: Literal["Normal", "Warning"] = "Normal", key: str | None = None,
    ) -> None:  # fmt: skip
        # `key` is not needed here: a command's pass is all or nothing within one locked process.
        line = {"time": rfc3339(self.now), "type": type, "reason": reason, "kind": kind,
                "namespace": namespace, "name": name, "message": message}  # fmt: skip
        with open(self.root / "events.jsonl", "a", encoding="utf-8") as out:
            out.write(json.dumps(line, sort_keys=True) + "\n")

    # --- what the emulator's commands need besides ----------------------------------------------

    def preview(self, obj: Obj) -> Outcome:
        """What `put(obj)` would return, storing nothing (`apply --dry-run`)."""
        old, new = self._incoming(obj)
        if old is None:
            return "created"
        return "unchanged" if _user_view(old) == _user_view(new) else "configured"

    def _incoming(self, obj: Obj) -> tuple[Obj | None, Obj]:
        """The stored object `obj` would replace (None: none) and `obj` as it would be stored."""
        kind, given = obj["kind"], Body(obj)
        namespace = given.namespace if _namespaced(kind) else ""
        old = self._objects(kind).get((namespace, given.name))
        new = {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
        meta = {k: v for k, v in given.metadata.items() if k not in SERVER_FIELDS and k != "namespace"}
        new["metadata"] = meta
        if namespace:
            meta["namespace"] = namespace
        return old, new

    def put(self, obj: Obj) -> Outcome:
        """Create or update an object as `kubectl apply` would; status and server metadata are kept."""
        kind = obj["kind"]
        old, new = self._incoming(obj)
        meta = new["metadata"]
        if old is None:
            meta["creationTimestamp"] = rfc3339(self.now)
            if kind not in CORE_KINDS:
                meta["generation"] = 1
            self._save(new)
            return "created"
        if _user_view(old) == _user_view(new):
            return "unchanged"
        same_spec = old.get("spec") == new.get("spec")
        kept = Body(old)
        meta.update({k: kept.metadata[k] for k in ("creationTimestamp", "generation") if k in kept.metadata})
        if kind not in CORE_KINDS:
            meta["generation"] = (kept.generation or 1) + (0 if same_spec else 1)
        if "status" in old:
            new["status"] = old["status"]
        self._save(new)
        return "configured"

    def delete(self, kind: str, namespace: str | None, name: str) -> bool:
        obj = self._objects(kind).pop((namespace or "", name), None)
        if obj is None:
            return False
        self._path(kind, namespace, name).unlink(missing_ok=True)
        return True

    def events(self) -> Objs:
        path = self.root / "events.jsonl"
        if not path.is_file():
            return []
        return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]

    # --- files ----------------------------------------------------------------------------------

    def _path(self, kind: str, namespace: str | None, name: str) -> Path:
        folder = self.root / "objects" / _plural(kind)
        return (folder / namespace if namespace else folder) / f"{name}.json"

    def _objects(self, kind: str) -> dict[tuple[str, str], Obj]:
        if kind not in self._cache:
            found: dict[tuple[str, str], Obj] = {}
            folder = self.root / "objects" / _plural(kind)
            for path in sorted(folder.rglob("*.json")) if folder.is_dir() else []:
                obj = json.loads(path.read_text(encoding="utf-8"))
                found[key_of(obj)] = obj
            self._cache[kind] = found
        return self._cache[kind]

    def _live(self, kind: str, namespace: str | None, name: str) -> Obj:
        obj = self._objects(kind).get((namespace or "", name))
        if obj is None:
            raise ObjectNotFound(f"{kind} {namespace + '/' if namespace else ''}{name} not found")
        return obj

    def _save(self, obj: Obj) -> None:
        key = key_of(obj)
        self._objects(obj["kind"])[key] = obj
        _write_json(self._path(obj["kind"], key[0] or None, key[1]), obj)


def _plural(kind: str) -> str:
    return CORE_KINDS[kind] if kind in CORE_KINDS else NAMES[kind].plural


def _namespaced(kind: str) -> bool:
    return kind in CORE_KINDS or KINDS[kind].scope == "Namespaced"


def _user_view(obj: Obj) -> Obj:
    """What a user's apply can change: everything but status and server-owned metadata."""
    view = {k: v for k, v in obj.items() if k != "status"}
    view["metadata"] = {k: v for k, v in Body(obj).metadata.items() if k not in SERVER_FIELDS}
    return view


def _write_json(path: Path, data: Any) -> None:
    """Replace `path` atomically: readers see the old file or the new one, never half of one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temp.write_text(json.dumps(data, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(temp, path)


__all__ = ["CORE_KINDS", "EPOCH", "FileStore", "ObjectNotFound", "Outcome"]
