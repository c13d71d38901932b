"""History -> job_submit.lua tables: from a trace file and from sacct, and jobs obeying them live.

The unit tests need no SLURM; the live ones use the session cluster (tests/slurm/conftest.py) and
put its managed files back at the end, like test_slurm_apply.py.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest
from click.testing import CliRunner
from gputwin.adapters.slurm.render import PRIORITY_MAX
from gputwin.adapters.slurm.tables import history_tables, tables_from_trace
from gputwin.adapters.traces import write_helios_csv
from slurm_testcluster import Cluster  # tests/slurm/ helpers

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import ClusterSpec, JobSpec

ROOT = Path(__file__).resolve().parents[2]
TWO_LEAF = ROOT / "manifests" / "samples" / "two-leaf.yaml"
# infer (2 nodes, 16 GPUs) learns: qssf order and history sizing (its own SchedulingPolicy).
QSSF_HISTORY_POLICY = """\
---
apiVersion: gputwin.io/v1alpha1
kind: SchedulingPolicy
metadata:
  name: qssf-history
spec:
  queue:
    policy: qssf
  placement:
    policy: consolidate
  sizing:
    policy: history
    allowedGPUs: [1, 2, 4, 8]
"""


def _history() -> list[JobSpec]:
    """2-GPU `bert` jobs pile up (16 x 100 s on 16 GPUs: half of them wait 100 s); later 4-GPU
    `gpt` jobs run in 55 s with little waiting, so the sizing rule moves 2-GPU infer jobs to 4."""
    jobs = [JobSpec(f"a{i}", 0.0, 100.0, 2, "infer", user="root", name="bert", seq=i) for i in range(16)]
    jobs += [
        JobSpec(f"b{i}", 1000.0, 55.0, 4, "infer", user="root", name="gpt", seq=16 + i) for i in range(6)
    ]
    jobs.append(JobSpec("c0", 2000.0, 10.0, 1, "nope", user="root", name="x", seq=30))  # no partition
    jobs.append(JobSpec("d0", 2000.0, 10.0, 1, "infer", user="root", name="y", state="FAILED", seq=31))
    return jobs


@pytest.fixture(scope="module")
def learning() -> ClusterSpec:
    base = load_cluster(TWO_LEAF)
    policy = dataclasses.replace(base.partitions[1].policy, queue="qssf", sizing="history",
                                 params={"allowed_gpus": (1, 2, 4, 8)})  # fmt: skip
    parts = (base.partitions[0], dataclasses.replace(base.partitions[1], policy=policy))
    return dataclasses.replace(base, partitions=parts)


@pytest.fixture
def learning_yaml(tmp_path: Path) -> Path:
    text = TWO_LEAF.read_text().replace(
        "  policy: fifo-consolidate\n  priorityTier: 1", "  policy: qssf-history\n  priorityTier: 1"
    )
    path = tmp_path / "learning.yaml"
    path.write_text(text + QSSF_HISTORY_POLICY)
    return path


@pytest.fixture
def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "history.csv"
    with open(path, "w", encoding="utf-8", newline="") as stream:
        write_helios_csv(_history(), stream)
    return path


# --- no SLURM needed ------------------------------------------------------------------------------


def test_tables_from_jobs(learning: ClusterSpec) -> None:
    found = history_tables(learning, _history())
    assert found.tables.gpu_sizes == {("infer", "infer", 2): 4}
    assert found.tables.estimates == {("root", "bert"): 100.0, ("root", "gpt"): 55.0}
    assert found.summary() == {"history_jobs": 24, "history_used": 22, "gpu_sizes": 1, "estimates": 2,
                               "history_skipped": {"no partition serves it": 1, "not finished": 1}}  # fmt: skip


def test_tables_from_trace_file_match(learning: ClusterSpec, trace_file: Path) -> None:
    assert tables_from_trace(learning, trace_file).tables == history_tables(learning, _history()).tables


def test_sacct_jobs_count_for_their_partitions_task_types(learning: ClusterSpec) -> None:
    """sacct's readers put the partition name in task_type: such a job counts for every task type
    its partition serves (here `pool` serves infer and dev)."""
    parts = (learning.partitions[0], dataclasses.replace(learning.partitions[1], name="pool"))
    cluster = dataclasses.replace(learning, partitions=parts)
    jobs = [dataclasses.replace(job, task_type="pool") for job in _history()[:22]]
    found = history_tables(cluster, jobs)
    assert found.used == 44  # 22 jobs x 2 task types
    assert found.tables.gpu_sizes == {("pool", "dev", 2): 4, ("pool", "infer", 2): 4}


def test_no_history_no_tables(learning: ClusterSpec) -> None:
    found = history_tables(learning, [])
    assert found.tables.gpu_sizes == {} and found.tables.estimates == {} and found.used == 0


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--from-sacct"], "--from-sacct needs --start"),
        (["--start", "now-1hours"], "--start is for --from-sacct"),
        (["--from-sacct", "--start", "now-1hours", "--history", "{trace}"], "give one source of history"),
    ],
)
def test_cli_history_option_errors(
    learning_yaml: Path, trace_file: Path, extra: list[str], message: str
) -> None:
    args = ["slurm", "render", "--cluster", str(learning_yaml), *[a.format(trace=trace_file) for a in extra]]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 2 and out.stderr.count("\n") == 1 and message in out.stderr


def test_cli_render_with_history_fills_tables(learning_yaml: Path, trace_file: Path) -> None:
    out = CliRunner().invoke(
        cli, ["slurm", "render", "--cluster", str(learning_yaml), "--history", str(trace_file)]
    )
    assert out.exit_code == 0, out.output
    assert '"gpu_sizes": 1' in out.stderr and '"estimates": 2' in out.stderr
    assert '["bert"] = 100,' in out.stdout and "[2] = 4," in out.stdout


# --- on the live cluster --------------------------------------------------------------------------


def _job_field(cluster: Cluster, job_id: str, key: str) -> str:
    match = re.search(rf"\b{key}=(\S*)", cluster.run("scontrol", "show", "job", job_id).stdout)
    assert match is not None
    return match.group(1)


def test_apply_with_history_rewrites_jobs_live(
    slurm_cluster: Cluster, conf_dir: Path, learning_yaml: Path, trace_file: Path
) -> None:
    out = CliRunner().invoke(
        cli, ["slurm", "apply", "--cluster", str(learning_yaml), "--history", str(trace_file)]
    )
    assert out.exit_code == 0, out.output
    # Held back by --begin so the fields can be read before it runs; cancelled by the fixture.
    bert = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:2", "--job-name=bert", "--begin=now+3600")
    unseen = slurm_cluster.submit(
        "--comment=task:infer", "--gres=gpu:1", "--job-name=new", "--begin=now+3600"
    )
    assert _job_field(slurm_cluster, bert, "TresPerNode") == "gres:gpu:4"  # sized 2 -> 4 by the table
    assert _job_field(slurm_cluster, bert, "Priority") == str(PRIORITY_MAX - 100 * 4)  # qssf: 100 s x 4 GPUs
    assert _job_field(slurm_cluster, unseen, "TresPerNode") == "gres:gpu:1"  # 1 GPU: no evidence, kept
    assert _job_field(slurm_cluster, unseen, "Priority") == str(PRIORITY_MAX - 3600)  # default estimate
    slurm_cluster.run("scancel", bert, unseen)


def test_apply_from_sacct_live(slurm_cluster: Cluster, conf_dir: Path, learning_yaml: Path) -> None:
    """Finished jobs of this session, read back with sacct, become the tables."""
    assert CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(learning_yaml)]).exit_code == 0
    job = slurm_cluster.submit("--comment=task:infer", "--gres=gpu:1", "--job-name=probe")
    slurm_cluster.wait_done([job], 1, timeout=60)
    slurm_cluster.wait_in_history(job, "probe")
    # --end a minute ahead: sacct's --state filter leaves out a job that ended in the very second "now" names.
    args = ["slurm", "apply", "--cluster", str(learning_yaml), "--from-sacct", "--start", "now-1hours",
            "--end", "now+1minutes"]  # fmt: skip
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    summary = re.search(r"history: (\{.*\})", out.stderr)
    assert summary is not None and '"history_used": 0' not in summary.group(1)
    lua = (conf_dir / "job_submit.lua").read_text()
    estimates = lua[lua.index("local ESTIMATES") : lua.index("local DEFAULT_ESTIMATE")]
    assert re.search(r'\["root"\] = \{[^}]*\["probe"\] = \d+,', estimates), (summary.group(1), estimates)
