"""The learned estimator's cheaper per-job Python gives the same floats as the code it replaced.

`FeatureState.describe` builds a job's row with one list extension of one tuple where it can,
finds the name stem with `stem_of` (str.rstrip, the regex as a fallback) and `learn` is unrolled
(issue 14's overhead target: these run once per job of a replay). `_reference_rows` below is the
describe and learn of commit ce22348, kept verbatim in spirit: every row of the shared traces'
excerpts, described in batches with the jobs learned in between, must match it bit for bit
(struct-packed, so NaNs compare too), and `stem_of` must be the regex for any name.
"""

from __future__ import annotations

import math
import re
import statistics
import struct
from collections.abc import Sequence
from pathlib import Path

import pytest
from gputwin.adapters.traces import read_trace
from hypothesis import given, settings
from hypothesis import strategies as st

from gputwin.core.model import JobSpec
from gputwin.estimators.features import FEATURES, FeatureState, stem_of

SHARED = Path(__file__).resolve().parents[2].parent / "shared" / "traces"
_DIGITS = re.compile(r"\d+$")
NAN = math.nan


@given(st.text(alphabet=st.sampled_from("ab-_.\n0123456789٣٤߀０"), max_size=12))
@settings(max_examples=400, deadline=None)
def test_stem_of_is_the_trailing_digits_regex(name: str) -> None:
    assert stem_of(name) == _DIGITS.sub("", name)


class _Group:
    def __init__(self, keep: bool) -> None:
        self.runs: list[float] | None = [] if keep else None
        self.count, self.total, self.recent = 0, 0.0, NAN
        self.submitted, self.load, self.last = NAN, 0.0, None  # type: tuple[str, float, float] | None

    def stats(self) -> tuple[float, float]:
        return (self.total / self.count, math.log1p(self.count)) if self.count else (NAN, 0.0)


class _Reference:
    """The ce22348 rows: one group per key, looked up per job, each column group appended apart."""

    def __init__(self, origin: float) -> None:
        self.origin, self.groups, self.codes = origin, {}, {}  # type: ignore[var-annotated]

    def group(self, key: tuple[object, ...]) -> _Group:
        if key not in self.groups:
            self.groups[key] = _Group(key[0] == "user")
        return self.groups[key]  # type: ignore[no-any-return]

    def code(self, column: int, value: str) -> float:
        return self.codes.setdefault((column, value), float(len(self.codes)))  # type: ignore[no-any-return]

    def keys(self, job: JobSpec) -> list[tuple[object, ...]]:
        stem, shape = _DIGITS.sub("", job.name), (str(job.gpus), str(job.gpu_milli), job.model)
        name = ("name", job.user, job.name, job.gpus, job.gpu_milli)
        return [("stem", job.user, stem), ("user", job.user), ("type", job.task_type), ("all",),
                ("shape", job.user, *shape), name]  # fmt: skip

    def describe(self, jobs: Sequence[JobSpec]) -> list[float]:
        out: list[float] = []
        for job in jobs:
            stem, user, _, _, shape, name = (self.group(k) for k in self.keys(job))
            token = re.match(r"[A-Za-z]+", _DIGITS.sub("", job.name))
            codes = (job.user, job.task_type, token.group() if token else "")
            out += [self.code(column, value) for column, value in enumerate(codes)]
            day = (job.submit + self.origin) / 86400.0
            out += [math.log2(max(job.gpus, 1)), (day % 1.0) * 24.0, float(int(day) % 7)]
            runs = user.runs or []
            out += ([sum(runs) / len(runs), statistics.median(runs), math.log1p(user.count), runs[-1]]
                    if user.count and runs else [NAN, NAN, 0.0, NAN])  # fmt: skip
            history = next((g.total / g.count for g in (stem, user, self.group(("type", job.task_type)),
                            self.group(("all",))) if g.count), NAN)  # fmt: skip
            if name.count:
                mean = name.total / name.count
                out += [mean, math.log1p(name.count), *stem.stats(), mean]
            else:
                out += [NAN, 0.0, *stem.stats(), history]
            shaped = job.gpu_milli < 1000 or bool(job.model)
            out += [job.gpu_milli / 1000.0, *(shape.stats() if shaped else (NAN, 0.0))]
            out += [name.recent, *self.submitted(name, job)]
            out += [NAN if job.cpus is None else math.log1p(job.cpus),
                    NAN if job.memory_mib is None else math.log1p(job.memory_mib)]  # fmt: skip
        return out

    @staticmethod
    def submitted(group: _Group, job: JobSpec) -> tuple[float, float]:
        if group.last is not None and group.last[0] == job.job_id:
            return group.last[1], group.last[2]
        since = job.submit - group.submitted
        if since < 0.0:
            return NAN, math.log1p(group.load)
        load = group.load * math.exp(-since / 7200.0) if group.load else 0.0
        gap, burst = (NAN, 0.0) if since != since else (math.log1p(since), math.log1p(load))
        group.submitted, group.load, group.last = job.submit, load + 1.0, (job.job_id, gap, burst)
        return gap, burst

    def learn(self, job: JobSpec, value: float) -> None:
        for key in self.keys(job):
            group = self.group(key)
            group.count += 1
            group.total += value
            if group.runs is not None:
                group.runs = [*group.runs, value][-32:]
            if key[0] == "name":
                recent = group.recent
                group.recent = value if recent != recent else recent + 0.25 * (value - recent)


def _bits(values: Sequence[float]) -> bytes:
    return struct.pack(f"{len(values)}d", *values)


@pytest.mark.skipif(not SHARED.is_dir(), reason=f"shared traces not found at {SHARED}")
@pytest.mark.parametrize(
    ("path", "count"),
    [pytest.param("philly_mix1/jobs.csv", 3000, id="philly"),
     pytest.param("alibaba_openb/openb_pod_list_default.csv", 3000, id="alibaba")],  # fmt: skip
)
def test_rows_are_the_reference_rows_bit_for_bit(path: str, count: int) -> None:
    trace = read_trace(SHARED / path)
    jobs = trace.jobs[:count]
    state, reference = FeatureState(origin=trace.origin), _Reference(trace.origin)
    for start in range(0, len(jobs), 50):  # batches of 50; each job learned (its true run) after its batch
        batch = jobs[start : start + 50]
        flat, handles = state.describe(batch)
        assert len(flat) == len(FEATURES) * len(batch)
        assert _bits(flat) == _bits(reference.describe(batch)), start
        for job, handle in zip(batch, handles):
            value = math.log1p(job.duration)
            FeatureState.learn(handle, value)
            reference.learn(job, value)
