"""Hostile corpus, outputs: `simulate`, `compare`, `tune --out` and `sweep-task` against folders that
cannot take them, damaged resume state and writes that fail half-way; and GPUJobs that pass the
schema but cannot run in the emulator.

Each output case starts from a copy of a real previous output (made once per module), damages it
or the run, and asserts either exit status 2 with one `error: ` line naming the file, or the
correct recovery; and, where the previous output must survive, that it is byte for byte what it
was, with nothing left beside it. Read-only folders mean nothing to root: as root, those runs
give up the capabilities that override mode bits for their duration (`unprivileged`,
tests/privileges.py).
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from gputwin.adapters.emulator import FileStore
from gputwin.api.resources import demo_cluster_path, demo_trace_path
from gputwin.cli.main import cli
from gputwin.core.bounds import MAX_DURATION_SECONDS

from privileges import mode_bits_bind  # tests/privileges.py

COMPARE_GRID = ("--policies", "fifo", "--placements", "consolidate,first-fit", "--jobs", "1", "--quiet")
TUNE_RUN = ("--budget", "2", "--jobs", "1", "--quiet")
INPUTS = ("--trace", str(demo_trace_path()), "--cluster", str(demo_cluster_path()))
ARGS = {"simulate": INPUTS, "compare": (*INPUTS, *COMPARE_GRID), "tune": (*INPUTS, *TUNE_RUN)}


def open_folder(path: Path) -> Path:
    """A folder under /tmp that nobody may traverse (pytest's tmp_path is root's alone)."""
    path.mkdir(parents=True, exist_ok=True)
    path.chmod(0o777)
    return path


def remove(path: Path) -> None:
    for folder, dirs, _ in os.walk(path):
        for name in dirs:
            Path(folder, name).chmod(0o755)  # read-only folders of a case, for a non-root rmtree
    shutil.rmtree(path)


def snapshot(folder: Path) -> dict[str, bytes | None]:
    """Every entry under `folder` (None for folders) and each file's bytes; {} if it is absent."""
    if not folder.exists():
        return {}
    if folder.is_file():
        return {".": folder.read_bytes()}
    out: dict[str, bytes | None] = {}
    for path in sorted(folder.rglob("*")):
        out[str(path.relative_to(folder))] = None if path.is_dir() else path.read_bytes()
    return out


