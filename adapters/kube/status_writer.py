"""Status writes off the reconcile pass: `StatusWriter`, latest wins per object, on a thread of its own.

`KubeStore.patch_status` hands the statuses of the kinds a writer is for to it (the operator
uses one for SwitchTopology, GPUPartition and SchedulingPolicy, whose free-GPU and queue counts
change every pass; `gputwin.operator.handlers`), and `KubeStore.list`/`get` show those objects
with the statuses still waiting (`overlay`). How writes coalesce and why nothing is lost: the
class docstring.
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Collection
from dataclasses import dataclass

from gputwin.api.bodies import Body, Obj, Objs
from gputwin.api.mergepatch import merge_diff, merge_patch

from .store import KubeStore, ObjectCache, ObjectNotFound, api_client

log = logging.getLogger(__name__)
FLUSH_SECONDS = 5.0  # how long closing a StatusWriter waits for the writes still pending


_WKey = tuple[str, str | None, str]  # kind, namespace (None: cluster-scoped), name


@dataclass(slots=True)
class _Run:
    """The status writes to one object that have not been sent yet, coalesced into one request.

    `base`: the status the API server will hold when this run is sent (the copy's, or what the
    write ahead of it in flight makes it); `desired`: the status once every patch handed in is
    applied. The request is `merge_diff(base, desired)`.
    """

    base: Obj | None
    desired: Obj


class StatusWriter:
    """Writes the statuses of some kinds on a thread of its own, latest wins: a pass hands a status
    patch in (`put`, via `KubeStore.patch_status`) and goes on; the API round trip is not its time.

    One thread, its own `KubeStore` on its own `ApiClient` (a client is not thread-safe), a dict
    (kind, namespace, name) -> `_Run` of the writes not sent yet, and the one run being sent.

    **What a pass reads.** The operator's passes diff every status against what they read
    (`gputwin.operator.statuses.StatusBook`) and also carry values over from it: a condition keeps
    its `lastTransitionTime` while its status stays, a SchedulingPolicy's `lastDeploy` is set once
    per deployment. So a pass must read its own writes even while they wait here, or the next pass
    would re-stamp those times. `overlay` (used by `KubeStore.list`/`get` for these kinds) shows
    every object with a run pending or in flight with that run's `desired` status: a pass reads
    exactly what it would have read had every write been made at once.

    **Coalescing.** A patch for an object with a run still pending is merged into that run's
    `desired` (`merge_patch`); the run keeps its `base`, so its one request turns `base` into the
    newest status, whatever happened in between (a count that went 5 -> 3 -> 5 is no request at
    all). A patch for an object with no pending run opens one; its base is the desired status of
    the run in flight for that object if there is one, else the object's status in the watched
    copy (`cache.find`): the copy holds every answer of ours (`written`), and nobody else writes
    these statuses, so it is what the API server holds. An object the copy lacks (created a moment
    ago) has no known base: that one write is made synchronously (`put` answers False).

    **The race** (a write lands between a pass's read and its patch being applied) cannot lose
    anything: what a pass reads for an object is that object's newest desired status from the time
    its run is put until the request's answer is in the copy (`written` before the run is
    forgotten, under the lock), so a run landing mid-pass does not change what the pass sees, and
    the base of the next run is exactly what the landed run wrote. Only an outside change to the
    status between our read and our write (a `kubectl patch --subresource=status`, or the object
    deleted and created again under its name while a run waits) can leave the object with a mix of
    both, as a synchronous write computed against the older copy can: our request's answer (or the
    watch) then brings the object as it is into the copy, the next pass diffs against that and
    puts whatever still differs, so the next pass converges.

    **Errors** never reach the pass. A 404 (the object was deleted) drops the run; any other
    failure (after `KubeStore`'s own retries of 409/429/5xx) is logged and drops it too: the copy
    did not change, so the next pass diffs against the unwritten status again and puts the patch
    again. A run put meanwhile for that object is rebased on the failed run's base (what the API
    server still holds) so that it carries the failed changes as well. If the failed request did
    reach the server after all (a read timeout), its watch event updates the copy and again the
    next pass puts whatever still differs.

    **Closing** (`close`, when the operator stops) sends what is pending, waiting at most `timeout`
    seconds, then ends the thread; later puts answer False (their writes are made synchronously).
    """

    def __init__(self, store: KubeStore, kinds: Collection[str], *, owns_client: bool = False) -> None:
        if store.cache is None:
            raise ValueError(
                "a StatusWriter needs the watched copy of the objects (their statuses are its base)"
            )
        self.store, self.kinds = store, frozenset(kinds)
        self.cache: ObjectCache = store.cache
        self._owns_client = owns_client
        self._lock = threading.Condition()
        self._pending: dict[_WKey, _Run] = {}
        self._sending: tuple[_WKey, _Run] | None = None
        self._closed = False
        self._thread: threading.Thread | None = None
        # counted, for tests and diagnostics: patches put, of them merged into a pending run, requests
        # made (writes), runs that needed none (unchanged), dropped on a 404, failed otherwise
        self.puts = self.coalesced = self.writes = self.unchanged = self.dropped = self.failed = 0

    @classmethod
    def connect(cls, kinds: Collection[str], namespace: str | None, cache: ObjectCache) -> StatusWriter:
        """A writer with its own client on the cluster this process is configured for."""
        return cls(KubeStore(api_client(), namespace, cache=cache), kinds, owns_client=True)

    # --- the pass's side -----------------------------------------------------------------------

    def put(self, kind: str, namespace: str | None, name: str, patch: Obj) -> bool:
        """Hand a status merge patch in; False when it must be written synchronously instead (the
        writer is closed, or the object is not in the copy)."""
        key = (kind, namespace or None, name)
        with self._lock:
            if self._closed:
                return False
            run = self._pending.get(key)
            if run is not None:
                run.desired = merge_patch(run.desired, patch)
                self.coalesced += 1
            else:
                base: Obj | None
                if self._sending is not None and self._sending[0] == key:
                    base = self._sending[1].desired  # what the server holds once that lands
                else:
                    found = self.cache.find(kind, namespace or None, name)
                    if found is None:
                        return False
                    base = found.get("status")
                self._pending[key] = _Run(base, merge_patch(base, patch))
            self.puts += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gputwin-status-writer", daemon=True)
                self._thread.start()
            self._lock.notify_all()
        return True

    def overlay(self, kind: str, objects: Objs) -> Objs:
        """`objects` (of `kind`) with the status each will have once the writes held here are made."""
        with self._lock:
            runs = dict(self._pending)
            if self._sending is not None:
                runs.setdefault(*self._sending)  # a pending run is newer than the one in flight
        if not runs:
            return objects
        out: Objs = []
        for obj in objects:
            namespace, name = Body(obj).key()
            run = runs.get((kind, namespace or None, name))
            # A new dict: the object may be the copy's own; the status is the run's, so a copy of it.
            out.append(obj if run is None else {**obj, "status": copy.deepcopy(run.desired)})
        return out

    def flush(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Wait at most `timeout` s until nothing is pending or in flight; True if so."""
        with self._lock:
            return self._lock.wait_for(lambda: not self._pending and self._sending is None, timeout)

    def close(self, timeout: float = FLUSH_SECONDS) -> bool:
        """Send what is pending (at most `timeout` s), then end the thread; True if all was sent."""
        with self._lock:
            self._closed = True
            self._lock.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout)
            if thread.is_alive():
                with self._lock:
                    left = len(self._pending) + (self._sending is not None)
                log.warning(
                    "status writer closed with %d status write(s) not made after %.1f s", left, timeout
                )
                return False
        if self._owns_client:
            self.store.close_client()
        return True

    # --- the writer's thread -------------------------------------------------------------------

    def _run(self) -> None:
        while True:
            with self._lock:
                self._lock.wait_for(lambda: bool(self._pending) or self._closed)
                if not self._pending:
                    return  # closed, and everything is sent
                key = next(iter(self._pending))  # the oldest first: a busy object does not starve others
                run = self._pending.pop(key)
                self._sending = (key, run)
            try:
                landed = self._send(key, run)
            except Exception:  # a bug must not end the thread with writes held
                log.exception("status writer: writing %s %s failed", key[0], key[2])
                landed = False
            with self._lock:
                self._sending = None
                later = self._pending.get(key)
                if not landed and later is not None:
                    later.base = run.base  # the server still holds the failed run's base
                self._lock.notify_all()

    def _send(self, key: _WKey, run: _Run) -> bool:
        """One run's request; True if the API server now holds `run.desired` (its answer is in the
        copy: `KubeStore.patch_status` puts it there before this returns)."""
        kind, namespace, name = key
        patch = merge_diff(run.base, run.desired)
        if not patch:
            self.unchanged += 1
            return True
        try:
            self.store.patch_status(kind, namespace, name, patch)
        except ObjectNotFound:
            self.dropped += 1
            log.debug("status writer: %s %s is gone; its status write is dropped", kind, name)
            return False
        except Exception as exc:  # noqa: BLE001 - logged; the next pass puts the write again
            self.failed += 1
            log.warning("status writer: could not write the status of %s %s (the next pass retries): %s",
                        kind, name, exc)  # fmt: skip
            return False
        self.writes += 1
        return True


__all__ = ["FLUSH_SECONDS", "StatusWriter"]
