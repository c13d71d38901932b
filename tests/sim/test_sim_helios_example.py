"""The worked example of the reference simulator (helios-simulator-model.md §2, "Example (1 node)"),
reproduced through `simulate` with `SchedulerOptions.helios()`, and the same jobs without compat."""

from __future__ import annotations

import pytest

from gputwin.core.model import PolicySpec
from gputwin.core.scheduler import SchedulerOptions
from gputwin.sim.engine import simulate
from gputwin.sim.metrics import summarize

# One 8-GPU node: a (4 GPUs, 10 s) and b (8 GPUs, 5 s) at t=0, c (4 GPUs, 3 s) at t=1, in this order.
EXAMPLE = [("a", 0, 10, 4), ("b", 0, 5, 8), ("c", 1, 3, 4)]


@pytest.mark.parametrize(
    ("queue", "options", "starts", "jct", "preemptions"),  # starts/jct/preemptions of a, b, c
    [
        # Reference: "FIFO: starts 0/10/15, JCT 10/15/17" (b blocks c at the head of the line).
        pytest.param(
            "fifo", SchedulerOptions.helios(), (0, 10, 15), (10, 15, 17), (0, 0, 0), id="helios-fifo"
        ),
        # Reference: "SRTF: the 8-GPU job runs 0-1, is preempted at 1 (remain 4+30), the others start at 1;
        # JCT 12 / 47 / 4" - every run is released one tick late (release_lag 1): c 1..5, a 1..12,
        # b resumes at 12 with 34 s -> 12 + 34 + 1 = 47.
        pytest.param("srtf", SchedulerOptions.helios(), (1, 0, 1), (12, 47, 4), (0, 1, 0), id="helios-srtf"),
        # SJF by the same rules: b (5 s) first 0..5, then c (3 s) and a (10 s) side by side from 5.
        pytest.param("sjf", SchedulerOptions.helios(), (5, 0, 5), (15, 5, 7), (0, 0, 0), id="helios-sjf"),
        # gputwin's own SRTF has no release lag: c 1..4, a 1..11, b 11..45.
        pytest.param("srtf", SchedulerOptions(), (1, 0, 1), (11, 45, 3), (0, 1, 0), id="native-srtf"),
    ],
)
def test_reference_example(sim_cluster, sim_jobs, queue, options, starts, jct, preemptions) -> None:
    spec = sim_cluster({"l0": [8]}, PolicySpec(queue=queue, placement="consolidate"))
    out = simulate(spec, sim_jobs(EXAMPLE), options)
    by_id = {j.job_id: j for j in out.finished}
    assert sorted(by_id) == ["a", "b", "c"]
    ids = ("a", "b", "c")
    assert tuple(by_id[i].first_start for i in ids) == starts
    assert tuple(by_id[i].end - by_id[i].spec.submit for i in ids) == jct
    assert tuple(by_id[i].preemptions for i in ids) == preemptions


def test_reference_example_fifo_summary(sim_cluster, sim_jobs) -> None:
    out = simulate(
        sim_cluster({"l0": [8]}, PolicySpec(placement="consolidate")),
        sim_jobs(EXAMPLE),
        SchedulerOptions.helios(),
    )
    summary = summarize(out.finished, out.busy).to_json()
    # JCT 10, 15, 17 -> mean 14; queue 0, 10, 14 -> mean 8; makespan 18 (last end 18 - first submit 0);
    # busy GPU-seconds 4*10 + 8*5 + 4*3 = 92 over 8 GPUs x 18 s = 0.6389
    assert (summary["avg_jct"], summary["avg_queue"], summary["makespan"]) == (14.0, 8.0, 18.0)
    assert summary["gpu_utilization"] == round(92 / (8 * 18), 4)
