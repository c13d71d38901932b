"""Alibaba GPU cluster trace v2023 pod lists (`openb_pod_list_*.csv`).

Required columns: `name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time`; optional
`gpu_spec,qos,pod_phase,cpu_milli,memory_mib`. Times are seconds from the
trace start, so the origin is 0.0 and submit times are kept as they are. Decisions, for a
scheduler replaying a Kubernetes trace:

- submit = `creation_time`; duration = `deletion_time - scheduled_time` (the time it held GPUs).
- `num_gpu == 0` (CPU-only pods): skipped, counted under "zero GPUs".
- `num_gpu == 1` with `0 < gpu_milli < 1000` (a GPU share): kept as that share,
  `JobSpec(gpus=1, gpu_milli=gpu_milli)`, counted under "fractional GPU kept as a share" (the
  core packs shares onto shared GPUs, `gputwin.core.sharing`; a preemptive partition gives it a
  whole GPU). `gpu_milli` 0 or 1000, and that of multi-GPU pods (per GPU, always 1000 in the
  trace), mean whole GPUs.
- no `scheduled_time` (pods still Pending at the snapshot): skipped, "never scheduled".
- no `deletion_time`, or `deletion_time <= scheduled_time`: skipped, "no run time".
- `pod_phase == Running`: kept with the duration cut off at the snapshot end, counted under
  "cut off at snapshot" (dropping them would drop most long jobs).
- task_type = `gpu_spec` when given, else "default"; model = `gpu_spec` (the GPU model it must
  run on where nodes declare models; "" = any); user = `qos`; job_id = pod `name`;
  name = the pod's request shape, `cpu{cpu_milli}-mem{memory_mib}` (`cpu-mem` without those
  columns): every pod name is unique, so it cannot group runs, while pods of one shape are
  usually one workload's replicas; run-time estimators group by (user, name), and it is known at
  submit time (on Alibaba, history's QSSF average JCT 138,403 -> 87,590 s, benchmarks/README.md);
  cpus = `cpu_milli` / 1000 and memory_mib = `memory_mib` (None when absent or not a plain count:
  the learned run-time estimator's features; the scheduler places by GPUs only);
  state: Succeeded -> COMPLETED, Failed -> FAILED, Running -> RUNNING; a pod is one node.
"""

from __future__ import annotations

from collections.abc import Iterator

from gputwin.core.model import JobSpec

from .errors import FieldError
from .fields import MAX_DURATION, MAX_GPUS, check_seconds, parse_count, parse_name, parse_seconds
from .table import Converter, ReadContext, Row, Table, convert_rows, open_text

REQUIRED = ("name", "num_gpu", "gpu_milli", "creation_time", "scheduled_time", "deletion_time")
ZERO_GPUS = "zero GPUs"
FRACTIONAL = "fractional GPU kept as a share"
NEVER_SCHEDULED = "never scheduled"
NO_RUN = "no run time"
CUT_OFF = "cut off at snapshot"
_STATES = {"Succeeded": "COMPLETED", "Failed": "FAILED", "Running": "RUNNING", "Pending": "PENDING"}


def read_alibaba(ctx: ReadContext) -> Iterator[JobSpec]:
    """Stream the GPU pods of an Alibaba pod list in file order."""
    ctx.clock.observe(False, "creation_time")
    with open_text(ctx) as stream:
        table = Table.open(ctx, stream, ",")
        table.require(*REQUIRED)
        yield from convert_rows(ctx, table, _converter(ctx, table))


def _converter(ctx: ReadContext, table: Table) -> Converter:
    col = table.columns
    name, num_gpu, milli, created, scheduled, deleted = (col[field] for field in REQUIRED)

    def convert(row: Row, seq: int) -> JobSpec | str:
        gpus = parse_count(row[num_gpu], "num_gpu", MAX_GPUS)
        if gpus == 0:
            return ZERO_GPUS
        job_id = parse_name(row[name], "name")
        gpu_milli = parse_count(row[milli], "gpu_milli", 1_000_000)
        if gpu_milli > 1000:
            raise FieldError("gpu_milli", f"more than one GPU (1000): {row[milli]!r}")
        submit = parse_seconds(row[created], "creation_time")
        if not row[scheduled].strip():
            return NEVER_SCHEDULED
        start = parse_seconds(row[scheduled], "scheduled_time")
        if not row[deleted].strip():
            return NO_RUN
        end = parse_seconds(row[deleted], "deletion_time")
        if end <= start:
            return NO_RUN
        check_seconds(end - start, "deletion_time", MAX_DURATION)  # the run time, deletion - scheduled
        phase = table.get(row, "pod_phase").strip()
        # Notes, not skips: the pod is kept, but the caller should know how it was read.
        share = gpus == 1 and 0 < gpu_milli < 1000
        if share:
            ctx.skipped[FRACTIONAL] += 1
        if phase == "Running":
            ctx.skipped[CUT_OFF] += 1
        cpu, memory = (_count(table.get(row, column)) for column in ("cpu_milli", "memory_mib"))
        return JobSpec(
            job_id=job_id,
            submit=submit,
            duration=end - start,
            gpus=gpus,
            task_type=table.get(row, "gpu_spec").strip() or "default",
            user=table.get(row, "qos").strip(),
            state=_STATES.get(phase, phase.upper() or "COMPLETED"),
            num_nodes=1,
            seq=seq,
            model=table.get(row, "gpu_spec").strip(),
            gpu_milli=gpu_milli if share else 1000,
            name=_shape_name(table, row),
            cpus=None if cpu is None else cpu / 1000.0,
            memory_mib=None if memory is None else float(memory),
        )

    return convert


def _shape_name(table: Table, row: Row) -> str:
    """`cpu{cpu_milli}-mem{memory_mib}`; a value that is not a plain count is left out."""
    cpu, mem = (_count_text(table.get(row, column)) for column in ("cpu_milli", "memory_mib"))
    return f"cpu{cpu}-mem{mem}"


def _count_text(raw: str) -> str:
    text = raw.strip()
    return text if text.isdigit() and len(text) <= 9 else ""


def _count(raw: str) -> int | None:
    """`raw` as a count when `_count_text` keeps it (the shape's rule), else None."""
    text = _count_text(raw)
    return int(text) if text else None
