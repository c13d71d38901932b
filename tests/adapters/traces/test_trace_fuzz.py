"""Fuzzing every trace reader: random bytes and mutated excerpts of the real traces.

Whatever a file holds, a reader either returns jobs that respect the bounds of fields.py or raises
a TraceError located in that file — never another exception, never a hang (hypothesis' deadline),
never memory out of proportion to the file (tracemalloc's peak). The same holds for the Helios VC
table reader (ClusterError) and for hostlists, whose count must match python-hostlist's expansion.
"""

from __future__ import annotations

import math
import tracemalloc
from pathlib import Path

import hostlist
import pytest
from gputwin.adapters.traces import FORMATS, TraceError, read_trace
from gputwin.adapters.traces.fields import MAX_DURATION, MAX_GPUS, MAX_SECONDS
from budget import FUZZ_DEADLINE_MS  # tests/budget.py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.api.helios import load_vc_table
from gputwin.api.meta import MAX_NODES, count_hostlist, expand_hostlist
from gputwin.api.problems import ClusterError

SHARED = Path(__file__).resolve().parents[3] / ".." / "shared" / "traces"
DATA = Path(__file__).resolve().parent / "data"


def excerpt(path: Path, lines: int = 25) -> bytes:
    """The first lines of a real trace: small enough to fuzz many times a second."""
    with path.open("rb") as fh:
        return b"".join(fh.readline() for _ in range(lines))


SEEDS = {
    "helios": SHARED / "philly_mix1" / "jobs.csv",
    "alibaba": SHARED / "alibaba_openb" / "openb_pod_list_default.csv",
    "sacct": SHARED / "sacct_samples" / "sacct-P-22.05.txt",
    "sacct-mixed": DATA / "sacct-P-mixed-handmade.txt",
    "sacct-json": SHARED / "sacct_samples" / "sacct-22.05.json",
    "sacct-json-24.11": DATA / "sacct-24.11-handmade.json",
}
FORMAT_OF = {"sacct-mixed": "sacct", "sacct-json-24.11": "sacct-json"}
# Bytes that mean something to some reader: separators, quotes, brackets, NUL, BOM, odd line ends.
TOKENS = [b"\0", b",", b"|", b'"', b"\n", b"\r", b"\r\n", b"[", b"]", b"{", b"}", b":", b"-", b".", b"=",
          b"\xef\xbb\xbf", b"\xff", b"9" * 60, b"1e300", b"-1", b"nan", b"inf", b"Unknown", b"gpu:",
          b"gres/gpu=", b"n[1-99999]", b'"number": ', b'{"set": true, "number": 1}', b"[" * 50]  # fmt: skip
SETTINGS = settings(
    max_examples=60, deadline=FUZZ_DEADLINE_MS, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)


@pytest.fixture(scope="module")
def seeds() -> dict[str, bytes]:
    found = {name: path for name, path in SEEDS.items() if path.exists()}
    if len(found) < len(SEEDS):
        pytest.skip(f"shared traces missing: {sorted(set(SEEDS) - set(found))}")
    return {
        name: excerpt(path) if path.suffix != ".json" else path.read_bytes() for name, path in found.items()
    }


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "trace"


@st.composite
def mutated(draw: st.DrawFn, data: bytes) -> bytes:
    """`data` after a few random edits: delete, insert a token or random bytes, overwrite, duplicate."""
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(data)))
        edit = draw(st.sampled_from(["delete", "token", "bytes", "overwrite", "duplicate"]))
        end = min(len(data), at + draw(st.integers(1, 40)))
        if edit == "delete":
            data = data[:at] + data[end:]
        elif edit == "token":
            data = data[:at] + draw(st.sampled_from(TOKENS)) + data[at:]
        elif edit == "bytes":
            data = data[:at] + draw(st.binary(max_size=12)) + data[at:]
        elif edit == "overwrite":
            data = data[:at] + draw(st.binary(min_size=end - at, max_size=end - at)) + data[end:]
        else:
            data = data[:end] + data[at:end] * draw(st.integers(1, 3)) + data[end:]
    return data


