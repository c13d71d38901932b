"""Hostile TraceReplays and sweep plans: the sandbox of docs/security.md, case by case.

Every TraceReplay case stores an object that passes the schema and fails at run time (its file
outside the allowed folders, through `..` or a symlink, a FIFO, a device, a directory, missing, too
large, or content that must not be quoted), then checks: a Failed status whose condition names the
field and says why in one line, no secret anywhere in the state, statuses or events, and a good
replay applied and run afterwards in the same state still succeeds (nothing wedges).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gputwin.adapters.sweeps import write_plan
from gputwin.adapters.traces import TraceError
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli
from gputwin.operator.backends import SimBackend
from gputwin.operator.config import ConfigError, OperatorConfig, trace_access
from gputwin.operator.controller import Controller
from gputwin.operator.store import MemoryStore
from gputwin.operator.trace_files import MANIFEST_FOLDER, TraceAccess, TraceRefused, locate, opened, redacted
from gputwin.core.model import Candidate

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = ROOT / "manifests" / "samples" / "two-leaf.yaml"
SECRET = "hunter2-SECRET-TOKEN"
HEADER = "job_id,user,vc,gpu_num,submit_time,duration"
GOOD = "".join(demo_trace_path().read_text().splitlines(keepends=True)[:200])
Obj = dict[str, Any]


def gputwin(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    return result.exit_code, result.stdout, result.stderr


def replay(name: str, trace: Obj, annotations: dict[str, str] | None = None) -> Obj:
    meta: Obj = {"name": name, "namespace": "default", **({"annotations": annotations} if annotations else {})}
    return {"apiVersion": "gputwin.io/v1alpha1", "kind": "TraceReplay", "metadata": meta,
            "spec": {"trace": trace, "topology": "two-leaf",
                     "candidates": [{"queue": "sjf", "placement": "consolidate"}]}}  # fmt: skip


def status_of(state: Path, name: str) -> Obj:
    code, out, err = gputwin("get", "tracereplay", name, "-o", "json", "--state", str(state))
    assert code == 0, err
    return dict(json.loads(out)["status"])


def everything(state: Path) -> str:
    """The state directory's files, `get -o json` of every kind and the events: where a leak would show."""
    files = "".join(p.read_text(errors="replace") for p in sorted(state.rglob("*")) if p.is_file())
    listed = gputwin("get", "gputwin", "-A", "-o", "json", "--state", str(state))[1]
    return files + listed + gputwin("events", "--state", str(state))[1]


def the_good_replay_still_works(state: Path, folder: Path, env: dict[str, str] | None = None) -> None:
    (folder / "good.csv").write_text(GOOD)
    good = folder / "good.yaml"
    good.write_text(yaml.safe_dump(replay("good", {"file": "good.csv", "format": "helios"})))
    code, _, err = gputwin("apply", "-f", str(good), "--state", str(state), env=env)
    assert code == 0, err
    code, _, err = gputwin("run", "--state", str(state), env=env)
    assert code == 0, err
    assert status_of(state, "good")["phase"] == "Succeeded"


# --- file sources in the emulator: (what spec.trace.file names, how the case folder is set up) ------

Setup = Callable[[Path], str]


def outside_file(folder: Path) -> Path:
    target = folder.parent / "outside.csv"
    target.write_text(GOOD)
    return target


def symlink(target: str | Path) -> Setup:
    def make(folder: Path) -> str:
        (folder / "link.csv").symlink_to(target)
        return "link.csv"

    return make


def fifo(folder: Path) -> str:
    os.mkfifo(folder / "pipe.csv")
    return "pipe.csv"


def written(name: str, text: str) -> Setup:
    def make(folder: Path) -> str:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
        return name

    return make


def loop(folder: Path) -> str:
    (folder / "a.csv").symlink_to(folder / "b.csv")
    (folder / "b.csv").symlink_to(folder / "a.csv")
    return "a.csv"


def subdir(folder: Path) -> str:
    (folder / "traces").mkdir()
    return "traces"