def run(command: str, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, [command, *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture(scope="module")
def previous() -> Iterator[dict[str, Path]]:
    """A real previous --out of each command (compare with its plots and index.html)."""
    base = open_folder(Path(tempfile.mkdtemp(prefix="gputwin-hostile-prev-")))
    made = {}
    for command in ARGS:
        out = base / command
        code, _, stderr = run(command, *ARGS[command], "--out", str(out))
        assert code == 0, stderr
        made[command] = out
    assert (made["compare"] / "index.html").is_file() and list(made["compare"].glob("*.png"))
    yield made
    remove(base)


# --- damage done to a copy of the previous output before the run -----------------------------


def read_only(out: Path) -> None:
    out.chmod(0o555)


def folder_named(name: str) -> Callable[[Path], None]:
    def damage(out: Path) -> None:
        (out / name).unlink()
        (out / name).mkdir()

    return damage


def a_file_instead(out: Path) -> None:
    shutil.rmtree(out)
    out.write_text("not a folder\n")


def foreign_file(out: Path) -> None:
    (out / "notes.txt").write_text("mine\n")


def truncated(name: str) -> Callable[[Path], None]:
    def damage(out: Path) -> None:
        data = (out / name).read_bytes()
        (out / name).write_bytes(data[: len(data) // 2])

    return damage


def garbage(name: str) -> Callable[[Path], None]:
    def damage(out: Path) -> None:
        (out / name).write_bytes(b"\x00not a database\xff" * 64)

    return damage


def json_of(name: str, text: str) -> Callable[[Path], None]:
    def damage(out: Path) -> None:
        (out / name).write_text(text)

    return damage


def result_missing_and_results_read_only(out: Path) -> None:
    out.chmod(0o777)  # the folder itself may be written (without root's overrides too): only its results may not
    (out / "sweep" / "results" / "1.json").unlink()
    (out / "sweep" / "results").chmod(0o555)


def sweep_a_file(out: Path) -> None:
    shutil.rmtree(out / "sweep")
    (out / "sweep").write_text("mine\n")


def study_db_read_only(out: Path) -> None:
    out.chmod(0o777)  # the folder may be written (without root's overrides too): only the study may not
    (out / "study.db").chmod(0o444)


def absent(out: Path) -> None:
    shutil.rmtree(out)


# --- failures injected into the writers -------------------------------------------------------


def mock_writer_fails_half_way(exc: BaseException) -> Callable[[Path, Any], None]:
    """A mock writer: writes half of something to `path`, then fails like a full disk (or Ctrl-C)."""

    def write(path: Path, *_: Any) -> None:
        path.write_text('{"half": ')
        if isinstance(exc, OSError):
            raise OSError(exc.errno, exc.strerror, str(path))
        raise exc

    return write


def mock_tune_writer_fails_on(name: str) -> Callable[[Path, str], None]:
    def write(path: Path, text: str) -> None:
        if path.name == name:
            mock_writer_fails_half_way(OSError(errno.ENOSPC, "No space left on device"))(path)
        path.write_text(text)

    return write


def mock_index_html_fails(*_: Any) -> str:
    """A mock of the index page's writer, failing after the PNGs are written."""
    raise OSError(errno.ENOSPC, "No space left on device")


FULL_DISK = OSError(errno.ENOSPC, "No space left on device")
SUMMARY = "gputwin.sim.report.write_summary"
PATCHES: dict[str, tuple[str, Callable[..., Any]]] = {
    "mock_summary_writer_full_disk": (SUMMARY, mock_writer_fails_half_way(FULL_DISK)),
    "mock_summary_writer_ctrl_c": (SUMMARY, mock_writer_fails_half_way(KeyboardInterrupt())),
    "mock_index_html_full_disk": ("gputwin.sim.plots._html", mock_index_html_fails),
    "mock_tune_json_full_disk": ("gputwin.cli.tune.write_text", mock_tune_writer_fails_on("tune.json")),
}  # fmt: skip


@dataclass(frozen=True)
class Case:
    command: str
    damage: Callable[[Path], None] | None = None  # done to the copy of the previous output
    patch: str | None = None  # a key of PATCHES
    code: int = 2
    names: str | None = ""  # what the one error line names, relative to DIR ("" is DIR); None: no error
    says: str = ""  # and what it says is wrong
    intact: bool = True  # the (damaged) previous output is byte for byte as it was
    check: Callable[[Path, str], None] | None = None  # what a recovery must have done
    sweep_task: bool = False  # run `sweep-task DIR/sweep 0` instead of the command
    unprivileged: bool = False


def resumed_with_result_again(out: Path, stderr: str) -> None:
    bad = out / "sweep" / "results" / "0.json"
    assert f"warning: {bad}: not valid JSON; running that candidate again" in stderr
    assert json.loads(bad.read_text())["candidate"]["queue"] == "fifo"
    assert (out / "index.html").is_file() and json.loads((out / "summary.json").read_text())["candidates"]


def started_over(out: Path, stderr: str) -> None:
    assert json.loads((out / "sweep" / "plan.json").read_text())["version"] == 1
    assert len(list((out / "sweep" / "results").glob("*.json"))) == 2 and (out / "index.html").is_file()


NOT_A_STUDY = "not an optuna study database"
CASES = {
    "simulate-read-only-out": Case("simulate", read_only, says="not writable", unprivileged=True),
    "compare-read-only-out": Case("compare", read_only, says="not writable", unprivileged=True),
    "tune-read-only-out": Case("tune", read_only, says="not writable", unprivileged=True),
    "simulate-summary-json-is-a-folder": Case("simulate", folder_named("summary.json"), names="summary.json"),
    "compare-summary-json-is-a-folder": Case("compare", folder_named("summary.json"), names="summary.json"),
    "tune-tune-json-is-a-folder": Case("tune", folder_named("tune.json"), names="tune.json"),
    "simulate-out-is-a-file": Case("simulate", a_file_instead, says="not a folder"),
    "compare-out-is-a-file": Case("compare", a_file_instead, says="not a folder"),
    "tune-out-is-a-file": Case("tune", a_file_instead, says="not a folder"),
    "simulate-out-holds-other-files": Case("simulate", foreign_file, names="notes.txt"),
    "compare-out-holds-other-files": Case("compare", foreign_file, names="notes.txt"),
    "compare-read-only-sweep-results": Case("compare", result_missing_and_results_read_only,
                                            names="sweep/results/1.json", unprivileged=True),  # fmt: skip
    "compare-corrupted-result-json-runs-it-again": Case(
        "compare", truncated("sweep/results/0.json"), code=0, names=None, intact=False,
        check=resumed_with_result_again),  # fmt: skip
    "compare-truncated-plan-json-starts-over": Case(
        "compare", truncated("sweep/plan.json"), code=0, names=None, intact=False, check=started_over
    ),
    "sweep-task-truncated-plan-json": Case("compare", truncated("sweep/plan.json"), names="sweep/plan.json",
                                           sweep_task=True),  # fmt: skip
    "sweep-task-plan-json-not-an-object": Case("compare", json_of("sweep/plan.json", "[1, 2]"),
                                               names="sweep/plan.json", sweep_task=True),  # fmt: skip
    "sweep-task-plan-json-missing-candidates": Case(
        "compare", json_of("sweep/plan.json", '{"version": 1, "trace": "t"}'), names="sweep/plan.json",
        sweep_task=True),  # fmt: skip
    "tune-corrupted-study-db": Case("tune", garbage("study.db"), names="study.db", says=NOT_A_STUDY),
    "tune-truncated-study-db": Case("tune", truncated("study.db"), names="study.db", says=NOT_A_STUDY),
    "tune-study-db-is-a-folder": Case("tune", folder_named("study.db"), names="study.db"),
    "tune-study-db-read-only": Case("tune", study_db_read_only, names="study.db", says="cannot write",
                                    unprivileged=True),
    "compare-sweep-is-a-file": Case("compare", sweep_a_file, names="sweep", says="not a folder"),
    "simulate-mock-writer-interrupted-by-full-disk": Case(
        "simulate", patch="mock_summary_writer_full_disk", names="summary.json",
        says="no space left"),  # fmt: skip
    "simulate-mock-writer-interrupted-by-ctrl-c": Case(
        "simulate", patch="mock_summary_writer_ctrl_c", code=1, names=None),  # fmt: skip
    "simulate-new-out-mock-writer-interrupted-leaves-nothing": Case(
        "simulate", absent, patch="mock_summary_writer_full_disk", names="summary.json",
        says="no space left"),  # fmt: skip
    "compare-mock-index-writer-fails-no-pngs-without-index-html": Case(
        "compare", patch="mock_index_html_full_disk"),  # fmt: skip
    "tune-mock-writer-interrupted-writing-tune-json": Case(
        "tune", patch="mock_tune_json_full_disk", names="tune.json"),  # fmt: skip
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_outputs_are_all_or_nothing(case: Case, previous: dict[str, Path],
                                    monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    base = open_folder(Path(tempfile.mkdtemp(prefix="gputwin-hostile-")))
    try:
        out = base / "out"
        shutil.copytree(previous[case.command], out)
        if case.damage is not None:
            case.damage(out)
        before = snapshot(out)
        if case.patch is not None:
            monkeypatch.setattr(*PATCHES[case.patch])
        argv = ["sweep-task", str(out / "sweep"), "0"] if case.sweep_task else \
            [case.command, *ARGS[case.command], "--out", str(out)]  # fmt: skip
        with mode_bits_bind() if case.unprivileged else nullcontext():
            result = CliRunner().invoke(cli, argv)
        code, stderr = result.exit_code, result.stderr
        assert code == case.code, (result.stdout, stderr, result.exception)
        assert "Traceback" not in stderr and not isinstance(result.exception, (AssertionError, TypeError))
        if case.names is not None:
            lines = stderr.splitlines()
            assert len(lines) == 1 and lines[0].startswith("error: "), stderr
            named = str(out / case.names) if case.names else str(out)
            assert lines[0].startswith(f"error: {named}: ") and case.says in lines[0], stderr
        if case.intact:
            assert snapshot(out) == before
        assert [p.name for p in base.iterdir()] == (["out"] if before or out.exists() else [])  # no leftovers
        if case.check is not None:
            case.check(out, stderr)
    finally:
        remove(base)


def test_a_new_output_replaces_the_previous_one_whole(previous: dict[str, Path]) -> None:
    """A second compare without plots leaves no PNG of the first: the report is one run's."""
    base = open_folder(Path(tempfile.mkdtemp(prefix="gputwin-hostile-")))
    try:
        out = base / "out"
        shutil.copytree(previous["compare"], out)
        kept = snapshot(out / "sweep")
        code, _, stderr = run("compare", *ARGS["compare"], "--no-plots", "--out", str(out))
        assert code == 0, stderr
        assert sorted(p.name for p in out.iterdir()) == ["summary.csv", "summary.json", "sweep"]
        assert snapshot(out / "sweep") == kept  # resumed: every result was there
        assert [p.name for p in base.iterdir()] == ["out"]
    finally:
        remove(base)


# --- GPUJobs that pass the schema but cannot run ------------------------------------------------

SAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "samples"


def gpujob(name: str, **spec: Any) -> str:
    """The manifest as YAML (a JSON 1e+308 is a string to YAML 1.1, refused by the schema)."""
    body = {"taskType": "train", "gpus": 1, "user": "x", **spec}
    return yaml.safe_dump({"apiVersion": "gputwin.io/v1alpha1", "kind": "GPUJob",
                           "metadata": {"name": name, "namespace": "default"}, "spec": body})  # fmt: skip


DURATION = ("Complete", "InvalidDuration", "spec.durationSeconds: ")
UNSCHEDULABLE = ("Scheduled", "Unschedulable", "")
INVALID = ("Scheduled", "Invalid", "spec.")
# spec -> the bad job's phase, its condition (type, reason, how the message starts) when it did not
# run, and the field `apply` refuses when the schema bounds it. Such a job is stored as it is (an older
# gputwin's state folder, a cluster whose CRD predates the bound): it must still wedge nothing.
RUN_TIME = {
    "duration-1e13-s": ({"durationSeconds": 10_000_000_000_000}, "Rejected", INVALID, "spec.durationSeconds"),
    "duration-1e308-s": ({"durationSeconds": 1e308}, "Rejected", INVALID, "spec.durationSeconds"),
    "duration-ending-in-year-10000": ({"durationSeconds": 251_700_000_000}, "Rejected", INVALID,
                                      "spec.durationSeconds"),  # fmt: skip
    "priority-of-30-digits": ({"priority": 10**30, "durationSeconds": 30}, "Rejected", INVALID, "spec.priority"),
    "duration-of-the-bound": ({"durationSeconds": MAX_DURATION_SECONDS}, "Succeeded", None, None),
    "pod-template-the-sim-backend-ignores": ({"podTemplate": {"spec": {"containers": 5}}}, "Succeeded", None, None),
    "task-type-no-partition-serves": ({"taskType": "nothere"}, "Rejected", UNSCHEDULABLE, None),
    "more-gpus-than-the-cluster": ({"gpus": 4096}, "Rejected", UNSCHEDULABLE, None),
}


@pytest.mark.parametrize(("spec", "phase", "why", "refused"), RUN_TIME.values(), ids=RUN_TIME.keys())
def test_a_gpujob_that_fails_at_run_time_wedges_nothing(
    tmp_path: Path, spec: dict[str, Any], phase: str, why: tuple[str, str, str] | None, refused: str | None
) -> None:
    state = str(tmp_path / "state")
    (tmp_path / "bad.yaml").write_text(gpujob("bad", **spec))
    (tmp_path / "good.yaml").write_text(gpujob("good", durationSeconds=60))
    bad, good = str(tmp_path / "bad.yaml"), str(tmp_path / "good.yaml")
    steps = [["apply", "-f", str(SAMPLES / "two-leaf.yaml"), "-f", str(SAMPLES / "policies.yaml")],
             ["apply", "-f", bad], ["run"], ["apply", "-f", good], ["run"], ["run", "--until", "1e300"],
             ["get", "gpujobs"]]  # fmt: skip
    for argv in steps:
        if argv == ["apply", "-f", bad] and refused is not None:
            said = CliRunner().invoke(cli, [*argv, "--state", state])
            assert said.exit_code == 1 and f": {refused}: " in said.stderr, said.output
            with FileStore(Path(state)).lock() as store:
                store.put(yaml.safe_load(gpujob("bad", **spec)))
            continue
        result = CliRunner().invoke(cli, [*argv, "--state", state])
        assert result.exit_code == 0 and not result.stderr, (argv, result.output, result.exception)
    jobs = {o["metadata"]["name"]: o["status"] for o in FileStore(Path(state)).list("GPUJob")}
    assert jobs["good"]["phase"] == "Succeeded"
    assert jobs["bad"]["phase"] == phase
    if why is not None:
        kind, reason, message = why
        said = next(c for c in jobs["bad"]["conditions"] if c["type"] == kind)
        assert said["status"] == "False" and said["reason"] == reason and said["message"].startswith(message)
