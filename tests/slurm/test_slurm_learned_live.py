"""On the real SLURM test cluster: a SchedulingPolicy naming a learned model gets job_submit.lua's
estimate table from that model, and slurmctld's QSSF priorities follow its predictions.

History: tests/saved_models.py's synthetic one with every job root's (the user the test cluster's
jobs run as), written as the Helios CSV `gputwin slurm history --out` writes sacct's jobs in;
the model is trained on it with `gputwin estimator train`. Needs a running cluster (conftest).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm.render import PRIORITY_MAX
from saved_models import history, write_trace
from slurm_testcluster import Cluster

from gputwin.cli.main import cli
from gputwin.estimators.saved import read

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
QSSF_LEARNED_POLICY = """\
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: qssf-learned
spec:
  queue:
    policy: qssf
  estimator:
    type: learned
    model: root-history
"""


@pytest.fixture
def learned(tmp_path: Path) -> tuple[Path, Path, Path]:
    """(cluster YAML with infer on qssf-learned, the history file, the model folder)."""
    trace = write_trace(tmp_path / "history.csv", user="root")
    models = tmp_path / "models"
    models.mkdir()
    out = CliRunner().invoke(
        cli, ["estimator", "train", "--trace", str(trace), "--out", str(models / "root-history")]
    )
    assert out.exit_code == 0, out.output
    text = TWO_LEAF.read_text().replace("  policy: fifo-consolidate\n  priorityTier: 1",
                                        "  policy: qssf-learned\n  priorityTier: 1")  # fmt: skip
    cluster = tmp_path / "learned.yaml"
    cluster.write_text(text + QSSF_LEARNED_POLICY)
    return cluster, trace, models


def _priority(cluster: Cluster, job_id: str) -> int:
    match = re.search(r"\bPriority=(\d+)", cluster.run("scontrol", "show", "job", job_id).stdout)
    assert match is not None
    return int(match.group(1))


def test_apply_fills_the_estimate_table_from_the_named_model(
    slurm_cluster: Cluster, conf_dir: Path, learned: tuple[Path, Path, Path]
) -> None:
    cluster, trace, models = learned
    out = CliRunner(env={"GPUTWIN_MODEL_DIR": str(models)}).invoke(
        cli, ["slurm", "apply", "--cluster", str(cluster), "--history", str(trace)]
    )
    assert out.exit_code == 0, out.output
    predicted = read(models / "root-history").table(history(user="root"), 0.0)
    slow, fast = round(predicted[("root", "slow-job")]), round(predicted[("root", "fast-job")])
    assert fast * 10 < slow  # the model tells the two names apart
    lua = (conf_dir / "job_submit.lua").read_text()
    assert f'["fast-job"] = {fast},' in lua and f'["slow-job"] = {slow},' in lua
    # Held back by --begin so slurmctld's priorities can be read; cancelled by the fixture.
    jobs = {name: slurm_cluster.submit("--comment=task:infer", "--gres=gpu:2", f"--job-name={name}",
                                       "--begin=now+3600") for name in ("slow-job", "fast-job")}  # fmt: skip
    assert _priority(slurm_cluster, jobs["slow-job"]) == PRIORITY_MAX - slow * 2  # qssf: seconds x GPUs
    assert _priority(slurm_cluster, jobs["fast-job"]) == PRIORITY_MAX - fast * 2
    slurm_cluster.run("scancel", *jobs.values())
    summary = re.search(r"history: (\{.*\})", out.stderr)
    assert summary is not None and json.loads(summary.group(1))["estimates"] == 2
