"""An opt-in per-pod timing trace of the Kubernetes backend, so a benchmark can say where latency goes.

With `GPUTWIN_BIND_TRACE=FILE` the backend appends one JSON object per line to FILE:

    {"snap": T, "rv": R}                                        a pass read its snapshot of the cluster
    {"pod": "ns/name", "snap": T, "decided": T, "bound": T, "ok": true}    one bind of a plain Pod

`snap` is when the pass that decided read the watched copy, `rv` the resourceVersion of the last
pod event that copy held then (etcd's revision: a benchmark watching the same pods can tell
whether the pass could see an event it saw), `decided` when the pass handed the
pod to the bind pool, `bound` when the Binding call returned. Times are `time.monotonic()`:
CLOCK_MONOTONIC is one clock for every process of the machine, so the benchmark (another
process) can line them up with its own watch's times. The trace is diagnostics, not state: a
failed write is logged once and the trace turns itself off; the scheduler never waits for it.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
from typing import IO

ENV = "GPUTWIN_BIND_TRACE"

log = logging.getLogger(__name__)


class BindTrace:
    """Appends timing lines to one file (line-buffered, so a SIGKILL loses at most one line)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._out: IO[str] | None = open(path, "a", buffering=1, encoding="utf-8")  # noqa: SIM115 - closed in close()

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> BindTrace | None:
        path = (os.environ if env is None else env).get(ENV, "")
        return cls(path) if path else None

    @staticmethod
    def now() -> float:
        return time.monotonic()

    def snapshot(self, at: float, rv: str = "") -> None:
        self._write({"snap": round(at, 4), **({"rv": int(rv)} if rv.isdigit() else {})})

    def bound(self, pod: str, snap: float, decided: float, bound: float, ok: bool) -> None:
        self._write({"pod": pod, "snap": round(snap, 4), "decided": round(decided, 4),
                     "bound": round(bound, 4), "ok": ok})  # fmt: skip

    def close(self) -> None:
        with self._lock:
            if self._out is not None:
                self._out.close()
                self._out = None

    def _write(self, record: dict[str, object]) -> None:
        with self._lock:
            if self._out is None:
                return
            try:
                self._out.write(json.dumps(record) + "\n")
            except OSError as exc:  # a full disk must not stop scheduling: stop tracing instead
                log.warning("bind trace %s: %s; tracing off", self.path, exc)
                self._out = None


__all__ = ["ENV", "BindTrace"]
