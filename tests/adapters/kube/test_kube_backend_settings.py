"""The Kubernetes backend's thread settings: a bad value is one line at start-up, before any connection."""

from __future__ import annotations

import pytest
from gputwin.adapters.kube.backend import KubernetesBackend
from gputwin.adapters.kube.binds import MAX_THREADS, thread_count as _threads

from gputwin.operator.config import ConfigError


@pytest.mark.parametrize(
    ("raw", "want"),
    [pytest.param(None, 8, id="unset-default"), pytest.param("1", 1, id="one-serial"),
     pytest.param(" 16 ", 16, id="spaces"), pytest.param(str(MAX_THREADS), MAX_THREADS, id="max")],
)  # fmt: skip
def test_thread_counts_read(raw: str | None, want: int) -> None:
    env = {} if raw is None else {"GPUTWIN_GANG_THREADS": raw}
    assert _threads(env, "GPUTWIN_GANG_THREADS", 8) == want


@pytest.mark.parametrize("key", ["GPUTWIN_BIND_THREADS", "GPUTWIN_GANG_THREADS"])
@pytest.mark.parametrize("raw", ["0", "-3", "eight", "1.5", "", str(MAX_THREADS + 1), "9" * 5000])
def test_a_bad_thread_count_is_refused_before_connecting(key: str, raw: str) -> None:
    with pytest.raises(ConfigError) as caught:
        KubernetesBackend.from_env({key: raw})
    message = str(caught.value)
    assert message.startswith(f"{key}=") and "\n" not in message and len(message) < 200
