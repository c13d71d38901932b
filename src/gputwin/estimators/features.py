"""What is known about a job when it is submitted, as one row of numbers for the run-time model.

`FeatureState` learns online from finished jobs (`observe`) and describes a new one (`row`) from
its submit-time fields only - user, job name, task type (partition), GPUs, submit hour and weekday -
and the history of earlier finished jobs: the user's last runs (mean, median, count), the same
(user, name) and (user, name stem) groups, and the running-mean estimate `HistoryEstimator` would
give, in log space (so the trees learn corrections to the baseline). The (user, name) group is
also keyed by the GPUs and the share of a GPU asked for: a name that runs at other sizes is another
job (Alibaba's pods are named by their CPU and memory request, and the same request with a
different GPU share runs differently: the group's mean log run time ranks its pods at Spearman
0.51 with the size in the key, 0.46 without); the job's share of a GPU with its
(user, GPUs, share, GPU model) group when it asks for a share or a model (Alibaba's pods have
unique names and a QoS class for a user: what repeats there is the request); the CPUs and memory it
asks for, where its trace says (`JobSpec.cpus`, `memory_mib`); and, for its (user, name) group, an
exponentially weighted mean of its runs (weight `RECENT_WEIGHT` on the newest: about the last 7)
and how it was submitted: seconds since the group's previous submission and a count of its earlier
submissions that decays with time constant `BURST` (a workload's replicas come in bursts and run
alike; known at submit time, durations unread). Each of these is O(1) state on the group's own
`_Recent` (no container per group: where names are unique, as on Philly, that is a job each). A
job's own `duration` is never read here.

Pure Python (no numpy): the simulate path imports nothing heavy until a model is fitted.
"""

from __future__ import annotations

import math
import re
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field

from gputwin.core.model import JobSpec

_DIGITS = re.compile(r"\d+$")
_TOKEN = re.compile(r"[A-Za-z]+")
NAN = math.nan

# The columns of `row`, in order; the first three are categories (codes in first-seen order).
FEATURES = (
    "user", "task_type", "name_token", "gpus_log2", "submit_hour", "submit_weekday",
    "user_mean_log", "user_median_log", "user_count_log", "user_last_log",
    "name_mean_log", "name_count_log", "stem_mean_log", "stem_count_log", "history_log",
    "gpu_share", "shape_mean_log", "shape_count_log",
    "name_recent_log", "name_gap_log", "name_burst_log", "cpus_log", "memory_log",
)  # fmt: skip
CATEGORICAL = (0, 1, 2)
RECENT_WEIGHT = 0.25  # a (user, name) group's newest run in its recent mean (~ a mean of its last 7)
BURST = 7200.0  # seconds: an earlier submission of the group counts exp(-age / BURST)
_FIRST = (NAN, NAN, 0.0)  # recent mean, gap, count of a group's first job: none before it


@dataclass(slots=True)
class _Recent:
    """The last `size` log run times of one group and how many it has seen in all; for a (user,
    name) group also its recent mean and its submissions (`FeatureState._submitted`)."""

    runs: deque[float] | None  # kept for users only: other groups need the count and mean
    count: int = 0
    total: float = 0.0  # sum of every log run time seen (for the all-time mean)
    recent: float = NAN  # exponentially weighted mean of the log run times (name groups)
    submitted: float = NAN  # the latest described submission's time (name groups)
    load: float = 0.0  # the decayed count of the group's submissions at `submitted`, that one's included
    last: tuple[str, float, float] | None = None  # that job's id and its answer, if it is described again

    def mean(self) -> float:
        return self.total / self.count if self.count else NAN


# The groups a job's run time is added to: (stem, user, task type, all, shape) and its (user, name).
Handle = tuple[tuple[_Recent, ...], _Recent]
# What `describe` finds once per (user, stem, task type, shape): codes, user stats, stem stats and
# history, the shape's share and stats, groups.
_Shared = tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[float, ...], tuple[_Recent, ...]]
# A job's shape: what it asks for besides its name (GPUs, share of a GPU, GPU model). On a trace
# whose names are unique pod ids (Alibaba's openb-pod-NNNN) and whose user is a QoS class, the
# (user, shape) group is the nearest thing to "the same job run before".
_Shape = tuple[int, int, str]
# A job's (user, name) group's key: user, name, GPUs, thousandths of a GPU.
_Name = tuple[str, str, int, int]


