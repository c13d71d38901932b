"""The embedded emulator end to end: `gputwin apply / get / delete / run / events` on a state directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gputwin.cli.kubectl import age
from gputwin.cli.main import cli

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = ROOT / "manifests" / "samples"
CLUSTER, JOBS = str(SAMPLES / "two-leaf.yaml"), str(SAMPLES / "gpujobs.yaml")


@pytest.fixture
def state(tmp_path: Path) -> Path:
    return tmp_path / "state"


def gputwin(state: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--state", str(state)])
    return result.exit_code, result.stdout, result.stderr


def snapshot(state: Path) -> dict[str, str]:
    """Every file of the state directory but the lock: what "nothing changed" compares."""
    return {
        str(p.relative_to(state)): p.read_text()
        for p in sorted(state.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def rows(table: str) -> list[list[str]]:
    return [line.split() for line in table.strip().splitlines()]


def test_apply_run_get_with_the_sample_manifests(state: Path) -> None:
    code, out, err = gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    assert code == 0, err
    assert out.splitlines()[0] == "switchtopology.gputwin.io/two-leaf created"
    assert "gpujob.gputwin.io/llm-finetune created" in out.splitlines()
    code, out, err = gputwin(state, "run")
    assert code == 0, err
    assert out.strip() == ("2026-01-01T04:12:00Z (+4h12m, 3 steps): "
                           "GPUJobs 3 succeeded, 0 running, 0 queued, 0 pending, 0 rejected")  # fmt: skip
    code, out, _ = gputwin(state, "get", "gpujobs")
    table = rows(out)
    assert table[0] == ["NAME", "PHASE", "PARTITION", "GPUS", "NODES", "START-P50", "AGE"]
    assert {r[0]: r[1:5] for r in table[1:]} == {
        "bert-serving": ["Succeeded", "infer", "1", "gpu07"],
        "llm-finetune": ["Succeeded", "train", "16", "gpu[01-02]"],
        "resnet50-4gpu": ["Succeeded", "train", "4", "gpu05"],
    }
    assert all(r[5:] == ["<none>", "4h12m"] for r in table[1:])  # no forecast once ended; ages on the virtual clock


FORECAST_JOBS = """
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: big-a}
spec: {taskType: train, gpus: 32, durationSeconds: 3600}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: big-b}
spec: {taskType: train, gpus: 32, durationSeconds: 3600}
"""


def test_get_gpujobs_shows_the_forecast_start_of_waiting_jobs(state: Path, tmp_path: Path) -> None:
    """two-leaf's train partition has 32 GPUs: big-a runs, big-b waits about its hour (duration
    drawn around durationSeconds); the partition's queue drains then too."""
    (tmp_path / "jobs.yaml").write_text(FORECAST_JOBS)
    code, _, err = gputwin(state, "apply", "-f", CLUSTER, "-f", str(tmp_path / "jobs.yaml"))
    assert code == 0, err
    table = {r[0]: r for r in rows(gputwin(state, "get", "gpujobs")[1])[1:]}
    assert table["big-a"][1] == "Running" and table["big-a"][5] == "<none>"
    waiting = yaml.safe_load(gputwin(state, "get", "gpujob", "big-b", "-o", "yaml")[1])["status"]
    p50 = waiting["forecast"]["startTime"]["p50"]
    assert table["big-b"][1] == "Queued" and table["big-b"][5] == p50
    start = age_seconds(p50) - age_seconds(waiting["forecast"]["computedAt"])
    assert 1800 < start < 7200 and waiting["forecast"]["startTime"]["p90"] >= p50
    part = yaml.safe_load(gputwin(state, "get", "gpupartition", "train", "-o", "yaml")[1])["status"]
    assert abs(part["forecast"]["drainSeconds"]["p50"] - start) <= 1.0
    gputwin(state, "run")  # once big-b runs (and ends), its forecast is gone
    ended = yaml.safe_load(gputwin(state, "get", "gpujob", "big-b", "-o", "yaml")[1])["status"]
    assert ended["phase"] == "Succeeded" and "forecast" not in ended