ENVIRON = "".join(f"{k}={SECRET}-{k}\n" for k in ("PATH", "AWS_SECRET_ACCESS_KEY", "KUBE_TOKEN"))
FILE_CASES = [
    # id, setup, format, extra env, status reason, what the message must say
    ("absolute-outside", lambda f: str(outside_file(f)), "helios", {}, "TraceNotAllowed", "resolves outside"),
    ("etc-passwd", lambda f: "/etc/passwd", "auto", {}, "TraceNotAllowed", "resolves outside"),
    ("proc-self-environ", lambda f: "/proc/self/environ", "helios", {}, "TraceNotAllowed", "resolves outside"),
    ("dotdot", lambda f: (outside_file(f), "../outside.csv")[1], "helios", {}, "TraceNotAllowed",
     "resolves outside"),
    ("dotdot-through-subfolder", lambda f: (outside_file(f), subdir(f), "traces/../../outside.csv")[2],
     "helios", {}, "TraceNotAllowed", "resolves outside"),
    ("symlink-out", lambda f: symlink(outside_file(f))(f), "helios", {}, "TraceNotAllowed", "resolves outside"),
    ("symlink-to-dev-zero", symlink("/dev/zero"), "helios", {}, "TraceNotAllowed", "resolves outside"),
    ("symlink-loop", loop, "helios", {}, "TraceNotAllowed", "symlink loop"),
    ("fifo", fifo, "helios", {}, "TraceUnreadable", "not a regular file (a FIFO)"),
    ("dev-zero-in-allowed-base", lambda f: "/dev/zero", "helios", {"GPUTWIN_TRACE_DIR": "/dev"},
     "TraceUnreadable", "not a regular file (a character device)"),
    ("directory", subdir, "helios", {}, "TraceUnreadable", "not a regular file (a directory)"),
    ("missing", lambda f: "missing.csv", "helios", {}, "TraceNotFound", "no such file"),
    ("too-large", written("big.csv", HEADER + "\n" + "1,u,vc,1,0,10\n" * 20_000), "helios",
     {"GPUTWIN_TRACE_MAX_BYTES": "64Ki"}, "TraceTooLarge", "over the cap of 65,536 bytes"),
    ("environ-like-content", written("env.csv", ENVIRON), "helios", {}, "TraceUnreadable",
     "spec.trace.file (env.csv):1: job_id: missing required column"),
    ("environ-like-content-auto", written("env.txt", ENVIRON), "auto", {}, "TraceUnreadable",
     "spec.trace.file (env.txt):1: format: cannot tell the format"),
    ("secret-in-a-value", written("v.csv", f"{HEADER}\n1,u,vc,{SECRET},0,10\n"), "helios", {},
     "TraceUnreadable", "spec.trace.file (v.csv):2: gpu_num: not an integer (the value is not shown)"),
    ("secret-as-duplicate-column", written("d.csv", f"{HEADER},{SECRET},{SECRET}\n1,u,vc,1,0,10,a,b\n"),
     "helios", {}, "TraceUnreadable", "spec.trace.file (d.csv):1: record: duplicate column"),
    ("secret-in-sacct-json", written("j.json", json.dumps({"jobs": [{"job_id": SECRET}]})), "auto", {},
     "TraceUnreadable", "spec.trace.file (j.json): jobs[0].job_id: not an integer (the value is not shown)"),
]  # fmt: skip


@pytest.mark.parametrize(("setup", "fmt", "env", "reason", "says"), [c[1:] for c in FILE_CASES],
                         ids=[c[0] for c in FILE_CASES])  # fmt: skip
def test_a_hostile_file_fails_its_replay_and_nothing_wedges(
    tmp_path: Path, setup: Setup, fmt: str, env: dict[str, str], reason: str, says: str
) -> None:
    folder, state = tmp_path / "case", tmp_path / "state"
    folder.mkdir()
    manifest = folder / "replay.yaml"
    manifest.write_text(yaml.safe_dump(replay("bad", {"file": setup(folder), "format": fmt})))
    code, out, err = gputwin("apply", "-f", str(CLUSTER), "-f", str(manifest), "--state", str(state), env=env)
    assert code == 0, err  # it passes the schema: stored, and failed at run time
    assert "tracereplay.gputwin.io/bad created" in out.splitlines()
    status = status_of(state, "bad")
    condition = status["conditions"][0]
    assert (status["phase"], condition["reason"]) == ("Failed", reason), condition
    message = condition["message"]
    assert message.startswith("spec.trace.file") and "\n" not in message and says in message, message
    assert SECRET not in everything(state)
    the_good_replay_still_works(state, folder, env)


