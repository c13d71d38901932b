"""Column handling shared by both `sacct -P` readers (see sacct.py for the decisions they implement).

The column names, the skip reasons counted in `ReadContext.skipped`, the header check, and the
parsers for the GPU columns (`AllocTRES`/`ReqTRES` TRES lists, `AllocGRES`/`ReqGRES` GRES strings)
and node counts (`NNodes`, else the `NodeList` hostlist).
"""

from __future__ import annotations

import re
from collections import Counter

import hostlist

from gputwin.api.names import MAX_NODES, MAX_SHARDS_PER_GPU, count_hostlist

from .errors import FieldError
from .fields import MAX_GPUS, parse_count
from .table import Row, Table

GPU_COLUMNS = ("AllocTRES", "ReqTRES", "AllocGRES", "ReqGRES")
STEPS = "job steps"
REQUEUED = "requeued duplicates"
NEVER_STARTED = "never started"
STILL_RUNNING = "still running"
ZERO_GPUS = "zero GPUs"
SUBMIT_FROM_START = "no Submit column: submit = Start"
SHARD_AS_GPU = "gres/shard without shards per GPU: read as 1 GPU"
SHARDS_OVER_GPU = "gres/shard over one GPU: read as whole GPUs"
WHOLE = 1000  # milli-GPU in one GPU
_PARENS = re.compile(r"\([^)]*\)")
_DIGITS = re.compile(r"\d+", re.ASCII)


def _check_header(table: Table) -> None:
    table.require("JobID", "Start")
    if "End" not in table.columns:
        table.require("Elapsed")
    if not any(name in table.columns for name in GPU_COLUMNS):
        table.require(" or ".join(GPU_COLUMNS))


def _gpus(table: Table, row: Row) -> tuple[int, int, int]:
    """(GPUs, nodes, shards) from the first non-empty GPU column; nodes is 0 when it does not say."""
    for name in GPU_COLUMNS:
        text = table.get(row, name).strip()
        if text:
            return _tres(text, name) if name.endswith("TRES") else (_gres(text, name), 0, 0)
    return 0, 0, 0


def share(gpus: int, shards: int, per_gpu: int, skipped: Counter[str]) -> tuple[int, int]:
    """(GPUs, milli-GPU) of a record with `gpus` GPUs and `shards` SLURM shards (`gres/shard=N`, a
    GPU of `per_gpu` shards; 0: not known). GPUs win when a record has both; shards under one GPU
    are the share round(N x 1000 / per_gpu) on 1 GPU (at least 1 milli); N = per_gpu is that GPU
    whole; more (only with SLURM's MULTIPLE_SHARING_GRES_PJ) is ceil(N / per_gpu) whole GPUs."""
    if gpus or not shards:
        return gpus, WHOLE
    if not per_gpu:
        skipped[SHARD_AS_GPU] += 1
        return 1, WHOLE
    if shards > per_gpu:
        skipped[SHARDS_OVER_GPU] += 1
        return -(-shards // per_gpu), WHOLE
    return 1, max(1, round(shards * WHOLE / per_gpu))


def _tres(text: str, field: str) -> tuple[int, int, int]:
    """`billing=2,cpu=2,gres/gpu:h100=16,gres/gpu=16,mem=8000M,node=2` -> (16, 2, 0); the last is
    `gres/shard=N` (SLURM 22.05 GRES sharding: `billing=1,cpu=1,gres/shard=2,mem=4000M,node=1`)."""
    total: int | None = None
    typed = nodes = shards = 0
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise FieldError(field, f"not a TRES list (item without '='): {item!r}")
        if key == "gres/gpu":
            total = _tres_count(value, field, key, MAX_GPUS)
        elif key.startswith("gres/gpu:"):
            typed += _tres_count(value, field, key, MAX_GPUS)
        elif key == "node":
            nodes = _tres_count(value, field, key, MAX_NODES)
        elif key == "gres/shard":
            shards = _tres_count(value, field, key, MAX_GPUS * MAX_SHARDS_PER_GPU)
    return _bounded(typed if total is None else total, field), nodes, shards


def _bounded(gpus: int, field: str) -> int:
    """A GPU total, refused above MAX_GPUS (a sum of typed entries may be)."""
    if gpus > MAX_GPUS:
        raise FieldError(field, f"too many GPUs: {gpus} (at most {MAX_GPUS:,})")
    return gpus


def _tres_count(value: str, field: str, key: str, maximum: int) -> int:
    try:
        return parse_count(value, field, maximum)
    except FieldError as exc:
        raise FieldError(field, f"{key}: {exc.reason}") from None


def _gres(text: str, field: str) -> int:
    """`gpu:4`, `gpu:h100:4(IDX:0-3)`, `gpu:h100:2,gpu:a100:2` -> the GPU total."""
    total: int | None = None
    typed = 0
    # Drop `(IDX:0,2-3)` first: its commas are not item separators.
    for item in _PARENS.sub("", text).split(","):
        kind, *rest = item.strip().split(":")
        if kind != "gpu":
            continue
        count = parse_count(rest.pop(), field, MAX_GPUS) if rest and _DIGITS.fullmatch(rest[-1]) else 1
        if len(rest) > 1:
            raise FieldError(field, f"not a GRES item (want gpu[:TYPE][:N]): {item!r}")
        if rest:
            typed += count
        else:
            total = (total or 0) + count
    return _bounded(typed if total is None else total, field)


def _node_count(table: Table, row: Row) -> int:
    return _nodes_of(table.get(row, "NNodes"), table.get(row, "NodeList"))


def _nodes_of(nnodes: str, nodelist: str) -> int:
    nnodes = nnodes.strip()
    if nnodes:
        return parse_count(nnodes, "NNodes", MAX_NODES)
    nodelist = nodelist.strip()
    if not nodelist or nodelist == "None assigned":
        return 0
    count = count_hostlist(nodelist)  # counted before it is expanded
    if count is not None and count > MAX_NODES:
        raise FieldError("NodeList", f"names more than {MAX_NODES:,} nodes")
    try:
        return len(hostlist.expand_hostlist(nodelist))
    except hostlist.BadHostlist as exc:
        raise FieldError("NodeList", f"not a hostlist ({exc}): {nodelist[:80]!r}") from None