def age_seconds(timestamp: str) -> float:
    from gputwin.api.status import epoch_seconds

    return epoch_seconds(timestamp)


def test_get_output_round_trips_through_apply(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    before = snapshot(state)
    code, out, _ = gputwin(state, "get", "gputwin", "-A", "-o", "yaml")
    assert code == 0
    listed = yaml.safe_load(out)
    assert listed["kind"] == "List" and len(listed["items"]) == 8
    exported = state.parent / "exported.yaml"
    exported.write_text(out)
    code, out, err = gputwin(state, "apply", "-f", str(exported))
    assert code == 0, err
    assert [line.split()[-1] for line in out.splitlines()] == ["unchanged"] * 8
    assert snapshot(state) == before
    code, out, _ = gputwin(state, "get", "gpuj", "llm-finetune", "-o", "json")
    job = json.loads(out)
    assert (job["kind"], job["status"]["phase"], job["status"]["allocation"]["runSeconds"]) == (
        "GPUJob",
        "Running",
        15120.0,
    )


def test_a_bad_manifest_stores_nothing_and_says_what_is_wrong(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER)
    before = snapshot(state)
    bad = state.parent / "bad.yaml"
    bad.write_text(
        Path(JOBS).read_text()
        + """---
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: zero, namespace: default}
spec: {taskType: train, gpus: 0}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {name: extra}
spec: {topology: two-leaf, taskTypes: [eval], nodes: "gpu[06-07]", policy: missing}
"""
    )
    code, out, err = gputwin(state, "apply", "-f", str(bad))
    assert (code, out) == (1, "")  # kubectl's status
    assert err.splitlines() == [
        (
            f'error: {bad}:doc4: The GPUJob "zero" is invalid: spec.gpus: Invalid value: 0: '
            "should be greater than or equal to 1"
        )
    ]
    assert snapshot(state) == before
    bad.write_text(bad.read_text().replace("gpus: 0", "gpus: 1"))
    code, out, err = gputwin(state, "apply", "-f", str(bad))
    assert (code, out) == (1, "")  # kubectl's status
    extra = f'error: {bad}:doc5: The GPUPartition "extra" is invalid:'
    assert err.splitlines() == [
        f"{extra} spec.policy: Invalid value: \"missing\": unknown SchedulingPolicy 'missing'; "
        + "declared: 'fifo-consolidate', 'sjf-topology'",
        f"{extra} spec.nodes: Invalid value: \"gpu[06-07]\": node 'gpu06' already in GPUPartition 'train'",
        f"{extra} spec.nodes: Invalid value: \"gpu[06-07]\": node 'gpu07' already in GPUPartition 'infer'",
    ]  # fmt: skip
    assert snapshot(state) == before


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["get", "pods"], 'error: the server doesn\'t have a resource type "pods"'),
        (["get", "gpujob", "nope"], 'error: gpujobs.gputwin.io "nope" not found'),
        (["delete", "gpuj", "nope"], 'error: gpujobs.gputwin.io "nope" not found'),
        (["apply", "-f", "/nonexistent.yaml"], 'error: the path "/nonexistent.yaml" does not exist'),
    ],
    ids=["unknown-kind", "get-missing", "delete-missing", "missing-file"],
)
def test_user_mistakes_are_one_line_and_exit_1_as_kubectl(state: Path, args: list[str], message: str) -> None:
    gputwin(state, "apply", "-f", CLUSTER)
    before = snapshot(state)
    code, _, err = gputwin(state, *args)
    assert (code, err.strip()) == (1, message)
    assert snapshot(state) == before


