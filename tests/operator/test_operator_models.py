"""A SchedulingPolicy naming a learned model: the controller (operator and emulator) loads it from
the admin's model folder and QSSF orders by its predictions; any problem blocks the cluster with
a one-line reason. Model: tests/saved_models.py (a synthetic history where the user sets the run time)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from saved_models import write_model
from test_operator_controller import T0, TWO_LEAF, drive, job, manifests, ready, setup, status, with_change

from gputwin.core.model import JobSpec
from gputwin.estimators.online import LearnedEstimator
from gputwin.estimators.saved import read


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("models")
    write_model(base / "philly")
    return base


def learned_cluster(model: str = "philly", **estimator: Any) -> list[dict[str, Any]]:
    """two-leaf with the infer partition's policy on QSSF with the learned estimator `model`."""
    return with_change(manifests(TWO_LEAF), "SchedulingPolicy", "fifo-consolidate", queue={"policy": "qssf"},
                       estimator={"type": "learned", "model": model, **estimator})  # fmt: skip


def start_order(models: Path | None, cluster: list[dict[str, Any]], long: str, short: str) -> list[str]:
    """infer (16 GPUs, 8 per job) held by two 8-GPU jobs, then a job of `long`, then one of `short`:
    when the first holder ends, one slot frees and QSSF picks who starts."""
    store, backend, controller = setup(job("blocker", 8, 100), job("filler", 8, 1000), cluster=cluster)
    controller.models = models
    controller.reconcile(T0)
    store.put(job("a-long", 8, 50, user=long, jobName="x"))
    store.put(job("b-short", 8, 50, user=short, jobName="x"))
    controller.reconcile(T0 + 1)
    drive(controller)
    return [s.split("/", 1)[1] for s in backend.starts]


def test_qssf_orders_by_the_named_model(models: Path) -> None:
    long, short = "slow", "fast"
    assert start_order(models, learned_cluster(), long, short) == ["blocker", "filler", "b-short", "a-long"]
    # The same jobs under history: nothing has finished, both get the prior, submit order holds.
    history = with_change(
        manifests(TWO_LEAF), "SchedulingPolicy", "fifo-consolidate", queue={"policy": "qssf"}
    )
    assert start_order(models, history, long, short) == ["blocker", "filler", "a-long", "b-short"]


def test_the_scheduler_estimator_starts_from_the_saved_booster(models: Path) -> None:
    _, _, controller = setup(cluster=learned_cluster())
    controller.models = models
    controller.reconcile(T0)
    assert controller.scheduler is not None
    estimator = controller.scheduler.estimator
    assert isinstance(estimator, LearnedEstimator) and estimator.fits == 0
    saved = read(models / "philly")
    probe = JobSpec("p", T0, 0.0, 8, "infer", "fast", "x")
    assert estimator.predict(probe) == pytest.approx(saved.estimator().predict(probe))


@pytest.mark.parametrize(
    ("model", "base", "reason"),
    [
        pytest.param(
            "philly", None, "learned models are off: the setting GPUTWIN_MODEL_DIR", id="no-model-dir"
        ),
        pytest.param("absent", "models", "no model 'absent' in GPUTWIN_MODEL_DIR", id="unknown-model"),
    ],
)
def test_an_unusable_model_blocks_the_cluster_with_a_reason(models: Path, model: str, base: str | None,
                                                             reason: str) -> None:  # fmt: skip
    store, backend, controller = setup(job("j", 8, 10), cluster=learned_cluster(model))
    controller.models = models if base else None
    controller.reconcile(T0)
    assert controller.scheduler is None and backend.starts == []
    assert controller.view is not None
    assert controller.view.blocker.startswith("SchedulingPolicy/fifo-consolidate: spec.estimator.model: ")
    assert reason in controller.view.blocker
    held = next(c for c in status(store, "GPUJob", "j")["conditions"] if c["type"] == "Scheduled")
    assert reason in held["message"]
    # The admin fixes the setting: the next pass installs the scheduler, nothing else changed.
    controller.models = models
    if model == "absent":
        write_model(models / "absent")
    controller.reconcile(T0 + 1)
    assert controller.scheduler is not None and backend.starts == ["default/j"]


def test_the_emulator_reads_the_model_folder_setting(tmp_path: Path, models: Path) -> None:
    """`gputwin apply` / `run` (the embedded emulator) take GPUTWIN_MODEL_DIR as the operator does."""
    import yaml
    from click.testing import CliRunner

    from gputwin.cli.main import cli

    docs = [
        *learned_cluster(),
        job("a", 8, 50, user="slow", jobName="x"),
        job("b", 8, 50, user="fast", jobName="x"),
    ]
    path = tmp_path / "cluster.yaml"
    path.write_text(yaml.safe_dump_all(docs))
    off = CliRunner(env={"GPUTWIN_MODEL_DIR": ""})
    assert off.invoke(cli, ["apply", "-f", str(path), "--state", str(tmp_path / "off")]).exit_code == 0
    shown = off.invoke(cli, ["get", "gpujobs", "a", "--state", str(tmp_path / "off"), "-o", "json"])
    assert "learned models are off: the setting GPUTWIN_MODEL_DIR" in shown.stdout, shown.stdout
    on = CliRunner(env={"GPUTWIN_MODEL_DIR": str(models)})
    assert on.invoke(cli, ["apply", "-f", str(path), "--state", str(tmp_path / "on")]).exit_code == 0
    ran = on.invoke(cli, ["run", "--state", str(tmp_path / "on")])
    assert ran.exit_code == 0 and "GPUJobs 2 succeeded" in ran.stdout, ran.output
    bad = CliRunner(env={"GPUTWIN_MODEL_DIR": str(path)}).invoke(
        cli, ["run", "--state", str(tmp_path / "on")]
    )
    assert bad.exit_code == 2 and bad.stderr.startswith("error: GPUTWIN_MODEL_DIR="), bad.stderr


def test_a_model_made_unusable_while_running_keeps_the_last_valid_scheduler_and_says_so(models: Path) -> None:
    """The admin edits the policy to name a model the folder lacks: nothing half-applied. The running
    scheduler (the learned one) stays, new jobs still start, and the policy's Ready says why."""
    store, backend, controller = setup(job("first", 8, 10), cluster=learned_cluster())
    controller.models = models
    controller.reconcile(T0)
    running = controller.scheduler
    assert running is not None and backend.starts == ["default/first"]
    edited = next(d for d in learned_cluster("never-saved") if d["kind"] == "SchedulingPolicy"
                  and d["metadata"]["name"] == "fifo-consolidate")  # fmt: skip
    store.put(edited)
    store.put(job("second", 8, 10))
    controller.reconcile(T0 + 1)
    assert controller.scheduler is running and backend.starts == ["default/first", "default/second"]
    held = ready(store, "SchedulingPolicy", "fifo-consolidate")
    assert (held["status"], held["reason"]) == ("False", "ModelUnusable"), held
    assert held["message"].startswith("spec.estimator.model: no model 'never-saved' in GPUTWIN_MODEL_DIR"), held
