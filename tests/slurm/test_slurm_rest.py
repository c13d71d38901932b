"""slurmrestd transport: the address rules and its failures, each one line (no daemon needed).

Reading history through a running slurmrestd is covered in test_slurm_history.py (transport "rest").
"""

from __future__ import annotations

from pathlib import Path

import pytest
from gputwin.adapters.slurm import SlurmCommandError, SlurmInputError
from gputwin.adapters.slurm.history import rest_query
from gputwin.adapters.slurm.rest import ENV, get_json, socket_path


def test_socket_path_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(ENV, "unix:/run/x.sock")
    assert socket_path() == "/run/x.sock"
    monkeypatch.delenv(ENV)
    with pytest.raises(SlurmInputError, match=f"{ENV} is not set"):
        socket_path()


@pytest.mark.parametrize("address", ["http://127.0.0.1:6820", "/run/x.sock", "unix:/a\nb"])
def test_only_unix_addresses(address: str) -> None:
    with pytest.raises(SlurmInputError, match="want unix:PATH"):
        socket_path(address)


def test_no_daemon_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(SlurmCommandError, match=r"^slurmrestd: /openapi/v3: ") as failure:
        get_json("/openapi/v3", address=f"unix:{tmp_path / 'absent.sock'}")
    assert "\n" not in str(failure.value)


def test_query_values_are_checked_like_sacct_arguments() -> None:
    assert rest_query("2026-01-02T03:04:05", "now", ["batch", "debug"], ["cd", "F"]) == {
        "start_time": "2026-01-02T03:04:05",
        "end_time": "now",
        "partition": "batch,debug",
        "state": "CD,F",
    }
    with pytest.raises(SlurmInputError, match="partition"):
        rest_query("now-1hours", "now", ["a&b=c"])
