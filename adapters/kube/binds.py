"""Many binds at once: the plain-Pod path, where throughput matters, and GPUJobs' gangs.

`BindPool` binds pods from a few threads, each thread with its OWN `PodApi` and `ApiClient` (the
python client is not thread-safe per client), without making the reconcile pass wait; its
`EventPoster` posts the pods' events afterwards, from one more thread, only while no bind waits,
and drops them (counted) when too many queue up. `GangPool` places many GPUJobs' gangs (create,
then bind, each pod) at once on threads of the same kind; the pass waits for all of them, since
their outcomes are its statuses, but not one round trip after another.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from kubernetes.client.exceptions import ApiException

from gputwin.adapters.kube.pods import PodApi, reason_of
from gputwin.api.bodies import Obj
from gputwin.runtime.capabilities import ConfigError

log = logging.getLogger(__name__)
T = TypeVar("T")
GANG_THREADS = 8  # gangs placed at once (a guess, not tuned: other counts were not measured)
MAX_THREADS = 256


def thread_count(env: dict[str, str], key: str, default: int) -> int:
    """A thread count from `env[key]`; ConfigError (one line at start-up) unless 1..MAX_THREADS."""
    raw = env.get(key, str(default)).strip()
    if not (raw.isdigit() and len(raw) <= 3 and 0 < int(raw) <= MAX_THREADS):
        raise ConfigError(f"{key}={raw[:40]!r}: not a thread count; want a whole number in 1..{MAX_THREADS}")
    return int(raw)


@dataclass(frozen=True, slots=True)
class BindResult:
    """How one bind of a batch went: `error` is None when the pod is bound to `node`."""

    namespace: str
    name: str
    node: str
    error: str | None = None
    at: float = 0.0  # time.monotonic() when the call returned (for the backend's timing trace)


EventNote = tuple[Obj, str, str, str]  # the pod, reason, message, type: what `PodApi.event` posts
EVENT_QUEUE = 1000  # kube-scheduler's event broadcaster queues at most 1,000 events and drops the rest
IDLE_POLL = 0.05  # seconds between looks at the bind pool while binds wait


class EventPoster:
    """Posts pod events from ONE thread of its own, in order, best effort.

    An event is news about a bind, not the bind: under a burst the binds must not wait behind
    their events for the API server (on the benchmark's burst the events slowed the first wave of
    binds by a third). So events are posted only while `idle()` says no bind is waiting, and, as
    kube-scheduler's event broadcaster does, at most `limit` events wait; one more is dropped
    (`dropped` counts them, `on_drop` is told).
    """

    def __init__(self, make_api: Callable[[], PodApi], limit: int = EVENT_QUEUE,
                 on_drop: Callable[[], None] | None = None, idle: Callable[[], bool] = lambda: True) -> None:  # fmt: skip
        self._make, self._on_drop, self._idle = make_api, on_drop, idle
        self._closing = threading.Event()
        self._queue: queue.Queue[EventNote | None] = queue.Queue(limit)
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.dropped = self.posted = 0

    @property
    def waiting(self) -> int:
        """Events queued, not yet taken by the thread."""
        return self._queue.qsize()

    def post(self, note: EventNote) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="gputwin-events", daemon=True)
                self._thread.start()
        try:
            self._queue.put_nowait(note)
        except queue.Full:
            self.dropped += 1
            if self._on_drop is not None:
                self._on_drop()

    def _run(self) -> None:
        api = self._make()
        while (note := self._queue.get()) is not None:
            while not self._idle() and not self._closing.wait(IDLE_POLL):
                pass  # binds first
            api.event(*note)  # never raises: a failed event is logged
            self.posted += 1

    def close(self) -> None:
        """Drop what still waits and end the thread (an event in flight is finished)."""
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is None:
            return
        self._closing.set()
        while True:
            try:
                self._queue.get_nowait()
            except queue.Empty:
                break
        self._queue.put(None)
        thread.join(timeout=10)


class ThreadApis:
    """One `PodApi` per thread (made on first use: a client is not shared between threads), and
    the requests they made together."""

    def __init__(self, make_api: Callable[[], PodApi]) -> None:
        self._make = make_api
        self._local = threading.local()
        self._lock = threading.Lock()
        self._apis: list[PodApi] = []

    def mine(self) -> PodApi:
        api: PodApi | None = getattr(self._local, "api", None)
        if api is None:
            api = self._local.api = self._make()
            with self._lock:
                self._apis.append(api)
        return api

    @property
    def requests(self) -> int:
        with self._lock:
            return sum(api.requests for api in self._apis)


class BindPool:
    """Binds pods from `threads` threads, one `PodApi` (and ApiClient) per thread, without making
    the caller wait (kube-scheduler's binding cycle: the scheduling pass goes on while the binds
    are made); the events about the binds go to an `EventPoster`.

    The binds wait in one `queue.SimpleQueue` that the threads (started as binds come) take from:
    handing a pass's binds over takes one lock per batch, not a `ThreadPoolExecutor.submit` per pod
    (a profile caught one hand-over of a burst's first wave waiting 0.47 s on the executor's locks;
    end to end the benchmark's figures did not move either way). `close` drops the binds not started
    and counts them done, and a submit after it is dropped instead of raising."""

    def __init__(self, make_api: Callable[[], PodApi], threads: int = 4,
                 on_event_drop: Callable[[], None] | None = None) -> None:  # fmt: skip
        self._size = max(threads, 1)
        self._apis = ThreadApis(make_api)
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[tuple[tuple[str, str, str], Callable[[BindResult], None]] | None] = (
            queue.SimpleQueue()
        )
        self._threads: list[threading.Thread] = []
        self._closed = False
        self._pending = 0  # binds submitted and not done
        self.events = EventPoster(make_api, on_drop=on_event_drop, idle=lambda: self._pending == 0)

    def _api(self) -> PodApi:
        return self._apis.mine()

    @property
    def requests(self) -> int:
        return self._apis.requests

    def submit(self, binds: Iterable[tuple[str, str, str]], done: Callable[[BindResult], None]) -> None:
        """Bind every (namespace, name, node) in order, on the pool's threads; `done` gets each
        result on the thread that made it, as soon as it is made. After `close`: dropped."""
        batch = list(binds)
        with self._lock:
            if self._closed or not batch:
                return
            self._pending += len(batch)
            for _ in range(min(len(batch), self._size - len(self._threads))):  # started as needed
                thread = threading.Thread(target=self._work, name=f"gputwin-bind_{len(self._threads)}", daemon=True)
                thread.start()
                self._threads.append(thread)
        for bind in batch:
            self._queue.put((bind, done))

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            self._bind(*item)

    def _bind(self, bind: tuple[str, str, str], done: Callable[[BindResult], None]) -> None:
        namespace, name, node = bind
        try:
            self._api().bind(namespace, name, node)
            result = BindResult(namespace, name, node, at=time.monotonic())
        except ApiException as exc:
            result = BindResult(namespace, name, node, reason_of(exc), at=time.monotonic())
        except Exception as exc:  # noqa: BLE001 - BindConflict, a broken connection, ...: this pod's failure
            result = BindResult(namespace, name, node, str(exc), at=time.monotonic())
        finally:
            with self._lock:
                self._pending -= 1
        try:
            done(result)
        except Exception:  # a callback that fails must not kill the pool's thread
            log.exception("handling the bind of %s/%s failed", namespace, name)

    def close(self) -> None:
        """End the threads: a bind in flight finishes, binds not started and events still waiting
        are dropped (their pods stay unbound: whoever schedules next queues them again)."""
        with self._lock:
            self._closed = True
            threads, self._threads = self._threads, []
        dropped = 0
        while True:  # binds not started: dropped
            try:
                item = self._queue.get_nowait()
            except queue.Empty:
                break
            dropped += item is not None
        with self._lock:
            self._pending -= dropped
        for _ in threads:
            self._queue.put(None)
        for thread in threads:
            thread.join()
        self.events.close()


class GangPool:
    """Runs `work(api, item)` for many items at once on `threads` threads, each with its own
    `PodApi` (made on first use); `run` returns each item's exception, or None, in order."""

    def __init__(self, make_api: Callable[[], PodApi], threads: int = GANG_THREADS) -> None:
        self._pool = ThreadPoolExecutor(max(threads, 1), thread_name_prefix="gputwin-gang")
        self._apis = ThreadApis(make_api)

    def _api(self) -> PodApi:
        return self._apis.mine()

    @property
    def requests(self) -> int:
        return self._apis.requests

    def run(self, items: Sequence[T], work: Callable[[PodApi, T], None]) -> list[Exception | None]:
        def one(item: T) -> Exception | None:
            try:
                work(self._api(), item)
            except Exception as exc:  # noqa: BLE001 - this item's failure, the caller's to report
                return exc
            return None

        return list(self._pool.map(one, items)) if len(items) > 1 else [one(i) for i in items]

    def close(self) -> None:
        """Let the work in flight finish; nothing is queued between two `run`s."""
        self._pool.shutdown(wait=True, cancel_futures=True)


__all__ = ["GANG_THREADS", "MAX_THREADS", "BindPool", "BindResult", "EventNote", "EventPoster", "GangPool",
           "ThreadApis", "thread_count"]
