"""`gputwin apply` / `run` of a live TraceReplay (manifests/examples/live-replay.yaml) in the emulator:
the same controller code as the operator forks the emulator's present and promotes on its forecast."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = str(ROOT / "manifests" / "samples" / "two-leaf.yaml")
EXAMPLE = ROOT / "manifests" / "examples" / "live-replay.yaml"


def gputwin(state: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--state", str(state)])
    return result.exit_code, result.stdout, result.stderr


def got(state: Path, kind: str, name: str) -> dict[str, object]:
    code, out, err = gputwin(state, "get", kind, name, "-o", "json")
    assert code == 0, err
    return dict(json.loads(out))


def test_a_live_replay_promotes_on_the_emulators_queue_then_run_drains_it(tmp_path: Path) -> None:
    state = tmp_path / "state"
    code, out, err = gputwin(state, "apply", "-f", CLUSTER, "-f", str(EXAMPLE))
    assert code == 0, err
    assert "tracereplay.gputwin.io/live-infer created" in out.splitlines()
    status = got(state, "tracereplay", "live-infer")["status"]
    assert isinstance(status, dict)
    assert (status["phase"], status["promoted"]) == ("Succeeded", True)
    assert str(status["winner"]).startswith(("sjf/", "las/"))  # both let the short jobs through first
    assert status["conditions"][0]["message"].endswith(  # type: ignore[index]
        "10 queued and 2 running jobs forecast under 3 policies over 86,400 s (8 samples)")
    policy = got(state, "schedulingpolicy", "fifo-consolidate")["spec"]
    assert policy["queue"]["policy"] == str(status["winner"]).split("/")[0]  # type: ignore[index]
    code, out, err = gputwin(state, "run")
    assert code == 0, err
    assert "GPUJobs 12 succeeded, 0 running, 0 queued" in out
    assert got(state, "tracereplay", "live-infer")["status"] == status  # once per generation


def test_apply_refuses_a_live_replay_over_its_bounds_and_writes_nothing(tmp_path: Path) -> None:
    state = tmp_path / "state"
    assert gputwin(state, "apply", "-f", CLUSTER)[0] == 0
    replay = next(d for d in yaml.safe_load_all(EXAMPLE.read_text()) if d["kind"] == "TraceReplay")
    replay["spec"]["trace"]["live"]["samples"] = 10_000
    manifest = tmp_path / "big.yaml"
    manifest.write_text(yaml.safe_dump(replay))
    code, _, err = gputwin(state, "apply", "-f", str(manifest))
    assert code == 1 and len(err.strip().splitlines()) == 1 and "samples" in err, err
    assert not list((state / "objects").rglob("tracereplays/**/*.json"))  # nothing half-written
