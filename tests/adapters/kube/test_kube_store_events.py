"""The operator's events (`KubeStore.event`): each reply read to its end before its connection goes
back to the pool, and a failed post never fails the pass that made it.

Why: a reply given back unread left its body in the socket; the next request on that connection
read the body as its status line (BadStatusLine), the reconcile pass that had just placed gangs
failed, and the rebuilt controller deleted their pods as orphans and made them again (the gang
phase of benchmarks/kube_scale.py bound 38 pods for 19, in 4 of 7 runs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, config
from urllib3.exceptions import ProtocolError

from gputwin.adapters.kube.store import KubeStore
from polling import wait_for


def recording(store: KubeStore) -> list[Any]:
    """The raw replies of the store's event posts (the real call, kept as it returns)."""
    replies: list[Any] = []
    post = store._core.create_namespaced_event  # noqa: SLF001  (the store's own client, observed)

    def record(*args: Any, **kwargs: Any) -> Any:
        reply = post(*args, **kwargs)
        replies.append(reply)
        return reply

    setattr(store._core, "create_namespaced_event", record)  # noqa: B010, SLF001
    return replies


@pytest.mark.usefixtures("crds")
def test_each_event_reply_is_read_to_its_end_on_a_real_api_server(kube: Path, kubectl: Any, namespace: str) -> None:
    store = KubeStore(config.new_client_from_config(config_file=str(kube)))  # type: ignore[no-untyped-call]
    replies = recording(store)
    for i in range(3):
        store.event("GPUJob", namespace, f"job-{i}", "Queued", f"job-{i} waits for 8 GPUs")
    assert len(replies) == 3
    assert [reply.closed for reply in replies] == [True, True, True]  # read to the end, nothing left in the socket

    def posted() -> list[str] | None:
        items = kubectl.json("get", "events", "-n", namespace)["items"]
        names = sorted(e["involvedObject"]["name"] for e in items if e["reason"] == "Queued")
        return names if len(names) == 3 else None

    assert wait_for("the three events", posted) == ["job-0", "job-1", "job-2"]


class _BrokenConnection:
    """Stands in for the API server's side of a connection that returns garbage (cannot be made
    to happen on demand against a real one): every event post raises `error`."""

    def __init__(self, error: Exception) -> None:
        self.error, self.calls = error, 0

    def create_namespaced_event(self, *args: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise self.error


@pytest.mark.parametrize("error", [
    ProtocolError("Connection aborted.", "BadStatusLine('source\":{...}')"),
    ConnectionResetError("reset by peer"),
], ids=["bad-status-line", "connection-reset"])  # fmt: skip
def test_a_failed_event_post_is_logged_not_raised_fake_api(error: Exception, caplog: pytest.LogCaptureFixture) -> None:
    store = KubeStore(client.ApiClient(client.Configuration()), sleep=lambda _: None)
    setattr(store, "_uid", lambda *_: "0123456789")  # noqa: B010  (no API server to read the object from)
    broken = _BrokenConnection(error)
    setattr(store, "_core", broken)  # noqa: B010
    store.event("GPUJob", "team-a", "job-1", "Queued", "waits for 8 GPUs")
    assert broken.calls == 1
    assert "could not post event Queued on GPUJob job-1" in caplog.text
