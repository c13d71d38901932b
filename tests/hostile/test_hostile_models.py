"""Hostile saved models and model names: `gputwin slurm render` refuses each in one line.

A model folder given with `--model` (an admin's path) is checked file by file: corrupt, foreign or
missing files are `error: FILE: FIELD: reason`, exit 2, no traceback. A model a SchedulingPolicy
names is resolved inside `$GPUTWIN_MODEL_DIR` only (gputwin.estimators.modeldir): `..`, absolute
paths, symlinks out of the folder, FIFOs and oversized files are refused before anything is read.
The operator applies the same `locate` (tests/operator/test_operator_models.py covers its blocker).
Model: tests/saved_models.py (synthetic history).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from budget import REFUSAL_CPU_SECONDS, timed
from click.testing import CliRunner
from saved_models import write_model, write_trace
from test_hostile_traces import assert_one_line_error

from gputwin.cli.main import cli
from gputwin.estimators import modeldir

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tmp_path_factory.mktemp("good") / "model")


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_trace(tmp_path_factory.mktemp("trace") / "history.csv")


def render(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, float]:
    result, seconds = timed(lambda: CliRunner(env=env).invoke(cli, ["slurm", "render", *args]))
    return result.exit_code, result.stderr, seconds


def copy_model(good: Path, folder: Path) -> Path:
    shutil.copytree(good, folder)
    return folder


def edit_meta(change: Callable[[dict[str, Any]], object]) -> Callable[[Path], None]:
    def apply(folder: Path) -> None:
        meta = json.loads((folder / "model.json").read_text())
        change(meta)
        (folder / "model.json").write_text(json.dumps(meta))

    return apply


def write(name: str, text: str) -> Callable[[Path], None]:
    return lambda folder: (folder / name).write_text(text)


# (how the copied model folder is broken, the file the error names, the FIELD)
MODEL_CASES = [
    pytest.param(write("model.json", "{not json"), "model.json:1", "model.json", id="json-not-json"),
    pytest.param(write("model.json", "[1, 2]"), "model.json", "model.json", id="json-an-array"),
    pytest.param(lambda f: (f / "model.json").write_bytes(b"\xff\xfe{}"), "model.json", "model.json",
                 id="json-not-utf8"),
    pytest.param(edit_meta(lambda m: m.update(format="other/9")), "model.json", "format", id="foreign-format"),
    pytest.param(edit_meta(lambda m: m["features"].reverse()), "model.json", "features", id="other-features"),
    pytest.param(edit_meta(lambda m: m["config"].update(magic=1)), "model.json", "config.magic", id="unknown-setting"),
    pytest.param(edit_meta(lambda m: m["config"].update(rounds="40")), "model.json", "config.rounds", id="string-setting"),
    pytest.param(edit_meta(lambda m: m["config"].update(window=-1)), "model.json", "config.window", id="negative-setting"),
    pytest.param(edit_meta(lambda m: m["config"].update(smear=1)), "model.json", "config.smear", id="int-for-bool"),
    pytest.param(edit_meta(lambda m: m.update(offsets=[0.1])), "model.json", "offsets", id="one-offset"),
    pytest.param(edit_meta(lambda m: m.update(offsets=[0.1, "x"])), "model.json", "offsets", id="text-offset"),
    pytest.param(edit_meta(lambda m: m.update(smear=-2)), "model.json", "smear", id="negative-smear"),
    pytest.param(edit_meta(lambda m: m.update(codes=[[0, "u", 5]])), "model.json", "codes", id="codes-with-a-gap"),
    pytest.param(edit_meta(lambda m: m.update(codes=[[9, "u", 0]])), "model.json", "codes[0]", id="code-of-no-category"),
    pytest.param(edit_meta(lambda m: m.update(codes="all")), "model.json", "codes", id="codes-not-a-list"),
    pytest.param(write("model.txt", "tree\nnot a model\n"), "model.txt", "model.txt", id="txt-garbage"),
    pytest.param(write("model.txt", ""), "model.txt", "model.txt", id="txt-empty"),
    pytest.param(lambda f: (f / "model.txt").unlink(), "model.txt", "missing", id="txt-missing"),
    pytest.param(lambda f: (f / "model.json").unlink(), "model.json", "missing", id="json-missing"),
    pytest.param(lambda f: ((f / "model.json").unlink(), os.mkfifo(f / "model.json")), "model.json",
                 "not a regular file", id="json-a-fifo"),
    pytest.param(lambda f: ((f / "model.txt").rename(f / "real.txt"), (f / "model.txt").symlink_to("real.txt")),
                 "model.txt", "a symlink; want the file itself", id="txt-a-symlink"),
]  # fmt: skip


@pytest.mark.parametrize(("breaks", "file", "field"), MODEL_CASES)
def test_a_broken_model_folder_is_one_line(tmp_path: Path, good: Path, trace: Path, breaks: Callable[[Path], Any],
                                           file: str, field: str) -> None:  # fmt: skip
    folder = copy_model(good, tmp_path / "model")
    breaks(folder)
    status, stderr, seconds = render(
        "--cluster", str(TWO_LEAF), "--history", str(trace), "--model", str(folder)
    )
    if field in (
        "missing",
        "not a regular file",
        "a symlink; want the file itself",
    ):  # the file check's own wording: FILE: reason
        assert status == 2 and stderr == f"error: {folder / file}: {field}\n", stderr
    else:
        assert_one_line_error(status, stderr, str(folder / file), field)
    assert seconds < REFUSAL_CPU_SECONDS


def test_an_oversized_model_file_is_refused_before_it_is_read(tmp_path: Path, good: Path, trace: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    folder = copy_model(good, tmp_path / "model")
    monkeypatch.setattr(modeldir, "MAX_MODEL_BYTES", 100)
    status, stderr, _ = render("--cluster", str(TWO_LEAF), "--history", str(trace), "--model", str(folder))
    assert status == 2 and "bytes, more than 100" in stderr and len(stderr.splitlines()) == 1, stderr


def learned_policy_cluster(tmp_path: Path, model: str) -> Path:
    docs = [d for d in yaml.safe_load_all(TWO_LEAF.read_text()) if d]
    for doc in docs:
        if doc["kind"] == "SchedulingPolicy" and doc["metadata"]["name"] == "fifo-consolidate":
            doc["spec"]["queue"] = {"policy": "qssf"}
            doc["spec"]["estimator"] = {"type": "learned", "model": model}
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    return path


WHERE = "SchedulingPolicy/fifo-consolidate: spec.estimator.model"


def outside_folder(base: Path, good: Path) -> str:
    copy_model(good, base.parent / "outside")
    (base / "evil").symlink_to(base.parent / "outside")
    return "evil"


def outside_file(base: Path, good: Path) -> str:
    folder = copy_model(good, base / "half")
    copy_model(good, base.parent / "elsewhere")
    (folder / "model.txt").unlink()
    (folder / "model.txt").symlink_to(base.parent / "elsewhere" / "model.txt")
    return "half"


# (the model folder's set-up, giving the name the policy uses; what the one line says)
NAME_CASES = [
    pytest.param(lambda base, good: "evil", "no model 'evil' in GPUTWIN_MODEL_DIR", id="unknown-name"),
    pytest.param(outside_folder, "'evil' leads outside GPUTWIN_MODEL_DIR", id="symlinked-folder-out"),
    pytest.param(outside_file, "half/model.txt: leads outside GPUTWIN_MODEL_DIR", id="symlinked-file-out"),
]


@pytest.mark.parametrize(("setup", "reason"), NAME_CASES)
def test_a_policy_model_outside_the_model_folder_is_refused(tmp_path: Path, good: Path, trace: Path,
                                                            setup: Any, reason: str) -> None:  # fmt: skip
    base = tmp_path / "models"
    base.mkdir()
    cluster = learned_policy_cluster(tmp_path, setup(base, good))
    status, stderr, seconds = render("--cluster", str(cluster), "--history", str(trace),
                                     env={"GPUTWIN_MODEL_DIR": str(base)})  # fmt: skip
    assert_one_line_error(status, stderr, str(cluster), WHERE)
    assert reason in stderr and seconds < REFUSAL_CPU_SECONDS


@pytest.mark.parametrize(
    "name",
    ["../outside", "/etc", "a/b", "a..b", "..", ".hidden", "", "x" * 64, "tab\tname"],
    ids=["dot-dot-slash", "absolute", "slash", "inner-dot-dot", "dot-dot", "leading-dot", "empty", "64-chars",
         "tab"],
)  # fmt: skip
def test_a_model_name_that_is_not_a_plain_name_is_refused_by_the_api(
    tmp_path: Path, trace: Path, name: str
) -> None:
    base = tmp_path / "models"
    base.mkdir()
    cluster = learned_policy_cluster(tmp_path, name)
    status, stderr, _ = render(
        "--cluster", str(cluster), "--history", str(trace), env={"GPUTWIN_MODEL_DIR": str(base)}
    )
    assert status == 2 and "Traceback" not in stderr, stderr
    assert stderr.startswith(f"error: {cluster}:") and "spec.estimator.model" in stderr, stderr


def test_no_model_folder_setting_refuses_a_learned_policy(tmp_path: Path, trace: Path) -> None:
    cluster = learned_policy_cluster(tmp_path, "philly")
    status, stderr, _ = render(
        "--cluster", str(cluster), "--history", str(trace), env={"GPUTWIN_MODEL_DIR": ""}
    )
    assert_one_line_error(status, stderr, str(cluster), WHERE)
    assert "learned models are off" in stderr


def test_a_model_folder_setting_that_is_a_file_is_refused(tmp_path: Path, trace: Path) -> None:
    cluster = learned_policy_cluster(tmp_path, "philly")
    status, stderr, _ = render("--cluster", str(cluster), "--history", str(trace),
                               env={"GPUTWIN_MODEL_DIR": str(trace)})  # fmt: skip
    assert status == 2 and stderr.startswith("error: GPUTWIN_MODEL_DIR=") and "not a folder" in stderr, stderr


def test_a_file_swapped_for_a_symlink_after_the_check_is_not_followed(tmp_path: Path, good: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """`check_file` passed, then model.json became a symlink to a file outside: the read refuses it."""
    from gputwin.estimators import saved

    folder = copy_model(good, tmp_path / "model")
    outside = tmp_path / "outside.json"
    outside.write_text((folder / "model.json").read_text())
    real_check = saved.check_file

    def check_then_swap(path: Path, root: Path | None, what: str) -> None:
        real_check(path, root, what)
        if path.name == "model.json":
            path.unlink()
            path.symlink_to(outside)

    monkeypatch.setattr(saved, "check_file", check_then_swap)
    with pytest.raises(saved.SavedModelError, match="model.json: not a regular file"):
        saved.read(folder)
