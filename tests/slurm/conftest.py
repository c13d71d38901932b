"""Fixtures for the SLURM adapter's tests: a real cluster on this host (see slurm_testcluster)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from gputwin.adapters.slurm.apply import reconfigure, write_atomic
from slurm_testcluster import (
    Cluster,
    check_installed,
    managed_snapshot,
    read_env_file,
    start_cluster,
    stop_cluster,
)


@pytest.fixture(scope="session")
def slurm_cluster() -> Iterator[Cluster]:
    given = os.environ.get("GPUTWIN_SLURM_STATE")
    owned: Path | None = None
    if given:
        state = Path(given)
        if not (state / "env.sh").is_file():
            pytest.fail(f"GPUTWIN_SLURM_STATE={given} has no env.sh: start it with scripts/slurm/start.sh",
                        pytrace=False)  # fmt: skip
    else:
        check_installed()
        # Under /tmp, not pytest's 0700 tmp folder: munged and mariadbd run as other users.
        owned = state = Path(tempfile.mkdtemp(prefix="gputwin-slurm-test-", dir="/tmp"))
        state.chmod(0o755)
        start_cluster(state)
    cluster = Cluster(state, read_env_file(state / "env.sh"))
    # SLURM_CONF selects the cluster; GPUTWIN_SLURMRESTD (when start.sh ran slurmrestd) its REST socket.
    names = ("SLURM_CONF", "GPUTWIN_SLURMRESTD")
    saved = {name: os.environ.get(name) for name in names}
    for name in names:
        if name in cluster.env:
            os.environ[name] = cluster.env[name]
    try:
        yield cluster
    finally:
        cluster.cancel_submitted()
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        if owned is not None:
            stopped = stop_cluster(owned)
            if stopped.returncode != 0:  # keep the folder: its pids file is how to stop it by hand
                pytest.fail(
                    f"scripts/slurm/stop.sh --state {owned} failed:\n{stopped.stderr[-2000:]}", pytrace=False
                )
            shutil.rmtree(owned, ignore_errors=True)


@pytest.fixture(scope="module")
def conf_dir(slurm_cluster: Cluster) -> Iterator[Path]:
    """The live cluster's config folder; the managed files a module changed are put back after it
    (plus a reconfigure), so every module starts from the cluster's initial partitions."""
    folder = Path(slurm_cluster.env["SLURM_CONF"]).parent
    saved = managed_snapshot(folder)
    try:
        yield folder
    finally:
        for name, data in saved.items():
            if data is not None:
                write_atomic(folder / name, data)
        reconfigure()
