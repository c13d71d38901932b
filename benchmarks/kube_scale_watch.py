"""The pod watch of benchmarks/kube_scale.py: one watch on the benchmark's pods, timestamped on arrival.

`Tracker` consumes it and keeps what the benchmark reports: creation -> binding, GPUs in use per node
(over-allocation), double bindings, lost pods and since when each node had room for a pod.
"""

from __future__ import annotations

import json
import threading
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from kube_scale_lib import GPU, Kube, Ready

# --- the watch ----------------------------------------------------------------------------------------------


@dataclass
class PodSeen:
    phase: str
    job: str
    gpus: int
    added: float
    node: str | None = None
    bound: float | None = None
    room: float | None = None  # since when its node had room for it, continuously, when it was bound
    added_rv: int = 0  # resourceVersion of its ADDED event
    room_rv: int = 0  # of the event that began that room (0: the node had room from the start)
    released: bool = False
    deleted: bool = False
    name: str = ""  # namespace/name
    gang: str = ""  # the gang job it is part of (benchmarks/kube_scale_peers.py), or ""


@dataclass(frozen=True)
class PhaseView:
    latencies: list[float]
    after_room: list[float]  # binding - max(creation, since when its node had room for it)
    after_freed: list[float]  # the same, of the pods whose room came after their creation
    first_added: float
    last_bind: float | None
    double_bound: int
    lost: int
    peak_gpus_used: int


@dataclass
class _Phase:
    first_added: float | None = None
    last_bind: float | None = None
    bound: int = 0
    double_bound: int = 0
    peak_gpus_used: int = 0
    jobs: dict[str, set[str]] = field(default_factory=dict)  # job -> uids of its pods that were bound
    # node -> peak GPUs over capacity, seen when this phase's pods bound: counting every pod on the
    # node, and counting this phase's pods alone (what the scheduler itself accounted wrongly)
    excess_all: dict[str, int] = field(default_factory=dict)
    excess_own: dict[str, int] = field(default_factory=dict)


