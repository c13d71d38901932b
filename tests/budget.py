"""The time a refusal may take, counted in CPU seconds of this process (docs/security.md, issue 12).

"A refusal takes under 2 s" is about the work gputwin does before it says no. Wall-clock time on a
loaded 2-core CI machine also counts the other processes' turns, so it is measured as CPU time
(`time.process_time`, every thread of this process): the same work gives the same figure however
busy the machine is, and a refusal that expands a million-node hostlist still fails it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

REFUSAL_CPU_SECONDS = 2.0

T = TypeVar("T")


def timed(call: Callable[[], T]) -> tuple[T, float]:
    """`call()`'s result and the CPU seconds this process spent in it."""
    start = time.process_time()
    result = call()
    return result, time.process_time() - start

# hypothesis' deadline is wall-clock time per example: generous, so a loaded machine does not turn
# a slow example into a failure, and still short enough that a hang fails the test.
FUZZ_DEADLINE_MS = 20_000
