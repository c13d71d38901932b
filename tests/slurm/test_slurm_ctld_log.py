"""Millisecond job events from slurmctld's log: the three messages, requeues, and what is left out.

No SLURM needed: the lines are the controller's own (SLURM 22.05, copied from a test cluster run).
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from gputwin.adapters.slurm.ctld_log import JobEvents, job_events

LOG = """\
[2026-11-29T12:16:57.976] _slurm_rpc_submit_batch_job: JobId=44 InitPrio=1 usec=399
[2026-11-29T12:16:58.066] sched: Allocate JobId=44 NodeList=gpu01 #CPUs=1 Partition=bench
[2026-11-29T12:16:58.166] _slurm_rpc_submit_batch_job: JobId=45 InitPrio=1 usec=1742
[2026-11-29T12:16:59.380] sched/backfill: _start_job: Started JobId=45 in bench on gpu02
[2026-11-29T12:17:01.000] preempted JobId=45 has been requeued to reclaim resources for JobId=47
[2026-11-29T12:17:03.209] _job_complete: JobId=45 WEXITSTATUS 0
[2026-11-29T12:17:03.500] sched: Allocate JobId=45 NodeList=gpu03 #CPUs=1 Partition=bench
[2026-11-29T12:17:04.170] _job_complete: JobId=44 done
[2026-11-29T12:17:06.210] _job_complete: JobId=45 done
[2026-11-29T12:17:06.300] _slurm_rpc_submit_batch_job: JobId=46 InitPrio=1 usec=300
[2026-11-29T12:17:06.400] sched: Allocate JobId=446 NodeList=gpu01 #CPUs=1 Partition=bench
garbage line JobId=46 without a stamp
"""


def _at(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "slurmctld.log"
    path.write_text(LOG)
    return path


def test_events_to_the_millisecond(log: Path) -> None:
    found = job_events(log, ["44", "45", "46"])
    assert found["44"] == JobEvents(_at("2026-11-29T12:16:57.976"), _at("2026-11-29T12:16:58.066"),
                                    _at("2026-11-29T12:17:04.170"))  # fmt: skip
    # Requeued: the first start (backfill's message) and the last completion count.
    assert found["45"] == JobEvents(_at("2026-11-29T12:16:58.166"), _at("2026-11-29T12:16:59.380"),
                                    _at("2026-11-29T12:17:06.210"))  # fmt: skip
    assert "46" not in found  # never started (JobId=446 is another job): left out, not guessed


def test_only_the_asked_jobs(log: Path) -> None:
    assert set(job_events(log, ["44"])) == {"44"}
    assert job_events(log, []) == {}
