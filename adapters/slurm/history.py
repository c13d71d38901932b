"""Job history from a live SLURM cluster's accounting (`sacct`), as a `TraceResult`.

`sacct_history(start, end, partitions, states, transport)` runs `sacct` without a shell and hands
its output to the existing trace readers (`gputwin.adapters.traces`: `sacct -P` and `sacct --json`),
so the live path and the file path share one parser and one set of decisions. What is asked of
sacct, and why:

- `--allusers`: root sees only its own jobs otherwise; history is the whole cluster's.
- no `-X`: steps (`123.batch`, `123.0`) come out and the reader folds them into their job (counted
  under "job steps"), so a dump reads the same whether or not it was taken with `-X`.
- `--duplicates`: a requeued (e.g. preempted) job prints once per run; the reader keeps the last
  run and counts the earlier ones under "requeued duplicates".
- `--format` the columns the `-P` reader uses, JobName last so that a `|` inside a job name can be
  mended (`mend_job_names`); `--json` prints everything and ignores `--format`.
- `TZ=UTC` for the command (see `commands`), so window bounds and printed times are UTC.

Every user-supplied value is checked (`checks`) before any command runs. An empty window is an
empty `TraceResult`, not an error. `write_history` stores a result as a Helios CSV that
`gputwin simulate --trace` reads.
"""

from __future__ import annotations

import json
import tempfile
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import TextIO

from gputwin.adapters.traces import TraceError, TraceResult, read_trace, write_helios_csv

from . import rest
from .checks import check_names, check_state, check_time
from .commands import DEFAULT_TIMEOUT, run_command
from .errors import SlurmCommandError, SlurmInputError

# The `sacct -P` columns the reader understands; ReqTRES backs up AllocTRES for GPU counts.
# JobName comes last: it is the one free-text column, and a `|` inside it can then be mended.
SACCT_COLUMNS = (
    "JobID", "User", "Account", "Partition", "State", "Submit", "Start", "End",
    "AllocTRES", "ReqTRES", "NNodes", "NodeList", "JobName",
)  # fmt: skip
# What a `|` inside a job name becomes in `-P` output (the JSON transport keeps names as they are).
NAME_BAR = "\N{BROKEN BAR}"
TRANSPORTS = ("cli", "json", "rest")
# The reader format name and the label its errors carry, per transport.
_FORMATS = {
    "cli": ("sacct", "sacct -P output"),
    "json": ("sacct-json", "sacct --json output"),
    "rest": ("sacct-json", "slurmrestd jobs answer"),  # the same openapi/dbv0.0.NN job objects
}

TimeBound = datetime | str
# `sacct --json` reports an empty query as an "error" (ESLURM_REST_EMPTY_RESULT); it is just no jobs.
EMPTY_RESULT = 9003


def sacct_history(
    window_start: TimeBound,
    window_end: TimeBound,
    partitions: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
    transport: str = "cli",
    *,
    skip_invalid: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    shards_per_gpu: int = 0,
) -> TraceResult:
    """Jobs sacct reports for the window (UTC), optionally only some partitions and states.

    `transport` is "cli" (`sacct -P`), "json" (`sacct --json`) or "rest" (slurmrestd's
    `/slurmdb/v0.0.NN/jobs` on $GPUTWIN_SLURMRESTD, see `rest`). `skip_invalid` skips (and counts)
    records the reader cannot parse instead of failing (a `|` in a job name is mended either way;
    a newline in one is not, see `mend_job_names`). `shards_per_gpu`: the cluster's GRES shards per
    GPU, so a `gres/shard=N` record reads as that fraction of one GPU (every transport; 0: one GPU).
    Raises `SlurmInputError` for a refused value (before anything runs), `SlurmCommandError` when
    sacct fails, `TraceError` when its output cannot be read.
    """
    if transport == "rest":
        output = rest.jobs_text(rest_query(window_start, window_end, partitions, states), timeout=timeout)
    else:
        output = run_command(
            sacct_command(window_start, window_end, partitions, states, transport), timeout=timeout
        )
    return parse_sacct_output(output, transport, skip_invalid=skip_invalid, shards_per_gpu=shards_per_gpu)


def rest_query(
    window_start: TimeBound,
    window_end: TimeBound,
    partitions: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
) -> dict[str, str]:
    """The slurmrestd query of a history window: the same checked values as `sacct_command`'s."""
    argv = sacct_command(window_start, window_end, partitions, states, "json")
    options = dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--") and "=" in arg)
    names = {"starttime": "start_time", "endtime": "end_time", "partition": "partition", "state": "state"}
    return {names[key]: value for key, value in options.items() if key in names}