class Tracker:
    """Consumes one pod watch; keeps what the benchmark reports. Thread-safe reads under one lock."""

    def __init__(self, capacity: dict[str, int]) -> None:
        self.capacity = capacity
        self.used: dict[str, int] = dict.fromkeys(capacity, 0)
        self.free_nodes: Counter[int] = Counter(capacity.values())  # free GPUs -> nodes with that many
        # node -> [since when it had >= g GPUs free, continuously, or None] for g = 0..capacity
        self.room: dict[str, list[float | None]] = {n: [0.0] * (c + 1) for n, c in capacity.items()}
        self.room_rv: dict[str, list[int]] = {n: [0] * (c + 1) for n, c in capacity.items()}  # the events'
        self.own: dict[tuple[str, str], int] = {}  # (phase, node) -> GPUs its pods use there
        self.total_used = 0
        self.pods: dict[str, PodSeen] = {}
        self.phases: dict[str, _Phase] = {}
        self.lock = threading.Lock()
        self.error: str = ""

    @classmethod
    @contextmanager
    def watching(cls, kube: Kube, selector: str, capacity: dict[str, int]) -> Iterator[Tracker]:
        tracker = cls(capacity)
        stop = threading.Event()
        listed = kube.request("GET", f"/api/v1/pods?labelSelector={selector}&limit=1")
        holder: dict[str, Any] = {}
        thread = threading.Thread(target=tracker._follow, daemon=True, name="pod-watch",
                                  args=(kube, selector, listed["metadata"]["resourceVersion"], stop, holder))  # fmt: skip
        thread.start()
        try:
            yield tracker
        finally:
            stop.set()
            answer = holder.get("answer")
            if answer is not None:
                try:
                    answer.shutdown()  # unblocks the watch thread's read
                except OSError:  # that stream had ended already (the watch was resuming): nothing to unblock
                    pass
            thread.join(5)

    def _follow(
        self, kube: Kube, selector: str, rv: str, stop: threading.Event, holder: dict[str, Any]
    ) -> None:
        """Watch from `rv`; resume from the last version seen when the server ends the watch."""
        while not stop.is_set():
            path = (f"/api/v1/pods?watch=1&labelSelector={selector}&resourceVersion={rv}"
                    "&allowWatchBookmarks=true&timeoutSeconds=3600")  # fmt: skip
            try:
                answer = kube.request("GET", path, preload=False)
                holder["answer"] = answer
                buffer = b""
                for chunk in answer.stream(65536):
                    now = time.monotonic()
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            rv = self.feed(json.loads(line), now) or rv
            except Exception as exc:  # noqa: BLE001  (a closed stream at stop, or a failure to report)
                if not stop.is_set():
                    self.error = f"{type(exc).__name__}: {exc}"
                    time.sleep(0.5)

    def feed(self, event: dict[str, Any], now: float) -> str | None:
        """One watch event received at `now`; the resourceVersion to resume from."""
        kind, obj = event.get("type"), event.get("object", {})
        meta = obj.get("metadata", {})
        if kind == "ERROR":
            raise RuntimeError(f"watch error: {obj.get('message')}")
        if kind == "BOOKMARK":
            return str(meta.get("resourceVersion") or "") or None
        with self.lock:
            self._pod(kind, obj, now)
        return str(meta.get("resourceVersion") or "") or None

    def _pod(self, kind: str | None, obj: dict[str, Any], now: float) -> None:
        meta, spec = obj["metadata"], obj.get("spec", {})
        uid = meta["uid"]
        rv = int(meta.get("resourceVersion") or 0) if str(meta.get("resourceVersion") or "").isdigit() else 0
        seen = self.pods.get(uid)
        if seen is None:
            labels = meta.get("labels", {})
            gpus = sum(
                int(c.get("resources", {}).get("limits", {}).get(GPU, 0)) for c in spec.get("containers", [])
            )
            name = f"{meta.get('namespace')}/{meta.get('name')}"
            # A gang's pods share no job label: each pod name is its own job (two uids bound under
            # one name is a double binding).
            seen = PodSeen(labels.get("bench.gputwin.io/phase", "?"), labels.get("bench.gputwin.io/job") or name,
                           gpus, now, name=name, added_rv=rv, gang=labels.get("bench.gputwin.io/gang", ""))  # fmt: skip
            self.pods[uid] = seen
            phase = self.phases.setdefault(seen.phase, _Phase())
            phase.first_added = phase.first_added if phase.first_added is not None else now
        phase = self.phases[seen.phase]
        node = spec.get("nodeName")
        if node and seen.node is None:
            self._bind(seen, uid, node, now, phase, rv)
        elif node and node != seen.node:
            phase.double_bound += 1  # the API server forbids this; count it if it ever happens
        done = kind == "DELETED" or obj.get("status", {}).get("phase") in ("Succeeded", "Failed")
        if done and seen.node is not None and not seen.released:
            seen.released = True
            self._use(seen.node, -seen.gpus, now, seen.phase, rv)
        seen.deleted = seen.deleted or kind == "DELETED"

    def _bind(self, seen: PodSeen, uid: str, node: str, now: float, phase: _Phase, rv: int) -> None:
        seen.node, seen.bound = node, now
        room = self.room.get(node, [])
        seen.room = room[seen.gpus] if seen.gpus < len(room) else None
        seen.room_rv = self.room_rv[node][seen.gpus] if seen.room is not None else 0
        phase.bound += 1
        phase.last_bind = now
        uids = phase.jobs.setdefault(seen.job, set())
        if seen.gang:  # gputwin deletes a gang's pods when a start fails, and makes them again later
            uids.difference_update([u for u in uids if self.pods[u].released])
        uids.add(uid)
        if len(uids) == 2:
            phase.double_bound += 1  # one job bound under two pods
        self._use(node, seen.gpus, now, seen.phase, rv)
        cap = self.capacity.get(node, 0)
        for excess, peaks in ((self.used[node] - cap, phase.excess_all),
                              (self.own[(seen.phase, node)] - cap, phase.excess_own)):  # fmt: skip
            if excess > peaks.get(node, 0):
                peaks[node] = excess
        phase.peak_gpus_used = max(phase.peak_gpus_used, self.total_used)

    def _use(self, node: str, gpus: int, now: float, phase: str, rv: int) -> None:
        cap = self.capacity.get(node, 0)
        self.free_nodes[max(cap - self.used.get(node, 0), 0)] -= 1
        self.used[node] = self.used.get(node, 0) + gpus
        free = cap - self.used[node]
        self.free_nodes[max(free, 0)] += 1
        room = self.room.setdefault(node, [0.0] * (cap + 1))
        room_rv = self.room_rv.setdefault(node, [0] * (cap + 1))
        for g in range(len(room)):
            if g > free:
                room[g] = None
            elif room[g] is None:
                room[g], room_rv[g] = now, rv
        self.total_used += gpus
        self.own[(phase, node)] = self.own.get((phase, node), 0) + gpus

    def _fits(self, gpus: int) -> bool:
        return any(count > 0 for free, count in self.free_nodes.items() if free >= gpus)

    # --- reads (main thread) ----------------------------------------------------------------------

    def bound_count(self, phase: str) -> int:
        with self.lock:
            return self.phases[phase].bound if phase in self.phases else 0

    def last_bind(self, phase: str) -> float | None:
        with self.lock:
            return self.phases[phase].last_bind if phase in self.phases else None

    def live_count(self, phase: str) -> int:
        with self.lock:
            return sum(1 for p in self.pods.values() if p.phase == phase and not p.deleted)

    def running_count(self, phase: str) -> int:
        """Pods of `phase` bound and not yet finished (still holding GPUs)."""
        with self.lock:
            return sum(1 for p in self.pods.values() if p.phase == phase and p.node and not p.released)

    def ready_and_bound(self, phase: str) -> dict[str, Ready]:
        """namespace/name -> (max(creation, since when its node had room for it), binding seen, whether
        that room came after its creation: it waited for capacity to free, the resourceVersion of the
        later of the two events: a scheduler's copy must hold it to see that the pod fits)."""
        with self.lock:
            return {p.name: (max(p.added, p.room), p.bound, p.room > p.added, max(p.added_rv, p.room_rv))
                    for p in self.pods.values()
                    if p.phase == phase and p.bound is not None and p.room is not None}  # fmt: skip

    def gang_gpus(self, phase: str) -> dict[str, int]:
        """gang -> GPUs its pods of `phase` hold now (bound, not finished or deleted)."""
        out: dict[str, int] = defaultdict(int)
        with self.lock:
            for p in self.pods.values():
                if p.phase == phase and p.gang and p.node and not p.released:
                    out[p.gang] += p.gpus
        return dict(out)

    def overallocated_gpus(self, phase: str, own: bool = False) -> int:
        """Sum over nodes of the peak excess over capacity at this phase's bindings (`own`: its pods only)."""
        with self.lock:
            state = self.phases.get(phase, _Phase())
            return sum((state.excess_own if own else state.excess_all).values())

    def phase_view(self, phase: str) -> PhaseView:
        with self.lock:
            mine = [p for p in self.pods.values() if p.phase == phase]
            state = self.phases.get(phase, _Phase())
            bound = [p for p in mine if p.bound is not None]
            lost = sum(1 for p in mine if p.bound is None and not p.deleted and self._fits(p.gpus))
            return PhaseView(
                latencies=[p.bound - p.added for p in bound if p.bound is not None],
                after_room=[p.bound - max(p.added, p.room) for p in bound if p.bound is not None and p.room is not None],
                after_freed=[p.bound - p.room for p in bound
                             if p.bound is not None and p.room is not None and p.room > p.added],
                first_added=state.first_added or 0.0, last_bind=state.last_bind,
                double_bound=state.double_bound, lost=lost, peak_gpus_used=state.peak_gpus_used,
            )  # fmt: skip
