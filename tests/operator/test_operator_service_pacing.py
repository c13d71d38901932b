"""`OperatorService` paces its passes (`GPUTWIN_PASS_DUTY`): after a pass of T s, the next waits
T * (1/duty - 1) s however often it is poked, so a busy loop leaves the cores to the API server and
the kubelets; the setting is read and checked with a one-line reason."""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Callable
from typing import Any

import pytest

from gputwin.operator.backends import SimBackend
from gputwin.operator.config import PASS_DUTY, ConfigError, pass_duty
from gputwin.operator.controller import Controller
from gputwin.operator.service import MAX_REST_SECONDS, OperatorService, rest_after
from gputwin.operator.store import MemoryStore

PASS_SECONDS = 0.05


@pytest.mark.parametrize(
    ("env", "want"),
    [
        ({}, PASS_DUTY),
        ({"GPUTWIN_PASS_DUTY": ""}, PASS_DUTY),
        ({"GPUTWIN_PASS_DUTY": "1"}, 1.0),
        ({"GPUTWIN_PASS_DUTY": " 0.25 "}, 0.25),
    ],
)
def test_pass_duty_reads_the_setting(env: dict[str, str], want: float) -> None:
    assert pass_duty(env) == want


@pytest.mark.parametrize("raw", ["0", "-0.5", "1.5", "half", "nan", "inf"])
def test_a_wrong_pass_duty_is_one_line_naming_the_setting(raw: str) -> None:
    with pytest.raises(ConfigError) as info:
        pass_duty({"GPUTWIN_PASS_DUTY": raw})
    message = str(info.value)
    assert message.startswith("GPUTWIN_PASS_DUTY=") and repr(raw) in message and "\n" not in message


@pytest.mark.parametrize(
    ("seconds", "duty", "want"),
    [
        (0.2, 1.0, 0.0),
        (0.2, 0.5, 0.2),
        (0.1, 0.25, 0.3),
        (0.0, 0.5, 0.0),
        (-1.0, 0.5, 0.0),
        (30.0, 0.5, MAX_REST_SECONDS),
    ],
)
def test_rest_after_a_pass(seconds: float, duty: float, want: float) -> None:
    assert rest_after(seconds, duty) == pytest.approx(want)


class SlowController(Controller):
    """A Controller whose every pass takes PASS_SECONDS more (on the worker thread) and is timed."""

    def __init__(self, starts: list[float]) -> None:
        super().__init__(MemoryStore(), SimBackend())
        self.starts = starts

    def reconcile_cluster(self, now: float) -> None:
        self.starts.append(time.monotonic())
        time.sleep(PASS_SECONDS)
        super().reconcile_cluster(now)


def pass_starts(duty: float, seconds: float = 0.8) -> list[float]:
    """When each pass started while the service was poked without pause for `seconds`."""
    starts: list[float] = []

    async def run() -> None:
        service = OperatorService(lambda: SlowController(starts), debounce=0.0, duty=duty)
        await service.start()
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            service.poke()
            await asyncio.sleep(0.002)
        await service.stop()

    asyncio.run(run())
    return starts


@pytest.mark.parametrize("duty", [0.5, 0.25])
def test_passes_poked_without_pause_rest_in_proportion(duty: float) -> None:
    starts = pass_starts(duty)
    gaps = [b - a for a, b in itertools.pairwise(starts)]
    assert len(gaps) >= 2
    # Each gap is the pass (>= PASS_SECONDS) plus its rest (>= PASS_SECONDS * (1/duty - 1)): a
    # slower machine only makes gaps longer, so this lower bound holds under load.
    assert min(gaps) >= PASS_SECONDS / duty * 0.95


def test_duty_one_does_not_rest() -> None:
    starts = pass_starts(1.0)
    paced = pass_starts(0.25)
    assert len(starts) > len(paced)  # ~16 passes against ~4 in the same time


def test_pokes_from_a_watch_thread_wake_the_loop_once_per_pending_poke() -> None:
    """While a poke is pending (here: in a long debounce), more pokes from another thread cost no
    trip through the event loop, and they still get their pass."""
    starts: list[float] = []
    scheduled: list[object] = []

    async def run() -> OperatorService:
        service = OperatorService(lambda: SlowController(starts), debounce=0.5, duty=1.0)
        service.poke_from_thread()  # not started: nothing to wake, no error
        await service.start()
        loop = asyncio.get_running_loop()
        real = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any, **kwargs: Any) -> Any:
            if callback == service.poke:  # the loop's own futures come through here too
                scheduled.append(callback)
            return real(callback, *args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        await wait_until(lambda: service.passes == 1)  # the first pass is over; nothing pending
        await asyncio.to_thread(service.poke_from_thread)
        await wait_until(service._poked.is_set)
        assert len(scheduled) == 1
        await asyncio.to_thread(lambda: [service.poke_from_thread() for _ in range(1000)])
        assert len(scheduled) == 1  # still pending (the debounce): no more trips
        await wait_until(lambda: service.passes == 2)
        await service.stop()
        return service

    assert asyncio.run(run()).passes == 2


async def wait_until(done: Callable[[], bool], timeout: float = 10.0) -> None:
    end = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < end, "timed out"
        await asyncio.sleep(0.01)
