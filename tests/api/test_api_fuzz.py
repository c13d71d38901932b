"""Fuzzing the manifest loader: random bytes, random YAML and mutations of the real manifests.

Whatever the file holds, `load_cluster` (simulate, slurm render) and `read_manifests` + the
schema and cross-object checks (apply) either succeed or raise their one user-error type, with
one-line problems; never another exception, never a hang (hypothesis' deadline bounds each run).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from budget import FUZZ_DEADLINE_MS  # tests/budget.py
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from gputwin.api.loader import load_cluster, read_documents
from gputwin.api.problems import ClusterError
from gputwin.cli.manifests import ManifestError, cluster_errors, read_manifests

ROOT = Path(__file__).resolve().parents[2]
SAMPLES = sorted(
    [*(ROOT / "manifests" / "samples").glob("*.yaml"), *(ROOT / "manifests" / "examples").glob("*.yaml")]
)
FUZZ = settings(max_examples=60, deadline=FUZZ_DEADLINE_MS, suppress_health_check=[HealthCheck.too_slow])


def check(data: bytes) -> None:
    """Every reader of a manifest on `data`: success or its user error, problems one line each."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "fuzz.yaml"
        path.write_bytes(data)
        for read in (load_cluster, read_documents):
            try:
                read(path)
            except ClusterError as exc:
                assert exc.problems and all(len(str(p).splitlines()) == 1 for p in exc.problems)
        try:
            manifests = read_manifests([path], validate=True)
            cluster_errors([], manifests)
        except ManifestError as exc:
            assert exc.lines and all(len(line.splitlines()) == 1 for line in exc.lines)


def test_the_samples_are_there() -> None:
    assert len(SAMPLES) >= 5


@FUZZ
@given(data=st.binary(max_size=2000))
def test_random_bytes(data: bytes) -> None:
    check(data)


SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=30),
)
VALUES = st.recursive(
    SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=30,
)  # fmt: skip
KINDS = st.sampled_from(
    ["SwitchTopology", "GPUPartition", "SchedulingPolicy", "GPUJob", "TraceReplay", "List", "x"]
)


@FUZZ
@given(
    documents=st.lists(
        st.fixed_dictionaries(
            {"apiVersion": st.sampled_from(["gputwin.io/v1alpha1", "v1"]), "kind": KINDS},
            optional={"metadata": VALUES | st.fixed_dictionaries({"name": st.text(max_size=20)}),
                      "spec": VALUES, "items": VALUES},
        ) | VALUES,
        max_size=4,
    )
)  # fmt: skip
def test_random_yaml_documents(documents: list[object]) -> None:
    check(yaml.safe_dump_all(documents, allow_unicode=True).encode())


def _mutate(text: bytes, draw: st.DrawFn) -> bytes:
    """One of the ways a real manifest goes wrong: a byte changed, a span cut, repeated or
    replaced by something hostile (huge numbers, deep nesting, control characters, aliases)."""
    start = draw(st.integers(0, len(text)))
    end = draw(st.integers(start, min(len(text), start + 200)))
    hostile = draw(st.sampled_from([
        b"", b"\x00", b"\xff\xfe", b"9" * 5000, b"1e400", b"-1", b"[" * 2000, b"{a: " * 150, b"*a", b"&a ",
        b"\n---\n", b"\t", b": ", b"- ", b"'", b'"', b"#", b"\n  ", b"~", b"!!binary aGk=", b"!!python/object:os.system",
        b"2024-05-01", b"0x" + b"f" * 5000, b".inf", b"\xe2\x80\xa8", b"10000000000000", b"*",
    ]))  # fmt: skip
    how = draw(st.sampled_from(["replace", "insert", "repeat", "flip"]))
    if how == "replace":
        return text[:start] + hostile + text[end:]
    if how == "insert":
        return text[:start] + hostile + text[start:]
    if how == "repeat":
        return text[:end] + text[start:end] * draw(st.integers(2, 50)) + text[end:]
    flipped = bytes([text[start] ^ draw(st.integers(1, 255))]) if start < len(text) else b""
    return text[:start] + flipped + text[start + 1 :]


@st.composite
def mutated_samples(draw: st.DrawFn) -> bytes:
    text = draw(st.sampled_from(SAMPLES)).read_bytes()
    for _ in range(draw(st.integers(1, 4))):
        text = _mutate(text, draw)
    return text


@settings(max_examples=150, deadline=FUZZ_DEADLINE_MS, suppress_health_check=[HealthCheck.too_slow])
@given(data=mutated_samples())
def test_mutations_of_the_real_manifests(data: bytes) -> None:
    check(data)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_every_sample_reads_cleanly(sample: Path) -> None:
    assert read_manifests([sample], validate=True)
    assert read_documents(sample)
