"""`BindPool` with a fake `PodApi`: every bind made once on at most `threads` threads, failures
reported per pod, and `close` drops the binds not started. (The binds against a real API server
run in tests/operator/test_operator_kube_backend.py; here the API is a fake so a test can hold a
bind in flight.)"""

from __future__ import annotations

import threading
from typing import Any

from kubernetes.client.exceptions import ApiException

from gputwin.adapters.kube.binds import BindPool, BindResult
from polling import wait_for


class FakeApi:
    """Binds by recording them; a pod named `refused-*` gets a 422; `gate` holds every bind."""

    def __init__(self, gate: threading.Event, lock: threading.Lock, made: list[tuple[str, str, str]]) -> None:
        self.gate, self.lock, self.made, self.requests = gate, lock, made, 0

    def bind(self, namespace: str, name: str, node: str) -> None:
        self.gate.wait(10)
        self.requests += 1
        if name.startswith("refused-"):
            raise ApiException(status=422, reason="Unprocessable")
        with self.lock:
            self.made.append((namespace, name, node))


def pool(threads: int, gate: threading.Event) -> tuple[BindPool, list[Any], list[BindResult]]:
    lock = threading.Lock()
    made: list[tuple[str, str, str]] = []
    apis: list[FakeApi] = []
    results: list[BindResult] = []

    def make() -> Any:
        api = FakeApi(gate, lock, made)
        apis.append(api)
        return api

    binder = BindPool(make, threads)
    return binder, [made, apis], results


def test_every_bind_is_made_once_on_at_most_the_pools_threads() -> None:
    gate = threading.Event()
    gate.set()
    binder, (made, apis), results = pool(4, gate)
    lock = threading.Lock()

    def done(result: BindResult) -> None:
        with lock:
            results.append(result)

    binds = [("ns", f"p{i}", f"n{i % 3}") for i in range(200)]
    binder.submit(binds[:150], done)
    binder.submit(binds[150:] + [("ns", "refused-1", "n0")], done)
    wait_for("every bind", lambda: len(results) == 201)
    assert sorted(made) == sorted(binds) and len(made) == len(set(made))
    failed = [r for r in results if r.error is not None]
    assert [(r.name, "Unprocessable" in (r.error or "")) for r in failed] == [("refused-1", True)]
    assert len(apis) <= 4 and binder.requests == 201  # one client per thread, at most `threads`
    assert binder._pending == 0
    binder.close()


def test_close_finishes_the_binds_in_flight_and_drops_the_rest() -> None:
    gate = threading.Event()
    binder, (made, apis), results = pool(2, gate)
    binder.submit([("ns", f"p{i}", "n0") for i in range(10)], results.append)
    wait_for("two binds in flight", lambda: len(apis) == 2)
    closing = threading.Thread(target=binder.close)
    closing.start()
    wait_for("close to drop the queued binds", lambda: binder._pending <= 2)
    gate.set()
    closing.join(10)
    assert not closing.is_alive()
    assert len(made) == 2 and len(results) == 2 and binder._pending == 0
    binder.submit([("ns", "late", "n0")], results.append)  # after close: dropped, no thread started
    assert len(results) == 2