def test_get_speaks_every_kubectl_name_and_shows_printer_columns(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    for word in ("gpupartitions", "gpupartition", "GPUPartition", "gpup", "gpupartitions.gputwin.io"):
        code, out, _ = gputwin(state, "get", word)
        assert code == 0 and rows(out)[0] == ["NAME", "FREE", "TOTAL", "QUEUE", "POLICY", "AGE"]
    _, out, _ = gputwin(state, "get", "gpup")
    assert ["train", "28", "48", "0", "sjf-topology", "0s"] in rows(out)
    _, out, _ = gputwin(state, "get", "gputwin")
    assert "switchtopology.gputwin.io/two-leaf" in out and "gpujob.gputwin.io/resnet50-4gpu" in out
    code, _, err = gputwin(state, "get", "gpujobs", "-n", "other")
    assert (code, err.strip()) == (0, "No resources found in other namespace.")
    fresh = state.parent / "fresh"
    assert gputwin(fresh, "get", "swt")[2].strip() == "No resources found." and not fresh.exists()


def test_delete_stops_a_running_job_and_frees_its_gpus(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    code, out, err = gputwin(state, "delete", "gpujob", "llm-finetune")
    assert (code, out.strip()) == (0, 'gpujob.gputwin.io "llm-finetune" deleted'), err
    _, out, _ = gputwin(state, "get", "gpup", "train")
    assert rows(out)[1][:3] == ["train", "44", "48"]
    code, out, _ = gputwin(state, "delete", "-f", JOBS, "--ignore-not-found")
    assert code == 0 and len(out.splitlines()) == 2


def test_run_until_stops_the_clock_and_events_tell_the_story(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    code, out, _ = gputwin(state, "run", "--until", "3600")
    assert code == 0 and out.startswith("2026-01-01T01:00:00Z (+60m")
    assert "1 succeeded, 2 running" in out  # bert-serving serves for two hours
    code, out, _ = gputwin(state, "events", "--for", "gpujob/resnet50-4gpu")
    table = rows(out)
    assert [r[2] for r in table[1:]] == ["Scheduled", "Completed"]
    assert table[2][0] == "2026-01-01T01:00:00Z"


def test_state_directory_comes_from_the_environment(tmp_path: Path) -> None:
    runner = CliRunner(env={"GPUTWIN_STATE": str(tmp_path / "env-state")})
    result = runner.invoke(cli, ["apply", "-f", CLUSTER])
    assert result.exit_code == 0, result.stderr
    assert (tmp_path / "env-state" / "objects" / "switchtopologies" / "two-leaf.json").is_file()
    assert json.loads((tmp_path / "env-state" / "clock.json").read_text())["time"] == "2026-01-01T00:00:00Z"


AGES = [(0, "0s"), (119, "119s"), (330, "5m30s"), (3600, "60m"), (4 * 3600 + 720, "4h12m"), (3 * 86400, "3d"),
        (800 * 86400, "2y70d")]  # fmt: skip


@pytest.mark.parametrize(("seconds", "shown"), AGES)
def test_ages_read_like_kubectl(seconds: float, shown: str) -> None:
    assert age(seconds) == shown


def test_the_whole_samples_folder_applies_runs_and_fills_every_status(
    state: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The TraceReplay sample names its trace relative to the repo root, as a user running
    # `gputwin apply -f manifests/samples/` from a checkout would.
    monkeypatch.chdir(ROOT)
    code, _, err = gputwin(state, "apply", "-f", str(SAMPLES))
    assert code == 0, err
    assert gputwin(state, "run")[0] == 0
    code, out, _ = gputwin(state, "get", "gputwin", "-o", "json")
    assert code == 0
    items = json.loads(out)["items"]
    assert {i["kind"] for i in items} == {"SwitchTopology", "GPUPartition", "SchedulingPolicy", "GPUJob", "TraceReplay"}
    assert [i["metadata"]["name"] for i in items if not i.get("status", {}).get("conditions")] == []
    assert {i["status"]["phase"] for i in items if i["kind"] == "GPUJob"} == {"Succeeded"}
    replay = next(i for i in items if i["kind"] == "TraceReplay")
    assert replay["status"]["phase"] == "Succeeded" and replay["status"]["winner"]


def test_a_trace_replay_reads_its_trace_from_an_applied_configmap(state: Path, tmp_path: Path) -> None:
    trace = ROOT / "src" / "gputwin" / "data" / "demo-trace.csv"
    head = "".join(trace.read_text().splitlines(keepends=True)[:200])
    configmap: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "traces"},
                 "data": {"jobs.csv": head}}  # fmt: skip
    replay: dict[str, Any] = {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay",
              "metadata": {"name": "from-cm"},
              "spec": {"trace": {"configMap": {"name": "traces", "key": "jobs.csv"}}, "topology": "two-leaf",
                       "candidates": [{"queue": "sjf", "placement": "consolidate"}]}}  # fmt: skip
    manifest = tmp_path / "replay.yaml"
    manifest.write_text(yaml.safe_dump_all([configmap, replay]))
    code, out, err = gputwin(state, "apply", "-f", CLUSTER, "-f", str(manifest))
    assert code == 0, err
    assert "configmap/traces created" in out.splitlines()
    assert (state / "objects" / "configmaps" / "default" / "traces.json").is_file()
    code, out, _ = gputwin(state, "get", "tracereplay", "from-cm", "-o", "json")
    status = json.loads(out)["status"]
    assert status["phase"] == "Succeeded" and status["winner"] == status["candidates"][0]["name"]
    assert {c["metrics"]["jobs"] for c in status["candidates"]} == {199}
    code, out, _ = gputwin(state, "apply", "-f", str(manifest))
    assert out.splitlines() == ["configmap/traces unchanged", "tracereplay.gputwin.io/from-cm unchanged"]

    # A key the ConfigMap lacks: the replay fails and says which.
    replay["metadata"]["name"], replay["spec"]["trace"]["configMap"]["key"] = "no-key", "x.csv"
    manifest.write_text(yaml.safe_dump(replay))
    assert gputwin(state, "apply", "-f", str(manifest))[0] == 0
    code, out, _ = gputwin(state, "get", "tracereplay", "no-key", "-o", "json")
    failed = json.loads(out)["status"]
    assert failed["phase"] == "Failed"
    assert "ConfigMap default/traces has no key x.csv" in failed["conditions"][0]["message"]

    # ConfigMaps are validated minimally (string data) and deleted like the rest.
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({**configmap, "metadata": {"name": "bad"}, "data": {"n": 3}}))
    code, _, err = gputwin(state, "apply", "-f", str(bad))
    assert code == 1
    invalid = 'The ConfigMap "bad" is invalid: data[n]: Invalid value: 3: must be a string'
    assert err.strip() == f"error: {bad}:doc1: {invalid}"
    cm_only = tmp_path / "cm.yaml"
    cm_only.write_text(yaml.safe_dump(configmap))
    code, out, err = gputwin(state, "delete", "-f", str(cm_only))
    assert (code, out.strip()) == (0, 'configmap "traces" deleted'), err
    assert not (state / "objects" / "configmaps" / "default" / "traces.json").exists()


# --- kubectl habits: -f -, --dry-run, -l, comma-separated kinds, -o wide ----------------------------


def gputwin_in(state: Path, stdin: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [*args, "--state", str(state)], input=stdin)
    return result.exit_code, result.stdout, result.stderr


def test_apply_reads_standard_input(state: Path) -> None:
    code, out, err = gputwin_in(state, Path(CLUSTER).read_text(), "apply", "-f", "-")
    assert code == 0, err
    assert out.splitlines()[0] == "switchtopology.gputwin.io/two-leaf created"
    code, _, err = gputwin_in(state, "kind: GPUJob\n", "apply", "-f", "-")
    assert (code, err.strip()) == (1, "error: <stdin>:doc1: apiVersion not set")
    code, _, err = gputwin_in(state, "# " + "x" * (1 << 20) + "\n", "apply", "-f", "-")  # the file cap holds
    assert (code, err.strip()) == (
        1,
        "error: <stdin>: path: larger than 1048576 bytes, the most a manifest file may hold",
    )


def test_apply_dry_run_says_what_would_change_and_stores_nothing(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    before = snapshot(state)
    changed = state.parent / "changed.yaml"
    changed.write_text(Path(JOBS).read_text().replace("gpus: 4", "gpus: 8") + """---
apiVersion: gputwin.io/v1alpha1
kind: GPUJob
metadata: {name: extra, namespace: default}
spec: {taskType: train, gpus: 1}
""")
    for flag, mark in (("--dry-run", "(dry run)"), ("--dry-run=client", "(dry run)"),
                       ("--dry-run=server", "(server dry run)")):  # fmt: skip
        code, out, err = gputwin(state, "apply", flag, "-f", str(changed))
        assert code == 0, err
        assert out.splitlines() == [
            f"gpujob.gputwin.io/resnet50-4gpu configured {mark}",
            f"gpujob.gputwin.io/llm-finetune unchanged {mark}",
            f"gpujob.gputwin.io/bert-serving unchanged {mark}",
            f"gpujob.gputwin.io/extra created {mark}",
        ]
        assert snapshot(state) == before
    fresh = state.parent / "fresh"
    assert gputwin(fresh, "apply", "--dry-run", "-f", CLUSTER)[0] == 0 and not fresh.exists()
    bad = state.parent / "bad.yaml"
    bad.write_text(changed.read_text().replace("gpus: 1}", "gpus: 0}"))
    code, out, err = gputwin(state, "apply", "--dry-run", "-f", str(bad))
    assert (code, out) == (1, "") and "spec.gpus" in err
    assert snapshot(state) == before


SELECTORS = [
    ("team=nlp", ["llm-finetune"]),
    ("team==nlp", ["llm-finetune"]),
    ("team!=nlp", ["bert-serving", "resnet50-4gpu"]),
    ("team", ["llm-finetune"]),
    ("!team", ["bert-serving", "resnet50-4gpu"]),
    ("team=nlp,team!=nlp", []),
    ("team=cv", []),
]


@pytest.mark.parametrize(("selector", "names"), SELECTORS, ids=[s for s, _ in SELECTORS])
def test_get_selects_by_label(state: Path, selector: str, names: list[str]) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    code, out, err = gputwin(state, "get", "gpujobs", "-l", selector, "-o", "name")
    assert code == 0, err
    assert out.splitlines() == [f"gpujob.gputwin.io/{n}" for n in names]
    if not names:
        assert err.strip() == "No resources found in default namespace."


EXPECTED = "expected key=value, key!=value, key or !key"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-l", "a=b=c"], "error: -l: unable to parse requirement 'a=b=c': expected key=value, key!=value, key or !key"),
        (["-l", "=x"], "error: -l: unable to parse requirement '=x': expected key=value, key!=value, key or !key"),
        (["llm-finetune", "-l", "team"], "error: name objects or select them with -l, not both"),
        (["-l", "a" * 20_000], "error: -l: longer than 10000 characters"),
        (["-l", "a" * 400 + "!"], f"error: -l: unable to parse requirement '{'a' * 80}...': {EXPECTED}"),
        (["-l", "a\tb"], f"error: -l: unable to parse requirement 'a\\tb': {EXPECTED}"),
    ],
    ids=["two-equals", "no-key", "names-and-selector", "too-long", "long-key", "control-character"],
)  # fmt: skip
def test_a_bad_selector_is_one_line_and_exit_1(state: Path, args: list[str], message: str) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    code, out, err = gputwin(state, "get", "gpujobs", *args)
    assert (code, out, err.strip()) == (1, "", message)