@dataclass
class FeatureState:
    """Per-group history of finished jobs, and the category codes seen so far."""

    recent: int = 32  # how many of a user's last runs the mean and median cover
    origin: float = 0.0  # epoch seconds of the trace's 0 (readers re-base epoch clocks), for hour/weekday
    _groups: dict[tuple[str, ...], _Recent] = field(default_factory=dict)
    _names: dict[_Name, _Recent] = field(default_factory=dict)  # the (user, name, GPUs, share) groups
    _codes: dict[tuple[int, str], float] = field(default_factory=dict)
    # The stem, user, task type and all-jobs groups of a (user, stem, task type): few, and found
    # once each (names are often unique, so only the name's own group is looked up per job).
    _shared_groups: dict[tuple[str, str, str, _Shape], tuple[_Recent, ...]] = field(default_factory=dict)

    def codes(self) -> list[tuple[int, str, float]]:
        """The category codes given so far, (column, value, code): a saved model needs the codes it
        was trained with, since they are handed out in first-seen order."""
        return [(column, value, code) for (column, value), code in self._codes.items()]

    def restore_codes(self, codes: list[tuple[int, str, float]]) -> None:
        """Start from a saved model's codes (`codes`); values it never saw get new ones after them."""
        self._codes = {(column, value): code for column, value, code in codes}

    def _group(self, key: tuple[str, ...]) -> _Recent:
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Recent(deque(maxlen=self.recent) if key[0] == "user" else None)
        return group

    def _code(self, column: int, value: str) -> float:
        code = self._codes.get((column, value))
        if code is None:
            # Past every restored code, so a value first seen live never shares a trained one's code.
            code = self._codes[(column, value)] = float(len(self._codes))
        return code

    def handle(self, job: JobSpec) -> Handle:
        """The groups a finished `job` adds to (`learn`): found once, when it is described."""
        groups = self._groups_of(job.user, stem_of(job.name), job.task_type, _shape(job))
        key = (job.user, job.name, job.gpus, job.gpu_milli)
        name = self._names.get(key)
        if name is None:
            name = self._names[key] = _Recent(None)
        return groups, name

    def _groups_of(self, user: str, stem: str, task_type: str, shape: _Shape) -> tuple[_Recent, ...]:
        groups = self._shared_groups.get((user, stem, task_type, shape))
        if groups is None:
            shape_key = ("shape", user, str(shape[0]), str(shape[1]), shape[2])
            keys = (("stem", user, stem), ("user", user), ("type", task_type), ("all",), shape_key)
            groups = self._shared_groups[(user, stem, task_type, shape)] = tuple(self._group(k) for k in keys)
        return groups

    def observe(self, job: JobSpec, run_seconds: float) -> None:
        self.learn(self.handle(job), log_seconds(run_seconds))

    @staticmethod
    def learn(handle: Handle, value: float) -> None:
        """Add one finished job's log run time `value` to the groups of its `handle` (in place, no
        look-ups: this runs once per finished job in a replay; unrolled, no loop over the groups)."""
        (stem, user, task_type, every, shape), name = handle
        stem.count += 1
        stem.total += value
        task_type.count += 1
        task_type.total += value
        every.count += 1
        every.total += value
        name.count += 1
        name.total += value
        shape.count += 1
        shape.total += value
        recent = name.recent
        name.recent = value if recent != recent else recent + RECENT_WEIGHT * (value - recent)  # NaN: first
        user.count += 1
        user.total += value
        user.runs.append(value)  # type: ignore[union-attr]  # a user group keeps its runs

    def rows(self, jobs: Sequence[JobSpec]) -> list[list[float]]:
        flat, _ = self.describe(jobs)
        width = len(FEATURES)
        return [flat[i : i + width] for i in range(0, len(flat), width)]

    def describe(self, jobs: Sequence[JobSpec]) -> tuple[list[float], list[Handle]]:
        """`row` of each job, one after another in one flat list (numpy reads it in one pass), and
        each job's `handle`. Nothing is observed in between, so what a (user, name stem, task type)
        shares is described once per call: a batch costs little more per job than a list. Groups
        are made empty when first met (an empty group describes as a missing one)."""
        memo: dict[tuple[str, str, str, _Shape], _Shared] = {}
        out: list[float] = []
        handles: list[Handle] = []
        origin, names, log2, log1p = self.origin, self._names, math.log2, math.log1p
        # One `out +=` of one tuple a job where it can be (each list extension is a call): the same
        # floats in the same columns as one extension per group of columns (a replay's per-job cost).
        for job in jobs:
            user, name_text, gpus, milli = job.user, job.name, job.gpus, job.gpu_milli
            key = (user, stem_of(name_text), job.task_type, (gpus, milli, job.model))
            shared = memo.get(key)
            if shared is None:
                shared = memo[key] = self._shared(*key)
            codes, user_stats, tail, shape_stats, groups = shared
            name_key = (user, name_text, gpus, milli)
            name = names.get(name_key)
            day = (job.submit + origin) / 86400.0
            cpus, memory = job.cpus, job.memory_mib
            sizes = (NAN if cpus is None else log1p(cpus), NAN if memory is None else log1p(memory))
            out += (*codes, log2(max(gpus, 1)), (day % 1.0) * 24.0, float(int(day) % 7), *user_stats)
            if name is None:  # every job where names are unique: its group is made counted
                answer = (job.job_id, NAN, 0.0)
                name = names[name_key] = _Recent(None, 0, 0.0, NAN, job.submit, 1.0, answer)
                out += (NAN, 0.0, *tail, *shape_stats, *_FIRST, *sizes)
            else:
                if name.count:  # the name's own mean is also the most specific history estimate
                    mean = name.total / name.count
                    out += (mean, log1p(name.count), tail[0], tail[1], mean, *shape_stats, name.recent)
                else:
                    out += (NAN, 0.0, *tail, *shape_stats, name.recent)
                out += (*_submitted(name, job), *sizes)
            handles.append((groups, name))
        return out, handles

    def row(self, job: JobSpec) -> list[float]:
        return self.rows([job])[0]

    def _shared(self, user: str, stem: str, task_type: str, shape: _Shape) -> _Shared:
        """What every job of a (user, stem, task type, shape) has in common: the category codes, the
        user's statistics, the stem's with the history estimate without the name's own group, the
        share of a GPU with the shape's statistics, the groups."""
        token = _TOKEN.match(stem)
        codes = (self._code(0, user), self._code(1, task_type), self._code(2, token.group() if token else ""))
        groups = self._groups_of(user, stem, task_type, shape)
        history = self._history(*groups[:4])
        # Only a share of a GPU or a named model makes a shape: whole GPUs of any model are the
        # `gpus` column already (and Philly's rows stay as they were: constant columns split nothing).
        shaped = shape[1] < 1000 or shape[2]
        shape_stats = (shape[1] / 1000.0, *(_group_stats(groups[4]) if shaped else (NAN, 0.0)))
        return codes, _user_stats(groups[1]), (*_group_stats(groups[0]), history), shape_stats, groups

    @staticmethod
    def _history(*groups: _Recent | None) -> float:
        """The most specific group's all-time mean, as HistoryEstimator orders them."""
        for group in groups:
            if group is not None and group.count:
                return group.mean()
        return NAN


