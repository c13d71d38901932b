"""SLURM GRES sharding read back from `sacct --json` and slurmrestd's jobs answer: a `gres`/`shard`
TRES entry is a share of one GPU, read exactly as `sacct -P`'s `gres/shard=N` (test_sacct_shards).

Where the JSON comes from: data/sacct-22.05-shards.json and data/slurmrestd-22.05-shards.json were
captured from the SLURM 22.05.8 test cluster (start.sh --shards 4) for `--gres=shard:1` and
`--gres=shard:2` (data/README.md). The table runs test_sacct_shards' TRES cases through the JSON
reader, each TRES text turned into the entries 22.05 writes for it (`gres/shard=2` ->
`{"type": "gres", "name": "shard", "count": 2}`), so both readers answer every case the same way.
"""

from __future__ import annotations

import copy
import json
from collections import Counter
from pathlib import Path

import pytest
from gputwin.adapters.slurm.history import parse_sacct_output
from gputwin.adapters.traces import TraceError, iter_jobs
from test_sacct_shards import CASES

DATA = Path(__file__).resolve().parent / "data"
SACCT = DATA / "sacct-22.05-shards.json"
REST = DATA / "slurmrestd-22.05-shards.json"


def _entries(tres: str) -> list[dict[str, object]]:
    """A TRES text as 22.05's JSON entries (`gres/gpu:h100=2` -> type gres, name gpu:h100)."""
    out: list[dict[str, object]] = []
    for item in filter(None, tres.split(",")):
        key, _, value = item.partition("=")
        kind, _, name = key.partition("/")
        count = int(value.rstrip("MG"))
        out.append({"type": kind, "name": name or None, "id": len(out) + 1, "count": count})
    return out


def _read(path: Path, per_gpu: int) -> tuple[object, dict[str, int]]:
    skipped: Counter[str] = Counter()
    try:
        jobs = [(j.gpus, j.gpu_milli) for j in iter_jobs(path, "sacct-json", skipped=skipped, shards_per_gpu=per_gpu)]
    except TraceError as exc:
        return str(exc), dict(skipped)
    return jobs, dict(skipped)


@pytest.mark.parametrize(("alloc", "req", "per_gpu", "want"), CASES)
def test_shard_tres_reads_as_the_text_reader_reads_it(tmp_path: Path, alloc: str, req: str, per_gpu: int,
                                                       want: tuple) -> None:  # fmt: skip
    document = json.loads(SACCT.read_text())
    job = copy.deepcopy(document["jobs"][0])
    job["tres"] = {"allocated": _entries(alloc), "requested": _entries(req)}
    path = tmp_path / "sacct.json"
    path.write_text(json.dumps({"jobs": [job]}))
    gpus, milli, notes = want
    assert _read(path, per_gpu) == ([(gpus, milli)], notes)


@pytest.mark.parametrize("transport", ["json", "rest"])
def test_captured_shard_jobs_read_as_shares(transport: str) -> None:
    text = (SACCT if transport == "json" else REST).read_text()
    found = {j.job_id: (j.gpus, j.gpu_milli) for j in parse_sacct_output(text, transport, shards_per_gpu=4).jobs}
    assert found == {"5": (1, 250), "8": (1, 500)}  # shard:1 and shard:2 of a GPU's 4
    unknown = parse_sacct_output(text, transport)  # shards per GPU not given: whole GPUs, counted
    assert [(j.gpus, j.gpu_milli) for j in unknown.jobs] == [(1, 1000), (1, 1000)]
    assert unknown.skipped == {"gres/shard without shards per GPU: read as 1 GPU": 2}


def test_a_bad_shard_count_names_its_path(tmp_path: Path) -> None:
    document = json.loads(SACCT.read_text())
    document["jobs"][0]["tres"]["allocated"][-1]["count"] = "two"
    path = tmp_path / "sacct.json"
    path.write_text(json.dumps(document))
    with pytest.raises(TraceError, match=r"jobs\[0\]\.tres\.allocated\[5\]\.count: not an integer"):
        list(iter_jobs(path, "sacct-json", shards_per_gpu=4))
