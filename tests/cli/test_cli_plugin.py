"""The kubectl plugin `kubectl-gputwin` (gputwin.cli.plugin): its console script, kubectl's dispatch,
a command that needs no cluster, and live `describe` over a mock API server's objects and events.

The snapshot is tests/twin/data/philly-mix1-2vc.snapshot.json (made by make_snapshot.py there).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from gputwin.cli.describe import show
from gputwin.cli.plugin import LiveView

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOT = ROOT / "tests" / "twin" / "data" / "philly-mix1-2vc.snapshot.json"
BIN = Path(sys.executable).parent  # the venv's scripts, where pip put kubectl-gputwin


def plugin(*args: str, via_kubectl: bool = False) -> subprocess.CompletedProcess[str]:
    argv = ["kubectl", "gputwin", *args] if via_kubectl else [str(BIN / "kubectl-gputwin"), *args]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, check=False)


def test_the_console_script_lists_the_live_commands() -> None:
    done = plugin("--help")
    assert done.returncode == 0, done.stderr
    assert "Usage: kubectl gputwin" in done.stdout
    assert [line.split()[0] for line in done.stdout.split("Commands:")[1].strip().splitlines()] == ["describe",
                                                                                                     "forecast"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl not installed")
def test_kubectl_dispatches_to_the_plugin_without_a_cluster() -> None:
    done = plugin("describe", "--help", via_kubectl=True)
    assert done.returncode == 0, done.stderr
    assert "Usage: kubectl gputwin describe" in done.stdout


def test_forecast_from_a_snapshot_runs_through_the_plugin() -> None:
    done = plugin("forecast", "--snapshot", str(SNAPSHOT), "--samples", "2", "--horizon", "12h", "--json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["samples"] == 2 and data["jobs"]
    started = [job for job in data["jobs"] if job["start_p90_s"] is not None]  # None: not within the horizon
    assert started and all(job["start_p50_s"] <= job["start_p90_s"] for job in started)


def test_a_user_mistake_is_one_line_and_exit_2() -> None:
    done = plugin("forecast", "--snapshot", str(ROOT / "no-such.json"))
    assert done.returncode == 2 and done.stderr.startswith("error: ") and done.stderr.count("\n") == 1, done.stderr


JOB = {"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
       "metadata": {"name": "llm", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"},
       "spec": {"taskType": "train", "gpus": 16}, "status": {"phase": "Running", "conditions": []}}  # fmt: skip


class MockStore:
    """Stands in for KubeStore: the objects a live API server would list."""

    def list(self, kind: str) -> list[dict[str, Any]]:
        return [JOB] if kind == "GPUJob" else []

    def get(self, kind: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        return JOB if (kind, name) == ("GPUJob", "llm") else None


class MockCoreApi:
    """Stands in for CoreV1Api: two Events about the job, one about something else, newest first."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def list_namespaced_event(self, namespace: str, field_selector: str) -> Any:
        self.asked.append((namespace, field_selector))
        at = datetime(2026, 1, 1, 0, 5, tzinfo=timezone.utc)
        target = SimpleNamespace(kind="GPUJob", name="llm", namespace="default")
        other = SimpleNamespace(kind="GPUJob", name="other", namespace="default")
        return SimpleNamespace(items=[
            SimpleNamespace(involved_object=target, last_timestamp=at, event_time=None, first_timestamp=None,
                            type="Normal", reason="Started", message="on gpu[01-02]"),
            SimpleNamespace(involved_object=target, last_timestamp=at.replace(minute=1), event_time=None,
                            first_timestamp=None, type="Normal", reason="Scheduled", message="16 GPUs"),
            SimpleNamespace(involved_object=other, last_timestamp=at, event_time=None, first_timestamp=None,
                            type="Warning", reason="Rejected", message="not mine"),
        ])  # fmt: skip


def test_live_describe_shows_the_objects_events_oldest_first_with_a_mock_api(capsys: pytest.CaptureFixture[str]) -> None:
    core = MockCoreApi()
    show(LiveView(MockStore(), core, "default"), "gpujob", ("llm",), "default", False)
    out = capsys.readouterr().out
    assert core.asked == [("default", "involvedObject.apiVersion=gputwin.io/v1alpha1")]
    events = out.split("Events:")[1]
    assert events.index("Scheduled") < events.index("Started") and "not mine" not in events
    assert "2026-01-01T00:01:00Z" in events and "Name:" in out and "llm" in out


UNREACHABLE = """apiVersion: v1
kind: Config
clusters: [{name: a, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: a, user: u}}]
current-context: c
"""


@pytest.mark.parametrize(
    ("content", "extra", "message"),
    [
        pytest.param(None, [], "kubeconfig: ", id="missing-file"),
        pytest.param("", [], "kubeconfig: Invalid kube-config", id="empty-file"),
        pytest.param("job_id,user\n1,u\n", [], "kubeconfig: not a kubeconfig", id="a-csv"),
        pytest.param("- [unbalanced\n", [], "kubeconfig: ", id="bad-yaml"),
        pytest.param(UNREACHABLE, ["--context", "nope"], "kubeconfig: Invalid kube-config file. Expected object with "
                     "name nope", id="unknown-context"),
        pytest.param(UNREACHABLE, [], "https://127.0.0.1:1: API server: ", id="server-refuses"),
    ],
)  # fmt: skip
def test_a_kubeconfig_or_server_it_cannot_use_is_one_line_and_exit_1(
    tmp_path: Path, content: str | None, extra: list[str], message: str
) -> None:
    path = tmp_path / "kubeconfig"
    if content is not None:
        path.write_text(content)
    done = plugin("describe", "gpujobs", "--kubeconfig", str(path), *extra)
    assert done.returncode == 1 and done.stdout == "", done
    assert done.stderr.startswith("error: ") and done.stderr.count("\n") == 1 and message in done.stderr, done.stderr