def sacct_command(
    window_start: TimeBound,
    window_end: TimeBound,
    partitions: Iterable[str] | None = None,
    states: Iterable[str] | None = None,
    transport: str = "cli",
) -> list[str]:
    """The sacct argument list for a history query; every value checked first."""
    if transport not in TRANSPORTS:
        raise SlurmInputError(f"transport: refused {transport!r}: want one of {', '.join(TRANSPORTS)}")
    argv = [
        "sacct", "--allusers", "--duplicates",
        f"--starttime={check_time(window_start, 'start')}",
        f"--endtime={check_time(window_end, 'end')}",
    ]  # fmt: skip
    if partitions is not None:
        names = check_names(_listed(partitions, "partitions"), "partition")
        if not names:
            raise SlurmInputError("partitions: an empty list selects nothing; pass None for all partitions")
        argv.append(f"--partition={','.join(names)}")
    if states is not None:
        wanted = list(dict.fromkeys(check_state(state) for state in _listed(states, "states")))
        if not wanted:
            raise SlurmInputError("states: an empty list selects nothing; pass None for all states")
        argv.append(f"--state={','.join(wanted)}")
    argv += ["--json"] if transport == "json" else ["--parsable2", f"--format={','.join(SACCT_COLUMNS)}"]
    return argv


def _listed(values: Iterable[str], what: str) -> list[str]:
    # A bare string is iterable too: "batch" must not become the partitions b, a, t, c, h.
    if isinstance(values, str):
        raise SlurmInputError(f"{what}: want a list of names, got the string {values!r:.80}")
    return list(values)


def parse_sacct_output(output: str, transport: str, *, skip_invalid: bool = False,
                       shards_per_gpu: int = 0) -> TraceResult:  # fmt: skip
    """Read sacct's stdout with the trace reader of its transport; empty output is no jobs."""
    fmt, label = _FORMATS[transport]
    if _is_empty(output, transport):
        return TraceResult(jobs=(), format=fmt, origin=0.0, skipped={})
    if transport == "cli":
        output = mend_job_names(output)
    with tempfile.TemporaryDirectory(prefix="gputwin-sacct-") as folder:
        path = Path(folder) / "sacct.out"
        path.write_text(output, encoding="utf-8")
        try:
            return read_trace(path, fmt, skip_invalid=skip_invalid, shards_per_gpu=shards_per_gpu)
        except TraceError as exc:
            # Name the command's output, not a temporary file that no longer exists.
            raise TraceError(label, exc.line, exc.field, exc.reason) from None


def mend_job_names(output: str) -> str:
    """Join a job name that holds `|` back into one field (its `|` become NAME_BAR).

    `sacct -P` does not escape `|` in job names, and the reader rightly refuses a row with too
    many fields, so one job named `a|b` would make the whole history unreadable. With JobName the
    last column, the extra fields of a row can only be pieces of that name.
    """
    lines = output.splitlines(keepends=True)
    if not lines or lines[0].rstrip("\r\n").split("|")[-1] != "JobName":
        return output
    width = lines[0].count("|") + 1
    for index in range(1, len(lines)):
        if lines[index].count("|") >= width:
            fields = lines[index].rstrip("\r\n").split("|")
            name = NAME_BAR.join(fields[width - 1 :])
            lines[index] = "|".join([*fields[: width - 1], name]) + "\n"
    return "".join(lines)


def _is_empty(output: str, transport: str) -> bool:
    if transport == "cli":
        return sum(1 for line in output.splitlines() if line.strip()) <= 1  # the header alone
    try:
        document = json.loads(output)
    except json.JSONDecodeError as exc:
        raise SlurmCommandError(f"sacct --json printed no JSON ({exc.msg} at line {exc.lineno})") from None
    if not isinstance(document, dict):
        raise SlurmCommandError("sacct --json printed no JSON object")
    errors = [error for error in _listed_errors(document.get("errors")) if not _is_empty_result(error)]
    if errors:
        raise SlurmCommandError(f"sacct --json reported: {_error_text(errors[0])}")
    return document.get("jobs") == []


def _listed_errors(errors: object) -> list[object]:
    if not errors:
        return []
    return list(errors) if isinstance(errors, list) else [errors]


def _is_empty_result(error: object) -> bool:
    return isinstance(error, dict) and (
        error.get("error_number") == EMPTY_RESULT or error.get("description") == "Nothing found"
    )


def _error_text(first: object) -> str:
    if isinstance(first, dict):
        text = first.get("description") or first.get("error") or json.dumps(first)
    else:
        text = str(first)
    return " ".join(str(text).split())[:200]


def write_history(result: TraceResult, out: str | Path | TextIO) -> None:
    """Write a history as a Helios CSV (a trace file `gputwin simulate --trace` reads), with a
    `gpu_milli` column when a job held GPU shares (`--shards-per-gpu`)."""
    milli = any(job.gpu_milli != 1000 for job in result.jobs)
    if isinstance(out, (str, Path)):
        with open(out, "w", encoding="utf-8", newline="") as stream:
            write_helios_csv(result.jobs, stream, milli=milli)
    else:
        write_helios_csv(result.jobs, out, milli=milli)
