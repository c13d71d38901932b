"""GPU fractions on the real test cluster: SLURM 22.05 GRES sharding, deployed by `gputwin slurm apply`.

The cluster is started with shards (`scripts/slurm/start.sh --shards 4`, the layout the session
fixture uses); the module declares the live nodes with that `shardsPerGpu` and applies it, so
job_submit.lua maps `--comment=task:infer,milli:M` to `--gres=shard:ceil(M*S/1000)`. On one node:
more share jobs run at once than it has GPUs, no GPU holds more than its S shards, a whole-GPU job
waits while shards hold every GPU and starts once one GPU's shards are free, and sacct's
`gres/shard=N` reads back as round(N*1000/S) milli. Everything is polled (`polling.wait_for`).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import hostlist
import pytest
from polling import wait_for
from gputwin.adapters.slurm import sacct_history
from gputwin.adapters.slurm.apply_all import apply_everything, live_gres
from gputwin.adapters.slurm.render import render
from gputwin.adapters.slurm.render_gres import shards_for
from slurm_testcluster import Cluster

from gputwin.api.loader import load_cluster

NODE = "gpu01"
# squeue %r of a job held back: Resources (the share), ReqNodeNotAvail (the whole GPU: 22.05 says
# "ReqNodeNotAvail, UnavailableNodes:gpu01" when no GPU of the node is free of shards), Priority.
WAITING = ("Resources", "ReqNodeNotAvail", "Priority")
LONG = "sleep 600"  # held until the test cancels it


def _layout(cluster: Cluster) -> tuple[list[str], int, int]:
    """(node names, GPUs per node, shards per GPU) as slurmctld reports them."""
    gres = live_gres()
    nodes = sorted(gres)
    gpus = int(re.search(r"gpu:(?:\w+:)?(\d+)", gres[NODE]).group(1))  # type: ignore[union-attr]
    shards = re.search(r"shard:(?:\w+:)?(\d+)", gres[NODE])  # 22.05 types them: shard:h100:32
    if shards is None:
        pytest.skip(f"the test cluster has no shards (Gres={gres[NODE]}): "
                    "start it with scripts/slurm/start.sh --shards 4")
    return nodes, gpus, int(shards.group(1)) // gpus


@pytest.fixture(scope="module")
def shared(slurm_cluster: Cluster, conf_dir: Path,
           tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[int, int]]:  # fmt: skip
    """The live nodes declared with their shards and applied; yields (GPUs per node, shards per GPU)."""
    nodes, gpus, per_gpu = _layout(slurm_cluster)
    names = hostlist.collect_hostlist(nodes)
    path = tmp_path_factory.mktemp("shards") / "shared.yaml"
    path.write_text(f"""\
apiVersion: gputwin.io/v1alpha1
kind: SwitchTopology
metadata: {{name: live}}
spec:
  switches: [{{name: leaf1}}]
  nodeGroups:
    - {{switch: leaf1, nodes: "{names}", gpusPerNode: {gpus}, model: h100, shardsPerGpu: {per_gpu}}}
