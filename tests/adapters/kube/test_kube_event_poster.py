"""`EventPoster` on a REAL API server: pod events wait while binds do, at most `limit` of them;
one more is dropped and counted; the rest are posted, in order, once the binds are done."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from gputwin.adapters.kube.binds import EventPoster
from gputwin.adapters.kube.pods import PodApi
from polling import wait_for


def test_events_wait_for_the_binds_and_the_overflow_is_dropped(
    kube: Path, kubectl: Any, namespace: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KUBECONFIG", str(kube))
    binding = [True]  # binds waiting: the poster must hold its events
    dropped: list[int] = []
    poster = EventPoster(PodApi.connect, limit=2, on_drop=lambda: dropped.append(1), idle=lambda: not binding[0])
    pods = [{"metadata": {"namespace": namespace, "name": f"p{i}"}} for i in range(5)]
    try:
        poster.post((pods[0], "Scheduled", "first", "Normal"))
        wait_for("the thread to take the first event", lambda: poster.waiting == 0)
        for pod in pods[1:]:
            poster.post((pod, "Scheduled", "later", "Normal"))
        assert (poster.waiting, poster.dropped, len(dropped), poster.posted) == (2, 2, 2, 0)
        time.sleep(0.3)
        assert poster.posted == 0  # still binding: nothing posted
        binding[0] = False
        wait_for("the held events", lambda: poster.posted == 3)
        found = kubectl.json("get", "events", "-n", namespace)["items"]
        assert sorted(e["involvedObject"]["name"] for e in found) == ["p0", "p1", "p2"]
        assert {e["reason"] for e in found} == {"Scheduled"}
    finally:
        poster.close()
