"""GRES shards in the SLURM readers of "now": occupancy's GresUsed and the snapshot's squeue/sinfo
JSON, on output captured from the 22.05.8 test cluster (start.sh --nodes 4 --gpus 2 --shards 4;
jobs: on gpu01 --gres=shard:1, shard:2 (both put on GPU 0) and shard:4; on gpu02 shard:3 and
gpu:1, and a shard:4 left pending; data/squeue-shards.json, data/sinfo-shards.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gputwin.adapters.slurm import SlurmCommandError
from gputwin.adapters.slurm.occupancy import busy_gpus, parse_sinfo
from gputwin.adapters.slurm.snapshot import parse_squeue_json, shards_per_node

DATA = Path(__file__).resolve().parent / "data"
SQUEUE = (DATA / "squeue-shards.json").read_text()
SINFO = (DATA / "sinfo-shards.json").read_text()
# The same moment via occupancy.SINFO_ARGV (gpu01: shards on GPUs 0 and 1; gpu02: shards on 0, gpu:1 on 1).
SINFO_TEXT = """\
gpu01|batch*|gpu:h100:2,shard:h100:8|gpu:h100:0(IDX:N/A),shard:h100:2(IDX:0-1)
gpu02|batch*|gpu:h100:2,shard:h100:8|gpu:h100:1(IDX:1),shard:h100:1(IDX:0)
gpu03|batch*|gpu:h100:2,shard:h100:8|gpu:h100:0(IDX:N/A),shard:h100:0(IDX:N/A)
gpu03|debug|gpu:h100:2,shard:h100:8|gpu:h100:0(IDX:N/A),shard:h100:0(IDX:N/A)
"""


def test_occupancy_counts_gpus_held_by_shards_as_used() -> None:
    # 7 shards on gpu01's two GPUs print as `shard:h100:2`: a count of GPUs, read by their indexes.
    assert parse_sinfo(SINFO_TEXT) == {"batch": (3, 6, 4), "debug": (1, 2, 0)}


@pytest.mark.parametrize(
    ("used", "gpus"),
    [
        ("gpu:h100:1(IDX:1),shard:h100:1(IDX:0)", 2),
        ("gpu:h100:1(IDX:0),shard:h100:1(IDX:0)", 1),  # one GPU named twice counts once
        ("gpu:h100:0(IDX:N/A),shard:h100:3(IDX:0,2-3)", 3),
        ("gpu:2,shard:1", 3),  # without indexes: the counts added
        ("gpu:h100:2(IDX:0-1),mps:100(IDX:0)", 2),  # mps shares are not counted as GPUs
        ("(null)", 0),
    ],
)
def test_busy_gpus(used: str, gpus: int) -> None:
    assert busy_gpus(used, "GresUsed") == gpus


@pytest.mark.parametrize("used", ["shard:h100:1(IDX:3-1)", "shard:1(IDX:x)", "shard:1(IDX:0-99999)", "shard:h100"])
def test_bad_device_lists_are_refused(used: str) -> None:
    with pytest.raises(SlurmCommandError, match="GresUsed: not a"):
        busy_gpus(used, "GresUsed")


def test_a_running_share_is_a_share_of_the_gpu_it_is_on() -> None:
    assert shards_per_node(SINFO) == {"gpu01": 4, "gpu02": 4, "gpu03": 4, "gpu04": 4}
    running, pending = parse_squeue_json(SQUEUE, shards_per_node(SINFO))
    held = {r.job_id: (r.slots, r.gpu_milli, r.share_gpu) for r in running}
    assert held == {
        "1": ((("gpu01", 1),), 250, 0),
        "2": ((("gpu01", 1),), 500, 0),  # shard:2(IDX:0): beside job 1 on GPU 0
        "3": ((("gpu02", 1),), 750, 0),
        "4": ((("gpu02", 1),), 1000, -1),  # gres/gpu=1: a whole GPU
        "6": ((("gpu01", 1),), 1000, -1),  # all 4 shards of GPU 1: that GPU whole
    }
    assert [(p.job_id, p.gpus, p.gpu_milli) for p in pending] == [("7", 1, 1000)]


def test_without_shards_per_gpu_a_share_reads_as_one_whole_gpu() -> None:
    # Never zero GPUs (the old reading, which left a GPU held by shards looking free).
    running, _ = parse_squeue_json(SQUEUE)
    assert {(r.gpus, r.gpu_milli) for r in running} == {(1, 1000)}


def test_a_pending_share_reads_against_the_nodes_shards() -> None:
    data = json.loads(SQUEUE)
    job = next(j for j in data["jobs"] if j["job_state"] == "PENDING")
    job["tres_req_str"] = job["tres_req_str"].replace("gres/shard=4", "gres/shard=1")
    _, pending = parse_squeue_json(json.dumps({"jobs": [job]}), {"gpu01": 4})
    assert [(p.gpus, p.gpu_milli) for p in pending] == [(1, 250)]