---
apiVersion: gputwin.io/v1alpha1
kind: GPUPartition
metadata: {{name: shared}}
spec: {{topology: live, taskTypes: ["*"], nodes: "{names}"}}
""")
    result = apply_everything(render(load_cluster(path)), conf_dir)
    assert result.files.changed, result
    try:
        yield gpus, per_gpu
    finally:
        slurm_cluster.cancel_submitted()


def _share(cluster: Cluster, milli: int, command: str = LONG) -> str:
    return cluster.submit(f"--comment=task:infer,milli:{milli}", f"--nodelist={NODE}", command=command)


def _jobs(cluster: Cluster, ids: list[str]) -> dict[str, str]:
    out = cluster.run("squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T|%r").stdout
    return {f[0]: f"{f[1]}|{f[2]}" for f in (line.split("|") for line in out.splitlines())}


def _running(cluster: Cluster, ids: list[str]) -> set[str]:
    return {j for j, s in _jobs(cluster, ids).items() if s.startswith("RUNNING")}


def _gres_lines(cluster: Cluster, job: str) -> str:
    """The per-node lines of `scontrol -d show job` (``Nodes=gpu01 ... GRES=shard:2(IDX:3)``)."""
    text = cluster.run("scontrol", "-d", "show", "job", job).stdout
    return "\n".join(line.strip() for line in text.splitlines() if line.strip().startswith("Nodes="))


def _shards_per_gpu_index(cluster: Cluster, ids: list[str]) -> Counter[int]:
    """Shards allocated on each GPU index of NODE, from `scontrol -d show job` (GRES=shard:N(IDX:i))."""
    used: Counter[int] = Counter()
    for job in ids:
        for count, index in re.findall(r"GRES=shard:(\d+)\(IDX:(\d+)\)", _gres_lines(cluster, job)):
            used[int(index)] += int(count)
    return used


def test_lua_asks_shards_for_a_fraction(slurm_cluster: Cluster, shared: tuple[int, int]) -> None:
    _, per_gpu = shared
    job = _share(slurm_cluster, 300, "sleep 1")
    text = slurm_cluster.run("scontrol", "show", "job", job).stdout
    assert f"TresPerNode=gres:shard:{shards_for(300, per_gpu)}" in text, text


def test_shares_pack_gpus_and_a_whole_gpu_waits(slurm_cluster: Cluster, shared: tuple[int, int]) -> None:
    gpus, per_gpu = shared
    half = shards_for(500, per_gpu)
    per_gpu_jobs = per_gpu // half
    ids = [_share(slurm_cluster, 500) for _ in range(gpus * per_gpu_jobs)]
    wait_for(f"{len(ids)} half-GPU jobs running on {NODE}",
             lambda: len(_running(slurm_cluster, ids)) == len(ids),
             timeout=90, on_timeout=lambda: str(_jobs(slurm_cluster, ids)))  # fmt: skip
    assert len(ids) > gpus  # more jobs at once than the node has GPUs
    used = _shards_per_gpu_index(slurm_cluster, ids)
    assert sorted(used) == list(range(gpus)) and max(used.values()) <= per_gpu, used
    extra = _share(slurm_cluster, 500)
    whole = slurm_cluster.submit("--gres=gpu:1", f"--nodelist={NODE}", command=LONG)

    def both_pending() -> dict[str, str] | None:
        states = _jobs(slurm_cluster, [extra, whole])
        reasons = [v.split("|")[1].split(",")[0] for v in states.values() if v.startswith("PENDING|")]
        pending = len(reasons) == 2 and all(r in WAITING for r in reasons)
        return states if pending else None

    # SLURM gives a GPU as gres/gpu or as shards, never both: with shards on every GPU both wait.
    wait_for("the extra share and the whole-GPU job pending", both_pending, timeout=30,
             on_timeout=lambda: str(_jobs(slurm_cluster, [extra, whole])))  # fmt: skip
    assert _running(slurm_cluster, ids) == set(ids)
    # The extra share leaves; then one GPU's shards are freed, and the whole-GPU job gets that GPU.
    slurm_cluster.run("scancel", extra)
    gpu0 = [j for j in ids if "(IDX:0)" in _gres_lines(slurm_cluster, j)]
    assert len(gpu0) == per_gpu_jobs, gpu0
    slurm_cluster.run("scancel", *gpu0)
    wait_for("the whole-GPU job running", lambda: _running(slurm_cluster, [whole]), timeout=60,
             on_timeout=lambda: str(_jobs(slurm_cluster, [whole])))  # fmt: skip
    granted = _gres_lines(slurm_cluster, whole)
    assert re.search(r"GRES=gpu:h100:1\(IDX:0\)", granted), granted
    slurm_cluster.run("scancel", *ids, whole)


def test_sacct_reads_shards_back_as_milli(slurm_cluster: Cluster, shared: tuple[int, int]) -> None:
    _, per_gpu = shared
    asked = {250: _share(slurm_cluster, 250, "sleep 1"), 300: _share(slurm_cluster, 300, "sleep 1")}
    slurm_cluster.wait_done(list(asked.values()), len(asked))
    for job in asked.values():
        slurm_cluster.wait_in_history(job, "wrap")

    def read() -> dict[str, tuple[int, int]] | None:
        history = sacct_history("now-1hours", "now", states=["CD"], shards_per_gpu=per_gpu)
        found = {j.job_id: (j.gpus, j.gpu_milli) for j in history.jobs}
        return found if all(job in found for job in asked.values()) else None

    found = wait_for("both share jobs in sacct history", read, timeout=30)
    for milli, job in asked.items():
        shards = shards_for(milli, per_gpu)
        assert found[job] == (1, round(shards * 1000 / per_gpu)), (milli, found[job])
        assert found[job][1] >= milli  # rounded up to whole shards: never less than was asked
