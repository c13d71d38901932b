"""Tenancy on the real test cluster: two tenants' accounts, QOS, shares and half-life go live through
`gputwin slurm apply`, a quota holds a job back, typed GRES are granted, a failed apply is undone.

The cluster spec is tests/slurm/data/shared-lab-live.yaml (vision: root, QOS 20 GPUs, shares 2;
speech: daemon, QOS 24, shares 1; half-life one hour). A module fixture removes the accounts and
QOS it created (conf_dir puts the files back), so other modules see the cluster's own accounts.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from unittest.mock import patch

import pytest
from polling import wait_for
from click.testing import CliRunner
from gputwin.adapters.slurm.accounts import SlurmAccountsError, apply_tenancy, default_runner, read_live
from gputwin.adapters.slurm.apply import apply
from gputwin.adapters.slurm.apply_all import apply_everything
from gputwin.adapters.slurm.errors import SlurmCommandError, SlurmInputError
from gputwin.adapters.slurm.render import PARTITIONS, render
from slurm_testcluster import Cluster, managed_snapshot

from gputwin.api.loader import load_cluster
from gputwin.cli.main import cli
from gputwin.core.model import ClusterSpec, QuotaSpec

LAB = Path(__file__).parent / "data" / "shared-lab-live.yaml"
OURS = ("vision", "speech", "audio")  # audio: the tenant the failure tests try to add


def _sacctmgr(cluster: Cluster, *args: str) -> list[list[str]]:
    out = cluster.run("sacctmgr", "-n", "-P", "show", *args).stdout
    return [line.split("|") for line in out.splitlines() if line]


def _remove_ours(cluster: Cluster) -> None:
    for account in OURS:
        cluster.run("sacctmgr", "-i", "delete", "user", "where", f"account={account}", check=False)
        cluster.run("sacctmgr", "-i", "delete", "account", f"name={account}", check=False)
        cluster.run("sacctmgr", "-i", "delete", "qos", f"name={account}.shared", check=False)



@pytest.fixture(scope="module")
def lab(slurm_cluster: Cluster, conf_dir: Path) -> Iterator[Path]:
    """The shared-lab setup applied with the CLI; afterwards our accounts and QOS are removed."""
    _remove_ours(slurm_cluster)
    try:
        done = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(LAB), "--conf-dir", str(conf_dir)])
        assert done.exit_code == 0, done.output
        assert "sacctmgr -i add qos vision.shared GrpTRES=gres/gpu=20" in done.output
        yield conf_dir
    finally:
        slurm_cluster.cancel_submitted()
        _remove_ours(slurm_cluster)


def test_qos_limits_and_shares_live(slurm_cluster: Cluster, lab: Path) -> None:
    qos = {row[0]: row[1] for row in _sacctmgr(slurm_cluster, "qos", "format=Name,GrpTRES")}
    assert qos["vision.shared"] == "gres/gpu=20" and qos["speech.shared"] == "gres/gpu=24"
    rows = _sacctmgr(slurm_cluster, "assoc", "format=Account,User,Partition,Share,QOS,DefaultQOS")
    shares = {r[0]: r[3] for r in rows if r[0] in OURS and not r[1]}  # audio never stays
    assert shares == {"vision": "2", "speech": "1"}
    users = {(r[1], r[0]): (r[2], r[4], r[5]) for r in rows if r[0] in OURS and r[1]}
    assert users == {("root", "vision"): ("shared", "vision.shared", "vision.shared"),
                     ("daemon", "speech"): ("shared", "speech.shared", "speech.shared")}  # fmt: skip


def test_weights_and_half_life_live(slurm_cluster: Cluster, lab: Path) -> None:
    config = slurm_cluster.run("scontrol", "show", "config").stdout
    assert re.search(r"^PriorityWeightFairShare\s*=\s*10000$", config, re.MULTILINE)
    assert re.search(r"^PriorityDecayHalfLife\s*=\s*01:00:00$", config, re.MULTILINE)
    assert re.search(r"^PriorityType\s*=\s*priority/multifactor$", config, re.MULTILINE)
    assert re.search(r"^PriorityFlags\s*=\s*NO_FAIR_TREE$", config, re.MULTILINE)
    rows = slurm_cluster.run("sshare", "-P", "-n", "-A", "vision,speech", "-o", "Account,User,RawShares,NormShares").stdout
    norm = {r[0].strip(): (r[2], float(r[3])) for r in (line.split("|") for line in rows.splitlines()) if not r[1]}
    assert norm["vision"][0] == "2" and norm["speech"][0] == "1"
    assert norm["vision"][1] == pytest.approx(2 * norm["speech"][1], abs=1e-5)  # as the priority plugin sees them


def test_apply_again_runs_no_command(lab: Path) -> None:
    done = CliRunner().invoke(cli, ["slurm", "apply", "--cluster", str(LAB), "--conf-dir", str(lab), "--dry-run"])
    assert done.exit_code == 0, done.output
    assert "0 file(s) would change, 0 sacctmgr command(s)" in done.output


def _reason(cluster: Cluster, job_id: str) -> tuple[str, str]:
    out = cluster.run("squeue", "-h", "-j", job_id, "-o", "%T|%r").stdout.strip()
    state, _, reason = out.partition("|")
    return state, reason


def _wait_state(cluster: Cluster, job_id: str, state: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        have, reason = _reason(cluster, job_id)
        if have == state:
            return reason
        time.sleep(0.3)
    raise AssertionError(f"job {job_id} not {state} within {timeout:g} s: {_reason(cluster, job_id)}")


def test_job_over_its_qos_stays_pending(slurm_cluster: Cluster, lab: Path) -> None:
    # vision may hold 20 GPUs: 16 (typed GRES) run, 8 more would be 24 > 20 while 16 GPUs stay free.
    running = [slurm_cluster.submit("-A", "vision", "-p", "shared", "--gres=gpu:h100:8", command="sleep 60")
               for _ in range(2)]  # fmt: skip
    for job in running:
        _wait_state(slurm_cluster, job, "RUNNING")
    over = slurm_cluster.submit("-A", "vision", "-p", "shared", "--gres=gpu:8", command="sleep 1")
    # Until slurmctld has looked at it (the reason is None at first); a start instead never shows the reason.
    wait_for("the job over its QOS pending for it", lambda: _reason(slurm_cluster, over) == ("PENDING", "QOSGrpGRES")
             or None, timeout=30, interval=0.3, on_timeout=lambda: str(_reason(slurm_cluster, over)))  # fmt: skip
    alloc = slurm_cluster.run("scontrol", "show", "job", running[0]).stdout
    assert "gres/gpu:h100=8" in alloc  # the typed request was granted as such
    slurm_cluster.run("scancel", *running)
    _wait_state(slurm_cluster, over, "RUNNING")  # room under the QOS again


def test_failed_apply_is_undone(slurm_cluster: Cluster, lab: Path) -> None:
    """A third tenant's commands, the last one failing (an injected failure, the runner is real
    otherwise): what the first ones added is deleted again."""
    bigger = _with_audio()
    before = read_live("gputwin")
    calls: list[Sequence[str]] = []

    def failing_last(argv: Sequence[str]) -> str:
        calls.append(argv)
        if list(argv[2:5]) == ["add", "user", "bin"]:
            raise SlurmCommandError("sacctmgr exited with status 1: injected failure")
        return default_runner(argv)

    with pytest.raises(SlurmAccountsError, match="rolled back: 2 sacctmgr command"):
        apply_tenancy(render(bigger).tenancy, "gputwin", runner=failing_last)
    assert read_live("gputwin") == before
    assert any(list(c[2:4]) == ["delete", "qos"] for c in calls)


def _with_audio() -> ClusterSpec:
    spec = load_cluster(LAB)
    part = spec.partitions[0]
    quotas = (*part.quotas, QuotaSpec("audio", 4, ("bin",)))
    return dataclasses.replace(spec, partitions=(dataclasses.replace(part, quotas=quotas),))


def test_files_failing_after_accounts_undo_the_accounts(slurm_cluster: Cluster, lab: Path) -> None:
    """The config half fails after the accounts half went in (a file corrupted between write and
    reconfigure, as a broken renderer would): files restored and the new account deleted again."""
    def corrupt(folder: Path) -> None:
        with open(folder / PARTITIONS, "ab") as handle:
            handle.write(b"PartitionName=evil Nodes=gpu01 NoSuchKey=1\n")

    files, accounts = managed_snapshot(lab), read_live("gputwin")
    with patch("gputwin.adapters.slurm.apply_all.apply", functools.partial(apply, after_write=corrupt)), \
            pytest.raises(SlurmAccountsError, match="rolled back: 3 sacctmgr command"):
        apply_everything(render(_with_audio()), lab)
    assert managed_snapshot(lab) == files and read_live("gputwin") == accounts


def test_undeclared_gpu_model_refused_before_anything(slurm_cluster: Cluster, lab: Path) -> None:
    spec = load_cluster(LAB)
    nodes = tuple(dataclasses.replace(n, model="a100") for n in spec.topology.nodes)
    wrong = dataclasses.replace(spec, topology=dataclasses.replace(spec.topology, nodes=nodes))
    files, accounts = managed_snapshot(lab), read_live("gputwin")
    with pytest.raises(SlurmInputError, match="declared GPU model a100, slurmctld reports Gres=gpu:h100:8"):
        apply_everything(render(wrong), lab)
    assert managed_snapshot(lab) == files and read_live("gputwin") == accounts