def test_a_fifo_never_blocks_apply_or_run(tmp_path: Path) -> None:
    """In a subprocess with a timeout: a FIFO with no writer would block a plain open() forever."""
    folder, state = tmp_path / "case", tmp_path / "state"
    folder.mkdir()
    manifest = folder / "replay.yaml"
    manifest.write_text(yaml.safe_dump(replay("bad", {"file": fifo(folder), "format": "helios"})))
    command = [sys.executable, "-m", "gputwin"]
    for args in (["apply", "-f", str(CLUSTER), "-f", str(manifest)], ["run"]):
        done = subprocess.run([*command, *args, "--state", str(state)], capture_output=True, text=True,
                              timeout=60, check=False)  # fmt: skip
        assert done.returncode == 0, done.stderr
    assert status_of(state, "bad")["phase"] == "Failed"


def test_a_forged_manifest_folder_annotation_is_replaced_by_apply(tmp_path: Path) -> None:
    folder, state = tmp_path / "case", tmp_path / "state"
    folder.mkdir()
    manifest = folder / "replay.yaml"
    manifest.write_text(yaml.safe_dump(replay("bad", {"file": "/etc/passwd"}, {MANIFEST_FOLDER: "/"})))
    assert gputwin("apply", "-f", str(CLUSTER), "-f", str(manifest), "--state", str(state))[0] == 0
    assert status_of(state, "bad")["conditions"][0]["reason"] == "TraceNotAllowed"
    code, out, _ = gputwin("get", "trr", "bad", "-o", "json", "--state", str(state))
    assert json.loads(out)["metadata"]["annotations"][MANIFEST_FOLDER] == str(folder.resolve())


def test_the_sample_replay_works_from_any_working_directory(tmp_path: Path, monkeypatch: Any) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = gputwin("apply", "-f", str(ROOT / "manifests" / "samples"), "--state", "st")
    assert code == 0, err
    assert status_of(tmp_path / "st", "demo-what-if")["phase"] == "Succeeded"
    assert (ROOT / "manifests/samples/demo-trace.csv").read_bytes() == demo_trace_path().read_bytes()


@pytest.mark.parametrize(("env", "says"), [
    ({"GPUTWIN_TRACE_DIR": "/nonexistent/traces"}, "GPUTWIN_TRACE_DIR='/nonexistent/traces': not a folder"),
    ({"GPUTWIN_TRACE_MAX_BYTES": "lots"}, "GPUTWIN_TRACE_MAX_BYTES='lots': not a size"),
    ({"GPUTWIN_TRACE_MAX_BYTES": "0"}, "GPUTWIN_TRACE_MAX_BYTES='0': not a size"),
], ids=["dir-missing", "max-not-a-number", "max-zero"])  # fmt: skip
def test_a_bad_setting_is_one_line_and_stores_nothing(tmp_path: Path, env: dict[str, str], says: str) -> None:
    state = tmp_path / "state"
    code, out, err = gputwin("apply", "-f", str(CLUSTER), "--state", str(state), env=env)
    assert (code, out, err.strip()) == (1, "", f"error: {says}; want " + err.split("; want ", 1)[-1].strip())
    assert len(err.strip().splitlines()) == 1 and not (state / "objects").exists()
    with pytest.raises(ConfigError, match=says.split("=")[0]):
        OperatorConfig.from_env(env)


@pytest.mark.parametrize("env", [
    {"GPUTWIN_FORECAST_SECONDS": "abc"}, {"GPUTWIN_FORECAST_START_LATENCY": "-1"},
    {"GPUTWIN_MODEL_DIR": "/nonexistent/models"},
], ids=["forecast-period", "start-latency", "model-dir"])  # fmt: skip
def test_a_bad_controller_setting_stores_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    # Read with the trace settings, before the store changes (they used to fail after the objects were stored).
    state = tmp_path / "state"
    code, out, err = gputwin("apply", "-f", str(CLUSTER), "--state", str(state), env=env)
    assert (code, out) == (1, "") and err.startswith(f"error: {next(iter(env))}=") and len(err.strip().splitlines()) == 1
    assert not (state / "objects").exists()


