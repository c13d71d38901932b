"""`BindTrace`: one JSON object per line, appended (a restarted operator adds to the same file), and
silent after `close`."""

from __future__ import annotations

import json
from pathlib import Path

from gputwin.adapters.kube.trace import ENV, BindTrace


def test_the_trace_appends_snapshots_and_binds(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    assert BindTrace.from_env({}) is None
    for attempt in range(2):  # two processes in turn, as with the benchmark's --restart
        trace = BindTrace.from_env({ENV: str(path)})
        assert trace is not None
        trace.snapshot(10.0 + attempt)
        trace.bound("ns/p", 10.0 + attempt, 10.25, 10.5, ok=attempt == 1)
        trace.close()
        trace.snapshot(99.0)  # closed: ignored
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines == [
        {"snap": 10.0}, {"pod": "ns/p", "snap": 10.0, "decided": 10.25, "bound": 10.5, "ok": False},
        {"snap": 11.0}, {"pod": "ns/p", "snap": 11.0, "decided": 10.25, "bound": 10.5, "ok": True},
    ]  # fmt: skip