def test_get_takes_comma_separated_kinds(state: Path) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    code, out, _ = gputwin(state, "get", "gpujobs,gpup", "-o", "name")
    assert code == 0 and out.splitlines() == [
        "gpujob.gputwin.io/bert-serving", "gpujob.gputwin.io/llm-finetune", "gpujob.gputwin.io/resnet50-4gpu",
        "gpupartition.gputwin.io/infer", "gpupartition.gputwin.io/train",
    ]  # fmt: skip
    _, out, _ = gputwin(state, "get", "gpup,gpupartitions")  # one kind named twice: one table, unqualified
    assert rows(out)[0][0] == "NAME" and rows(out)[1][0] == "infer"


WIDE = [
    ("swt", ["NAME", "NODES", "GPUS", "SWITCHES", "AGE", "READY", "PER-TIER", "CROSS-NODE"],
     ["two-leaf", "8", "64", "3", "0s", "True", "0.1", "0.05"]),
    ("gpup", ["NAME", "FREE", "TOTAL", "QUEUE", "POLICY", "AGE", "RUNNING", "NODES", "TOPOLOGY", "TASK-TYPES", "READY"],
     ["infer", "15", "16", "0", "fifo-consolidate", "0s", "1", "2", "two-leaf", "infer,dev", "True"]),
    ("schedulingpolicy", ["NAME", "QUEUE", "PLACEMENT", "DEPLOYED", "AGE", "BACKFILL", "SIZING", "PARTITIONS",
                          "READY"],
     ["fifo-consolidate", "fifo", "consolidate", "Succeeded", "0s", "<none>", "<none>", "infer", "True"]),
    ("gpuj", ["NAME", "PHASE", "PARTITION", "GPUS", "NODES", "START-P50", "AGE", "USER", "SWITCHES", "PREEMPTIONS", "REASON"],
     ["bert-serving", "Running", "infer", "1", "gpu07", "<none>", "0s", "carol", "1", "0", "Started"]),
]  # fmt: skip


