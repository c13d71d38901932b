"""`gputwin slurm render --model`: job_submit.lua's estimate table from a saved learned model.

The table holds the model's predictions (`SavedModel.table`: each (user, job name)'s latest job,
described with the whole history observed), not the running mean; a SchedulingPolicy naming the
model (`estimator: {type: learned, model: NAME}`) picks the same table from `$GPUTWIN_MODEL_DIR`.
Model and history: tests/saved_models.py (synthetic; `slow` users run ~10,000 s, `fast` ~10 s).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner
from saved_models import history, write_model, write_trace

from gputwin.cli.main import cli
from gputwin.estimators.saved import read

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
ENTRY = re.compile(r'\["(?P<user>[^"]+)"\] = \{\n    \["(?P<name>[^"]+)"\] = (?P<seconds>\d+),')


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("learned")
    return write_model(base / "models" / "synthetic"), write_trace(base / "history.csv")


def estimates(*args: str, env: dict[str, str] | None = None) -> dict[tuple[str, str], int]:
    result = CliRunner(env=env).invoke(cli, ["slurm", "render", *args])
    assert result.exit_code == 0, result.stderr
    lua = result.stdout.split("local ESTIMATES = ", 1)[1].split("\nlocal DEFAULT_ESTIMATE", 1)[0]
    return {(m["user"], m["name"]): int(m["seconds"]) for m in ENTRY.finditer(lua)}


def test_the_estimate_table_holds_the_models_predictions(files: tuple[Path, Path]) -> None:
    model, trace = files
    learned = estimates("--cluster", str(TWO_LEAF), "--history", str(trace), "--model", str(model))
    expected = read(model).table([j for j in history()], 0.0)
    assert learned == {key: round(value) for key, value in expected.items()}
    assert set(learned) == {("fast", "fast-job"), ("slow", "slow-job")}
    mean = estimates("--cluster", str(TWO_LEAF), "--history", str(trace))
    assert set(mean) == set(learned) and mean != learned  # the running mean is another table
    assert learned[("fast", "fast-job")] < 100 and learned[("slow", "slow-job")] > 5000


def test_a_policy_naming_the_model_picks_it_from_the_model_folder(
    tmp_path: Path, files: tuple[Path, Path]
) -> None:
    model, trace = files
    docs = [d for d in yaml.safe_load_all(TWO_LEAF.read_text()) if d]
    for doc in docs:
        if doc["metadata"]["name"] == "fifo-consolidate":
            doc["spec"].update(queue={"policy": "qssf"}, estimator={"type": "learned", "model": model.name})
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(yaml.safe_dump_all(docs))
    named = estimates(
        "--cluster", str(cluster), "--history", str(trace), env={"GPUTWIN_MODEL_DIR": str(model.parent)}
    )
    given = estimates("--cluster", str(TWO_LEAF), "--history", str(trace), "--model", str(model))
    assert named == given


def test_a_model_without_history_is_one_line(files: tuple[Path, Path]) -> None:
    model, _ = files
    result = CliRunner().invoke(cli, ["slurm", "render", "--cluster", str(TWO_LEAF), "--model", str(model)])
    assert result.exit_code == 2
    assert (
        result.stderr == "error: a learned model predicts from job history: give --history or --from-sacct\n"
    )