def _submitted(group: _Recent, job: JobSpec) -> tuple[float, float]:
    """log(1 + seconds since the group's previous submission) (NaN: none) and log(1 + the decayed
    count of its earlier ones), then `job` is counted. Jobs are described in submit order; the latest
    one described again gets its first answer, and one older than it (observe() describes a job
    that was never predicted; no replay of Philly or Alibaba does) no gap and the count as it stands,
    uncounted: the state keeps the latest submission only."""
    last = group.last
    if last is not None and last[0] == job.job_id:
        return last[1], last[2]
    since = job.submit - group.submitted  # NaN for a group's first submission
    if since < 0.0:  # older than the latest: its own gap is gone (unknown); the count is read, not added to
        return NAN, math.log1p(group.load)
    load = group.load * math.exp(-since / BURST) if group.load else 0.0
    gap, burst = (NAN, 0.0) if since != since else (math.log1p(since), math.log1p(load))
    group.submitted, group.load, group.last = job.submit, load + 1.0, (job.job_id, gap, burst)
    return gap, burst


def stem_of(name: str) -> str:
    """`name` without its trailing digits (`_DIGITS`: Unicode ones, and before a final newline, as
    `$` matches there): str.rstrip of the ASCII digits, ~3x cheaper than the regex, answers every
    name except one whose stripped end is another digit or a newline, which the regex takes."""
    stem = name.rstrip("0123456789")
    if stem and (stem[-1].isdecimal() or stem[-1] == "\n"):
        return _DIGITS.sub("", name)
    return stem


def _shape(job: JobSpec) -> _Shape:
    return (job.gpus, job.gpu_milli, job.model)


def log_seconds(seconds: float) -> float:
    """The model's target: log(1 + run seconds), defined for a zero-second run."""
    return math.log1p(max(seconds, 0.0))


def _user_stats(group: _Recent | None) -> tuple[float, ...]:
    if group is None or not group.count or not group.runs:
        return (NAN, NAN, 0.0, NAN)
    runs = group.runs
    ordered, n = sorted(runs), len(runs)
    # statistics.median's own arithmetic (the same float), without its Python call layers.
    median = ordered[n // 2] if n % 2 else (ordered[n // 2 - 1] + ordered[n // 2]) / 2
    return (sum(runs) / len(runs), median, math.log1p(group.count), runs[-1])


def _group_stats(group: _Recent | None) -> tuple[float, float]:
    if group is None or not group.count:
        return (NAN, 0.0)
    return (group.mean(), math.log1p(group.count))
