"""`GangPool` with a fake `PodApi` (mock): each item's work runs once, on a thread with its own
API, at most `threads` at a time, with its failure returned in the item's place. (GPUJob gangs placed
through it against a real API server: tests/operator/test_operator_e2e.py and the kube backend tests.)"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from gputwin.adapters.kube.binds import GangPool


class MockApi:
    """Counts the work done through it; `requests` as PodApi has it."""

    def __init__(self) -> None:
        self.requests = 0


def run_pool(threads: int, items: list[int]) -> tuple[list[Exception | None], list[MockApi], int]:
    apis: list[MockApi] = []
    lock = threading.Lock()
    busy = peak = 0

    def make() -> Any:
        api = MockApi()
        with lock:
            apis.append(api)
        return api

    def work(api: Any, item: int) -> None:
        nonlocal busy, peak
        with lock:
            busy += 1
            peak = max(peak, busy)
        time.sleep(0.002)  # long enough that threads overlap
        api.requests += 1
        with lock:
            busy -= 1
        if item % 7 == 3:
            raise RuntimeError(f"item {item} refused")

    pool = GangPool(make, threads)
    try:
        errors = pool.run(items, work)
        assert pool.requests == len(items)
    finally:
        pool.close()
    return errors, apis, peak


@pytest.mark.parametrize(("threads", "count"), [(1, 5), (4, 60), (8, 1), (8, 0)], ids=["one-thread", "four", "single-item", "none"])
def test_mock_api_each_item_once_failures_in_place(threads: int, count: int) -> None:
    errors, apis, peak = run_pool(threads, list(range(count)))
    assert [str(e) if e else None for e in errors] == [f"item {i} refused" if i % 7 == 3 else None for i in range(count)]
    assert sum(a.requests for a in apis) == count
    assert len(apis) <= max(threads, 1) and peak <= threads
    if count >= 2 * threads > 2:
        assert len(apis) > 1  # really concurrent: more than one thread (each with its own API) did work
