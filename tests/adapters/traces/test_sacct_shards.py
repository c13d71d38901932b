"""SLURM GRES sharding read back from `sacct -P`: `gres/shard=N` in AllocTRES/ReqTRES is a fraction of one
GPU, gpu_milli = round(N x 1000 / S) for S shards per GPU (`read_trace(shards_per_gpu=S)`).

Where the lines come from: the AllocTRES below is what `sacct -P -a --format=...,AllocTRES,...` printed
on the SLURM 22.05.8 test cluster for `sbatch --gres=shard:2` with AccountingStorageTRES listing
gres/shard (tests/slurm/test_slurm_shards_live.py reads the same live); the other TRES items are as in
the shipped 22.05 samples (../shared/traces/sacct_samples). Every case is read by the fast path and
the csv-based one.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from gputwin.adapters.traces import TraceError, iter_jobs, read_trace
from gputwin.adapters.traces import sacct as sacct_reader

HEADER = "JobID|User|Partition|State|Submit|Start|End|AllocTRES|ReqTRES|NNodes|JobName"
TIMES = "2026-12-01T00:00:00|2026-12-01T00:00:05|2026-12-01T00:10:05"


def _line(job: str, alloc: str, req: str = "") -> str:
    return f"{job}|root|infer|COMPLETED|{TIMES}|{alloc}|{req}|1|j{job}"


# (AllocTRES, ReqTRES, shards per GPU) -> (gpus, gpu_milli, notes counted)
CASES = [
    pytest.param("billing=1,cpu=1,gres/shard=2,mem=4000M,node=1", "", 4, (1, 500, {}), id="half-of-4"),
    pytest.param("billing=1,cpu=1,gres/shard=1,mem=4000M,node=1", "", 4, (1, 250, {}), id="quarter"),
    pytest.param("billing=1,cpu=1,gres/shard=1,mem=4000M,node=1", "", 3, (1, 333, {}), id="third-rounded"),
    pytest.param("billing=1,cpu=1,gres/shard=2,mem=4000M,node=1", "", 3, (1, 667, {}), id="two-thirds"),
    pytest.param("billing=1,cpu=1,gres/shard=1,mem=4000M,node=1", "", 1000, (1, 1, {}), id="one-milli"),
    pytest.param("billing=1,cpu=1,gres/shard=4,mem=4000M,node=1", "", 4, (1, 1000, {}), id="all-shards-whole"),
    pytest.param("billing=1,cpu=1,gres/shard=6,mem=4000M,node=1", "", 4,
                 (2, 1000, {"gres/shard over one GPU: read as whole GPUs": 1}), id="over-one-gpu"),
    pytest.param("billing=1,cpu=1,gres/shard=2,mem=4000M,node=1", "", 0,
                 (1, 1000, {"gres/shard without shards per GPU: read as 1 GPU": 1}), id="S-unknown"),
    pytest.param("billing=2,cpu=2,gres/gpu:h100=2,gres/gpu=2,mem=8000M,node=1", "", 4, (2, 1000, {}), id="whole-gpus"),
    pytest.param("billing=1,cpu=1,gres/gpu=1,gres/shard=2,node=1", "", 4, (1, 1000, {}), id="gpu-wins"),
    pytest.param("", "billing=1,cpu=1,gres/shard=3,mem=4000M,node=1", 4, (1, 750, {}), id="ReqTRES-backs-up"),
]  # fmt: skip


def _read(path: Path, per_gpu: int) -> tuple[object, dict[str, int]]:
    skipped: Counter[str] = Counter()
    try:
        jobs = [(j.gpus, j.gpu_milli) for j in iter_jobs(path, "sacct", skipped=skipped, shards_per_gpu=per_gpu)]
    except TraceError as exc:
        return str(exc), dict(skipped)
    return jobs, dict(skipped)


@pytest.mark.parametrize("csv_path", [False, True], ids=["fast", "csv"])
@pytest.mark.parametrize(("alloc", "req", "per_gpu", "want"), CASES)
def test_shard_tres_reads_as_a_share(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, csv_path: bool,
                                     alloc: str, req: str, per_gpu: int, want: tuple) -> None:  # fmt: skip
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n{_line('41', alloc, req)}\n")
    if csv_path:
        monkeypatch.setattr(sacct_reader, "_scan", lambda ctx: None)
    gpus, milli, notes = want
    assert _read(path, per_gpu) == ([(gpus, milli)], notes)


def test_cached_tres_text_still_counts_each_record(tmp_path: Path) -> None:
    # The fast path caches a TRES text's parse: the note must still be counted per record.
    alloc = "billing=1,cpu=1,gres/shard=2,node=1"
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n{_line('1', alloc)}\n{_line('2', alloc)}\n")
    jobs, notes = _read(path, 0)
    assert jobs == [(1, 1000), (1, 1000)] and notes == {"gres/shard without shards per GPU: read as 1 GPU": 2}


def test_bad_shard_count_is_a_located_error(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n{_line('1', 'cpu=1,gres/shard=x,node=1')}\n")
    with pytest.raises(TraceError, match=r"sacct\.txt:2: AllocTRES: gres/shard: not an integer"):
        read_trace(path, "sacct", shards_per_gpu=4)


@pytest.mark.parametrize("bad", [-1, 1001, 2.0, True])
def test_shards_per_gpu_option_is_checked(tmp_path: Path, bad: object) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(f"{HEADER}\n")
    with pytest.raises(TraceError, match="shards_per_gpu: want a whole number 0..1000"):
        read_trace(path, "sacct", shards_per_gpu=bad)  # type: ignore[arg-type]