@pytest.mark.parametrize(("kind", "header", "first"), WIDE, ids=[w[0] for w in WIDE])
def test_get_wide_adds_columns(state: Path, kind: str, header: list[str], first: list[str]) -> None:
    gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS)
    _, narrow, _ = gputwin(state, "get", kind)
    code, out, _ = gputwin(state, "get", kind, "-o", "wide")
    assert code == 0 and rows(out)[0] == header and rows(out)[1] == first
    assert len(rows(out)[0]) > len(rows(narrow)[0])


def test_apply_run_and_events_print_json_with_o_json(state: Path) -> None:
    """kubectl's `-o json`: apply gives the objects as stored (a List), run one summary object,
    events a List of the events; the same state as the text commands leave."""
    code, out, err = gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS, "--dry-run", "-o", "json")
    assert code == 0, err
    previewed = json.loads(out)
    assert previewed["kind"] == "List" and len(previewed["items"]) > 3
    assert snapshot(state) == {}  # a dry run stores nothing
    code, out, err = gputwin(state, "apply", "-f", CLUSTER, "-f", JOBS, "-o", "json")
    assert code == 0, err
    items = json.loads(out)["items"]
    assert [i["metadata"]["name"] for i in items] == [i["metadata"]["name"] for i in previewed["items"]]
    jobs = {i["metadata"]["name"]: i for i in items if i["kind"] == "GPUJob"}
    assert jobs["resnet50-4gpu"]["status"]["phase"] in ("Queued", "Running")  # reconciled: statuses set
    code, out, err = gputwin(state, "run", "-o", "json")
    assert code == 0, err
    assert json.loads(out) == {"time": "2026-01-01T04:12:00Z", "advancedSeconds": 15120.0, "steps": 3,
                               "gpujobs": {"Succeeded": 3}}  # fmt: skip
    code, out, err = gputwin(state, "events", "--for", "gpujob/resnet50-4gpu", "-o", "json")
    assert code == 0, err
    reasons = [e["reason"] for e in json.loads(out)["items"]]
    assert reasons[0] == "Scheduled" and reasons[-1] == "Completed"
    code, out, _ = gputwin(state, "events", "--for", "gpujob/absent", "-o", "json")
    assert (code, json.loads(out)["items"]) == (0, [])


@pytest.mark.parametrize(
    ("args", "status"),
    [
        (["get", "gpujobs", "--bogus"], 1),
        (["describe", "gpujobs", "--bogus"], 1),
        (["apply", "-f"], 1),  # -f without its value
        (["delete", "--bogus"], 1),
        (["events", "--bogus"], 1),
        (["run", "--bogus"], 2),  # the emulator's own command: gputwin's status
        (["simulate", "--bogus"], 2),
    ],
    ids=["get", "describe", "apply-f-without-value", "delete", "events", "run", "simulate"],
)
def test_usage_errors_exit_as_kubectl_for_the_kubectl_shaped_commands(args: list[str], status: int) -> None:
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == status and "Traceback" not in result.output, result.output
    assert "Error: " in result.stderr