def test_sizes_take_kubernetes_suffixes() -> None:
    assert trace_access({"GPUTWIN_TRACE_MAX_BYTES": "32Mi"}).max_bytes == 32 * 2**20
    assert trace_access({}).base is None  # no file source by default


# --- the operator (a cluster): no base by default, annotations not trusted, ConfigMaps redacted ------


def operator_pass(objs: list[Obj], env: dict[str, str], configmaps: dict[tuple[str, str], dict[str, str]]) -> MemoryStore:
    cluster = [d for d in yaml.safe_load_all(demo_cluster_path().read_text()) if d]
    store = MemoryStore([*cluster, *[dict(o, spec={**o["spec"], "topology": "demo"}) for o in objs]])
    for (namespace, name), data in configmaps.items():
        store.put_configmap(namespace, name, data)
    Controller(store, SimBackend(), traces=OperatorConfig.from_env(env).traces).reconcile(0.0)
    return store


CM = {"configMap": {"name": "traces", "key": "jobs.csv"}}
SECRET_CM = {("default", "traces"): {"jobs.csv": ENVIRON}}
OPERATOR_CASES = [
    # id, trace source, annotations, env, ConfigMaps, reason, message prefix
    ("file-source-off-by-default", {"file": "jobs.csv"}, None, {}, {}, "TraceNotAllowed",
     "spec.trace.file: file sources are off: the operator setting GPUTWIN_TRACE_DIR"),
    ("manifest-folder-annotation-not-trusted", {"file": "/etc/passwd"}, {MANIFEST_FOLDER: "/"}, {}, {},
     "TraceNotAllowed", "spec.trace.file: file sources are off"),
    ("absolute-outside-the-trace-dir", {"file": "/etc/passwd"}, None, {"GPUTWIN_TRACE_DIR": "/usr"}, {},
     "TraceNotAllowed", "spec.trace.file: /etc/passwd: resolves outside GPUTWIN_TRACE_DIR (/usr)"),
    ("proc-self-environ-via-dotdot", {"file": "../proc/self/environ"}, None, {"GPUTWIN_TRACE_DIR": "/usr"}, {},
     "TraceNotAllowed", "spec.trace.file: ../proc/self/environ: resolves outside"),
    ("configmap-with-environ-content", {**CM, "format": "helios"}, None, {}, SECRET_CM, "TraceUnreadable",
     "spec.trace.configMap (traces/jobs.csv):1: job_id: missing required column"),
    ("configmap-with-environ-content-auto", CM, None, {}, SECRET_CM, "TraceUnreadable",
     "spec.trace.configMap (traces/jobs.csv):1: format: cannot tell the format"),
    ("configmap-of-another-namespace-only", CM, None, {}, {("other", "traces"): {"jobs.csv": GOOD}},
     "TraceNotFound", "spec.trace.configMap: ConfigMap default/traces not found"),
    ("configmap-key-missing-keys-not-listed", CM, None, {}, {("default", "traces"): {SECRET: "x"}},
     "TraceNotFound", "spec.trace.configMap: ConfigMap default/traces has no key jobs.csv"),
    ("configmap-namespace-field-refused", {"configMap": {"name": "traces", "key": "jobs.csv", "namespace": "o"}},
     None, {}, {("o", "traces"): {"jobs.csv": GOOD}}, "Invalid", "TraceReplay/bad"),
]  # fmt: skip


@pytest.mark.parametrize(("trace", "annotations", "env", "configmaps", "reason", "says"),
                         [c[1:] for c in OPERATOR_CASES], ids=[c[0] for c in OPERATOR_CASES])  # fmt: skip
