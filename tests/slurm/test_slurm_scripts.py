"""scripts/slurm/start.sh and stop.sh on a tiny second cluster: idempotent start, complete stop, restart.

Runs beside the session cluster (its own state folder, ports, munged and MariaDB), so it also shows
that two test clusters on one host keep apart.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from slurm_testcluster import SCRIPTS, check_installed, start_cluster, stop_cluster

TINY = ("--nodes", "2", "--gpus", "2", "--leaves", "2")


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # a zombie is gone for our purposes


def _pids(state: Path) -> list[int]:
    return [int(line.split()[1]) for line in (state / "pids").read_text().splitlines() if line.strip()]


@pytest.fixture
def state() -> Iterator[Path]:
    check_installed()
    folder = Path(tempfile.mkdtemp(prefix="gputwin-slurm-tiny-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    stopped = stop_cluster(folder)
    assert stopped.returncode == 0, stopped.stderr
    subprocess.run(["rm", "-rf", str(folder)], check=False)


def _start(state: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPTS / "start.sh"), "--state", str(state), *args],
                          capture_output=True, text=True, timeout=300, check=False)  # fmt: skip


def test_start_is_idempotent_and_stop_ends_everything_it_started(state: Path) -> None:
    start_cluster(state, *TINY)
    pids = _pids(state)
    # munged, mariadbd, slurmdbd, slurmctld, 2 x slurmd, and slurmrestd where it is installed
    assert len(pids) == 4 + 2 + (shutil.which("slurmrestd") is not None)
    again = _start(state, *TINY)
    assert again.returncode == 0 and "already running" in again.stderr
    assert _pids(state) == pids
    stopped = stop_cluster(state)
    assert stopped.returncode == 0, stopped.stderr
    assert [pid for pid in pids if _alive(pid)] == []
    assert (state / "pids").read_text() == ""
    # A restart on the same folder keeps the managed files (gputwin may have rewritten them).
    partitions = state / "etc" / "gputwin-partitions.conf"
    partitions.write_text(partitions.read_text() + "# kept across restarts\n")
    start_cluster(state, *TINY)
    assert partitions.read_text().endswith("# kept across restarts\n")


def test_changing_the_node_count_of_a_state_needs_fresh(state: Path) -> None:
    (state / ".gputwin-slurm-state").touch()
    (state / "layout").write_text("nodes=2 gpus=2\n")
    refused = _start(state, "--nodes", "3", "--gpus", "2")
    assert refused.returncode != 0 and "--fresh" in refused.stderr
    assert not (state / "pids").exists() or (state / "pids").read_text() == ""
