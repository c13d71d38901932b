"""`OperatorService` closes a backend that holds threads (the Kubernetes backend's bind pool) when it
throws its Controller away after a failed pass, and when it stops; a closed backend is never used again."""

from __future__ import annotations

import asyncio

from gputwin.operator.backends import SimBackend
from gputwin.operator.controller import Controller
from gputwin.operator.service import OperatorService
from gputwin.operator.store import MemoryStore, Objs


class ClosableBackend(SimBackend):
    def __init__(self) -> None:
        super().__init__()
        self.closed = 0

    def close(self) -> None:
        self.closed += 1


class BrokenStore(MemoryStore):
    """A store whose API server is down for the first `failures` lists."""

    def __init__(self, failures: int) -> None:
        super().__init__()
        self.failures = failures

    def list(self, kind: str) -> Objs:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("the API server is down")
        return super().list(kind)


def test_a_failed_pass_closes_its_backend_and_stop_closes_the_current_one() -> None:
    backends: list[ClosableBackend] = []
    store = BrokenStore(failures=1)

    def make() -> Controller:
        backends.append(ClosableBackend())
        return Controller(store, backends[-1])

    async def run() -> OperatorService:
        service = OperatorService(make, resync=0.05, debounce=0.0)
        await service.start()
        for _ in range(3000):  # the failed pass, its 1 s backoff, then a good pass
            if service.passes:
                break
            await asyncio.sleep(0.01)
        await service.stop()
        return service

    service = asyncio.run(run())
    assert service.failures == 1 and service.passes >= 1
    assert [b.closed for b in backends] == [1, 1]  # the failed pass's backend, then the last one at stop
