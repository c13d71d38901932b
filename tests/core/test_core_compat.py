"""The reference simulator's QSSF order (`gputwin.core.compat.HeliosQssf`) and the table estimator
that feeds it, on hand-made jobs whose start times tell the orders apart."""

from __future__ import annotations

import math

import pytest

from gputwin.core.compat import HeliosQssf
from gputwin.core.history import TableEstimator
from gputwin.core.model import JobSpec, PolicySpec
from gputwin.core.scheduler import Scheduler, SchedulerOptions
from gputwin.sim.engine import simulate

ONE_NODE = {"l0": [8]}

# (id, submit, duration, GPUs, estimate) on one 8-GPU node.
# t=0, only arrivals wait: compat tries them by GPUs (B 2, A 4, X 4: B and A fit, X does not);
#   native qssf by estimate x GPUs (X 4, A 400, B 2000: X and A fit, B does not).
# t=1, t=2: D (8 GPUs) and E (4 GPUs) both rank 8 (1 x 8, 2 x 4): compat breaks the tie by GPUs
#   (E first), native by arrival (D first).
JOBS = [("A", 0, 10, 4, 100), ("B", 0, 10, 2, 1000), ("X", 0, 10, 4, 1), ("D", 1, 10, 8, 1), ("E", 2, 10, 4, 2)]
TABLE = TableEstimator({job_id: float(est) for job_id, *_, est in JOBS})


@pytest.mark.parametrize(
    ("compat", "starts"),
    [
        pytest.param(True, {"A": 0, "B": 0, "X": 10, "E": 10, "D": 20}, id="compat-helios"),
        pytest.param(False, {"X": 0, "A": 0, "D": 10, "E": 20, "B": 20}, id="native"),
    ],
)
def test_compat_qssf_orders_as_the_reference(cluster, jobs, compat: bool, starts: dict[str, float]) -> None:
    spec = cluster(ONE_NODE, PolicySpec(queue="qssf", placement="consolidate"))
    rows = [(job_id, submit, duration, gpus, {"name": job_id}) for job_id, submit, duration, gpus, _ in JOBS]
    options = SchedulerOptions.helios(0, TABLE) if compat else SchedulerOptions(estimates=TABLE)
    out = simulate(spec, jobs(rows), options)
    assert {j.job_id: j.first_start for j in out.finished} == starts


def test_compat_qssf_key_is_estimate_times_gpus_then_gpus(cluster) -> None:
    sched = Scheduler(cluster(ONE_NODE, PolicySpec(queue="qssf")), SchedulerOptions.helios(0, TABLE))
    sched.submit(JobSpec("E", 0, 10, 4, "x", name="E"), 0)
    (job,) = sched.partitions["p"].queued_jobs()
    assert isinstance(sched.partitions["p"].policy, HeliosQssf)
    assert sched.partitions["p"].policy.key(job, 0) == (8.0, 4.0)


@pytest.mark.parametrize(("name", "expected"), [("A", 100.0), ("nobody", math.nan), ("", math.nan)])
def test_the_table_estimator_answers_by_job_name_and_learns_nothing(name: str, expected: float) -> None:
    job = JobSpec("id", 0, 10, 1, "x", name=name)
    TABLE.observe(job, 5.0)
    got = TABLE.predict(job)
    assert got == expected or (math.isnan(got) and math.isnan(expected))