def test_a_hostile_replay_in_a_cluster_fails_alone(trace: Obj, annotations: dict[str, str] | None,
        env: dict[str, str], configmaps: dict[tuple[str, str], dict[str, str]], reason: str, says: str) -> None:  # fmt: skip
    good = replay("good", {"configMap": {"name": "good-traces", "key": "jobs.csv"}})
    store = operator_pass([replay("bad", trace, annotations), good],
                          env, {("default", "good-traces"): {"jobs.csv": GOOD}, **configmaps})  # fmt: skip
    bad = store.get("TraceReplay", "default", "bad")
    assert bad is not None
    condition = bad["status"]["conditions"][0]
    assert (bad["status"]["phase"], condition["reason"]) == ("Failed", reason), condition
    assert condition["message"].startswith(says) and "\n" not in condition["message"], condition["message"]
    shown = json.dumps(store.list("TraceReplay")) + json.dumps([e.message for e in store.events])
    assert SECRET not in shown  # not the content, nor (key-missing case) the ConfigMap's key names
    later = store.get("TraceReplay", "default", "good")  # the same pass carried on
    assert later is not None and later["status"]["phase"] == "Succeeded"


REDACTIONS = [
    # id, the reader's error (path, line, field, reason), what a status may say
    ("value", ("/x", 3, "gpu_num", f"not an integer: {SECRET!r}"), "W:3: gpu_num: not an integer (the value is not shown)"),
    ("header-listed", ("/x", 1, "job_id", f"missing required column (header has: {SECRET})"),
     "W:1: job_id: missing required column"),
    ("field-from-the-file", ("/x", 1, SECRET, "duplicate column"), "W:1: record: duplicate column"),
    ("unknown-reason", ("/x", 9, "vc", f"{SECRET} is odd"), "W:9: vc: invalid value (not shown)"),
    ("format-sniffed", ("/x", 1, "format", f"cannot tell the format from {SECRET!r}; expected …"),
     "W:1: format: cannot tell the format; set spec.trace.format"),
    ("field-count", ("/x", 4, "row", "expected 6 fields, got 2"), "W:4: row: expected 6 fields, got 2"),
    ("no-line", ("/x", None, "file", "empty file"), "W: file: empty file"),
    ("json-path", ("/x", None, "jobs[7].tres.allocated", f"not a list: [{SECRET!r}]"),
     "W: jobs[7].tres.allocated: not a list (the value is not shown)"),
]  # fmt: skip


@pytest.mark.parametrize(("error", "shown"), [c[1:] for c in REDACTIONS], ids=[c[0] for c in REDACTIONS])
def test_a_reader_error_is_redacted_to_path_line_field_and_a_reason(error: tuple[Any, ...], shown: str) -> None:
    assert redacted(TraceError(*error), "W") == shown


# --- the descriptor check: a file swapped after the path check is still refused, never blocks -------


@pytest.mark.parametrize(("swap", "reason"), [
    (lambda p: (p.unlink(), os.mkfifo(p)), "TraceUnreadable"),
    (lambda p: (p.unlink(), p.symlink_to(p.parent / "other.csv")), "TraceNotAllowed"),
    (lambda p: p.write_text(GOOD * 20), "TraceTooLarge"),
], ids=["swapped-for-a-fifo", "swapped-for-a-symlink", "grew-over-the-cap"])  # fmt: skip
def test_a_file_swapped_after_the_check_is_refused_on_open(
    tmp_path: Path, swap: Callable[[Path], object], reason: str
) -> None:
    (tmp_path / "other.csv").write_text(GOOD)
    path = tmp_path / "jobs.csv"
    path.write_text(GOOD)
    checked = locate("jobs.csv", TraceAccess(tmp_path.resolve(), max_bytes=len(GOOD) * 2))
    swap(path)
    with pytest.raises(TraceRefused) as caught, opened(checked):
        pass
    assert caught.value.reason == reason


# --- sweep folders never resolve outside themselves -------------------------------------------------


def sweep(tmp_path: Path) -> Path:
    folder = tmp_path / "sweep"
    trace = tmp_path / "jobs.csv"
    trace.write_text(GOOD)
    write_plan(folder, trace, "helios", demo_cluster_path(), candidates=(Candidate("fifo", "first-fit"),))
    (tmp_path / "secret.yaml").write_text(f"{SECRET}: 1\n")
    return folder