def read_bounded(path: Path, data: bytes, fmt: str, skip_invalid: bool) -> None:
    """Read `data` as a trace: a TraceError naming `path`, or jobs within the bounds; small memory."""
    path.write_bytes(data)
    tracemalloc.start()
    try:
        result = read_trace(path, fmt, skip_invalid=skip_invalid)
    except TraceError as exc:
        assert exc.path == str(path) and exc.field and exc.reason
        assert "\n" not in str(exc)
        assert len(str(exc)) < 2000 + len(str(path))
        return
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert peak < 5_000_000 + 200 * len(data), peak
    assert result.format in FORMATS
    for job in result.jobs:
        assert 1 <= job.gpus <= MAX_GPUS
        assert 0 <= job.duration <= MAX_DURATION and math.isfinite(job.duration)
        assert 0 <= job.submit <= MAX_SECONDS
        assert 0 <= job.num_nodes <= MAX_NODES
        assert job.job_id and "\0" not in job.job_id + job.user + job.name + job.task_type + job.state


@pytest.mark.parametrize("seed", list(SEEDS))
@pytest.mark.parametrize("skip_invalid", [False, True], ids=["strict", "skip-invalid"])
@SETTINGS
@given(st.data())
def test_mutated_real_traces_read_as_jobs_or_one_trace_error(
    seeds, scratch, seed, skip_invalid, data
) -> None:
    mutant = data.draw(mutated(seeds[seed]))
    fmt = data.draw(st.sampled_from(["auto", FORMAT_OF.get(seed, seed)]))
    read_bounded(scratch, mutant, fmt, skip_invalid)


@pytest.mark.parametrize("fmt", ["auto", *FORMATS])
@SETTINGS
@given(st.binary(max_size=400))
def test_random_bytes_read_as_jobs_or_one_trace_error(scratch, fmt, blob) -> None:
    read_bounded(scratch, blob, fmt, skip_invalid=False)


HEADERS = {
    "helios": b"job_id,user,vc,gpu_num,submit_time,duration,node_num\n",
    "alibaba": b"name,num_gpu,gpu_milli,creation_time,scheduled_time,deletion_time\n",
    "sacct": b"JobID|User|Partition|State|Submit|Start|End|AllocTRES|NodeList\n",
}


@pytest.mark.parametrize("fmt", list(HEADERS))
@SETTINGS
@given(
    st.lists(st.lists(st.sampled_from(TOKENS) | st.binary(max_size=8), max_size=9), min_size=1, max_size=4)
)
def test_random_rows_under_a_valid_header_read_as_jobs_or_one_trace_error(scratch, fmt, rows) -> None:
    sep = b"|" if fmt == "sacct" else b","
    body = b"".join(sep.join(row) + b"\n" for row in rows)
    read_bounded(scratch, HEADERS[fmt] + body, fmt, skip_invalid=False)


@SETTINGS
@given(st.binary(max_size=300) | st.builds(lambda s: b"vc,num_nodes\n" + s, st.binary(max_size=200)))
def test_vc_tables_load_or_raise_one_cluster_error(scratch, blob) -> None:
    table = scratch.with_suffix(".csv")
    table.write_bytes(blob)
    try:
        cluster = load_vc_table(table, gpus_per_node=8, nodes_per_switch=16)
    except ClusterError as exc:
        assert exc.problems and all(str(table) in p.document for p in exc.problems)
        return
    assert 1 <= len(cluster.topology.nodes) <= MAX_NODES


HOSTLIST_CHARS = st.sampled_from(list("ab0123456789[]-,") + ["99999", "00001-99999"])


@settings(max_examples=300, deadline=FUZZ_DEADLINE_MS, derandomize=True)
@given(st.lists(HOSTLIST_CHARS, max_size=24).map("".join))
def test_hostlists_are_counted_as_python_hostlist_expands_them(text) -> None:
    count = count_hostlist(text)
    try:
        expanded = expand_hostlist(text)
    except ValueError:
        expanded = None
    if count is not None and count <= MAX_NODES:
        try:
            names = hostlist.expand_hostlist(text, allow_duplicates=True)
        except hostlist.BadHostlist:
            names = None
        if names is not None:
            assert count == len(names)
    if expanded is not None:
        assert count == len(expanded) <= MAX_NODES
