"""`gputwin estimator train` on the SLURM test cluster's own sacct history (tests/estimators/data/
sacct-testcluster-learn.txt, see its README): read as `sacct -P` output, and a model that tells
the job names apart, as the operator's and SLURM's live tests load it (saved_models.write_sacct_model)."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from saved_models import SACCT_FIXTURE, SACCT_MIN_TRAIN, sacct_train_args, write_sacct_model

from gputwin.adapters.traces import read_trace
from gputwin.cli.estimator import LEARNED_MIN_TRAIN
from gputwin.estimators.online import LearnedConfig
from gputwin.estimators.saved import read

KINDS = ("fast-learn", "mid-learn", "slow-learn")


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_sacct_model(tmp_path_factory.mktemp("sacct") / "model")


def test_the_fixture_reads_as_the_workload_that_ran() -> None:
    trace = read_trace(SACCT_FIXTURE, "sacct")
    assert trace.skipped == {"job steps": 360}  # each job's .batch step, folded into it
    assert Counter((j.name, j.gpus) for j in trace.jobs) == {(k, g): 60 for k in KINDS for g in (1, 2)}
    assert {(j.user, j.task_type, j.state) for j in trace.jobs} == {("root", "batch", "COMPLETED")}
    longest = {k: max(j.duration for j in trace.jobs if j.name == k) for k in KINDS}
    assert longest == {"fast-learn": 4.0, "mid-learn": 11.0, "slow-learn": 29.0}  # sleep + start-up


def test_the_model_trained_on_sacct_predicts_fast_shorter_than_mid_than_slow(model: Path) -> None:
    trace = read_trace(SACCT_FIXTURE, "sacct")
    predicted = read(model).table(trace.jobs, trace.origin)
    fast, mid, slow = (predicted[("root", kind)] for kind in KINDS)
    assert 1 <= fast < 4 and 6 <= mid < 12 and 15 <= slow < 30  # within each name's true run times
    assert fast * 3 < mid and mid * 2 < slow


def test_the_saved_model_says_it_came_from_the_sacct_fixture(model: Path) -> None:
    meta = json.loads((model / "model.json").read_text())
    assert meta["jobs"] == 360 and meta["config"]["min_train"] == SACCT_MIN_TRAIN
    assert meta["trace"] == {"path": str(SACCT_FIXTURE), "format": "sacct", "skipped": {"job steps": 360}}
    assert meta["holdout"]["spearman"] > 0.8  # the last 36 jobs, by a model fitted on those ended before


@pytest.mark.parametrize(
    ("min_train", "fails"),
    [pytest.param(SACCT_MIN_TRAIN, False, id="small-site-minimum"),
     pytest.param(LEARNED_MIN_TRAIN, True, id="default-minimum")],
)  # fmt: skip
def test_the_default_minimum_refuses_a_360_job_history(tmp_path: Path, min_train: int, fails: bool) -> None:
    from click.testing import CliRunner

    from gputwin.cli.main import cli

    args = sacct_train_args(tmp_path / "m")
    args[args.index("--min-train") + 1] = str(min_train)
    done = CliRunner().invoke(cli, args)
    assert (done.exit_code == 2) is fails, done.output
    assert ("training needs at least 2000" in done.output) is fails


def test_the_cli_default_minimum_is_the_learned_config_default() -> None:
    assert LEARNED_MIN_TRAIN == LearnedConfig().min_train