def plan_field(field: str, value: object) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        plan = json.loads((folder / "plan.json").read_text())
        plan[field] = value
        (folder / "plan.json").write_text(json.dumps(plan))

    return edit


def symlinked_input(field: str) -> Callable[[Path], None]:
    def edit(folder: Path) -> None:
        (folder / "inputs" / field / "out").symlink_to(folder.parent / "secret.yaml")
        plan_field(field, "out")(folder)

    return edit


def symlink_in_cluster_folder(folder: Path) -> None:
    cluster = folder / "inputs" / "cluster" / "c"
    cluster.mkdir()
    (cluster / "x.yaml").symlink_to(folder.parent / "secret.yaml")
    plan_field("cluster", "c")(folder)


SWEEP_CASES = [
    ("trace-dotdot", plan_field("trace", "../../jobs.csv"), "trace: '../../jobs.csv' is not a file name"),
    ("trace-absolute", plan_field("trace", "/etc/passwd"), "trace: '/etc/passwd' is not a file name"),
    ("trace-is-dotdot", plan_field("trace", ".."), "trace: '..' is not a file name"),
    ("cluster-dotdot", plan_field("cluster", "../../secret.yaml"), "cluster: '../../secret.yaml' is not a"),
    ("cluster-not-a-string", plan_field("cluster", ["x"]), "cluster: want str"),
    ("trace-with-nul", plan_field("trace", "a\0b"), "trace: 'a\\x00b' is not a file name"),
    ("trace-symlink-out", symlinked_input("trace"), "trace: inputs/trace/out resolves outside"),
    ("cluster-symlink-out", symlinked_input("cluster"), "cluster: inputs/cluster/out resolves outside"),
    ("cluster-folder-symlink-out", symlink_in_cluster_folder, "cluster: inputs/cluster/c/x.yaml resolves outside"),
    ("candidates-garbled", plan_field("candidates", [{"queue": "fifo", "evil": 1}]), "candidates[0].placement: missing"),
]  # fmt: skip


@pytest.mark.parametrize(("edit", "says"), [c[1:] for c in SWEEP_CASES], ids=[c[0] for c in SWEEP_CASES])
def test_a_sweep_plan_never_leads_outside_its_folder(
    tmp_path: Path, edit: Callable[[Path], None], says: str
) -> None:
    folder = sweep(tmp_path)
    edit(folder)
    code, out, err = gputwin("sweep-task", str(folder), "0")
    lines = err.strip().splitlines()
    assert (code, out, len(lines)) == (2, "", 1), err
    assert lines[0].startswith(f"error: {folder}/plan.json: ") and says in lines[0], lines[0]
    assert SECRET not in err and "Traceback" not in err
    assert not (folder / "results" / "0.json").exists()


def test_the_deployment_ships_with_file_sources_off() -> None:
    deployment = yaml.safe_load((ROOT / "manifests" / "operator" / "30-deployment.yaml").read_text())
    env = {e["name"]: e["value"] for e in deployment["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert (env["GPUTWIN_TRACE_DIR"], env["GPUTWIN_TRACE_MAX_BYTES"]) == ("", "32Mi")
    traces = OperatorConfig.from_env(env).traces
    assert (traces.base, traces.max_bytes, traces.manifest_folders) == (None, 32 * 2**20, False)


def test_only_the_slurm_command_runner_starts_processes_and_never_through_a_shell() -> None:
    """docs/security.md: what the CLI and operator execute. Every other module reaches SLURM through
    `adapters/slurm/commands.run_command` (an argv list, shell=False, a timeout)."""
    sources = [p for d in ("src/gputwin", "operator", "adapters") for p in (ROOT / d).rglob("*.py")]
    spawn = re.compile(r"^\s*(import|from)\s+(subprocess|pty|multiprocessing\.popen)|\bos\.(system|popen|exec|spawn)", re.M)
    spawning = {str(p.relative_to(ROOT)) for p in sources if spawn.search(p.read_text())}
    assert spawning == {"adapters/slurm/commands.py"}
    runner = (ROOT / "adapters" / "slurm" / "commands.py").read_text()
    assert "shell=False" in runner and "shell=True" not in runner and "list(argv)" in runner
