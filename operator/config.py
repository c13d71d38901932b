"""Operator settings: which backend the operator drives, read from the environment.

The kopf handlers (issue: declarative API) read one `OperatorConfig` at start-up. Every setting
has an environment variable so the Deployment in manifests/ can set it without flags.
`trace_access` reads the TraceReplay file sandbox's two (`GPUTWIN_TRACE_DIR`,
`GPUTWIN_TRACE_MAX_BYTES`; see gputwin.operator.trace_files), which the emulator reads too, and
`models` the learned-model folder (`GPUTWIN_MODEL_DIR`; see gputwin.estimators.modeldir): unset, a
SchedulingPolicy with `estimator: {type: learned}` blocks the cluster with a reason.
`forecast_start_latency` reads the live scheduler's measured start latency the forecasts model
(`GPUTWIN_FORECAST_START_LATENCY`; see gputwin.operator.forecasts).
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from gputwin.estimators.modeldir import ModelRefused, model_dir
from gputwin.operator.trace_files import DEFAULT_MAX_BYTES, TRACE_DIR_ENV, TRACE_MAX_ENV, TraceAccess
from gputwin.runtime.capabilities import ConfigError as ConfigError  # backends raise it too: it lives below them
from gputwin.twin.snapshot import MAX_START_LATENCY

BACKENDS = ("sim", "kubernetes", "slurm")
START_LATENCY_ENV = "GPUTWIN_FORECAST_START_LATENCY"
PASS_DUTY = 0.5  # the largest share of wall time reconcile passes take (gputwin.operator.service)


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    backend: str = "sim"
    namespace: str = ""  # empty: watch every namespace
    health_port: int = 8080
    pass_duty: float = PASS_DUTY
    traces: TraceAccess = field(default_factory=TraceAccess)  # no file source until an admin sets one
    models: Path | None = None  # GPUTWIN_MODEL_DIR: no learned model until an admin sets one

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None) -> OperatorConfig:
        env = os.environ if env is None else env
        backend = env.get("GPUTWIN_BACKEND", "sim")
        if backend not in BACKENDS:
            raise ConfigError(f"GPUTWIN_BACKEND: {backend!r} is not one of {', '.join(BACKENDS)}")
        port = env.get("GPUTWIN_HEALTH_PORT", "8080")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"GPUTWIN_HEALTH_PORT: {port!r} is not a TCP port")
        namespace = env.get("GPUTWIN_NAMESPACE", "")
        return OperatorConfig(backend, namespace, int(port), pass_duty(env), trace_access(env), models_dir(env))


def models_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """`GPUTWIN_MODEL_DIR` (an existing folder; empty or unset: None), as a ConfigError when wrong."""
    try:
        return model_dir(env)
    except ModelRefused as exc:
        raise ConfigError(str(exc)) from None


_SIZE = re.compile(r"(\d{1,15})(Ki|Mi|Gi)?")
_UNITS = {None: 1, "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3}


def trace_access(env: Mapping[str, str] | None = None, *, manifest_folders: bool = False) -> TraceAccess:
    """`GPUTWIN_TRACE_DIR` (an existing folder; empty or unset: no file sources) and
    `GPUTWIN_TRACE_MAX_BYTES` (bytes, or with a Ki/Mi/Gi suffix), as the replay sandbox's settings."""
    env = os.environ if env is None else env
    raw_dir = env.get(TRACE_DIR_ENV, "").strip()
    base = None
    if raw_dir:
        base = Path(raw_dir).resolve()
        if not base.is_dir():
            raise ConfigError(f"{TRACE_DIR_ENV}={raw_dir!r}: not a folder; want the folder trace files come from")
    raw_max = env.get(TRACE_MAX_ENV, "").strip()
    size = _SIZE.fullmatch(raw_max)
    if raw_max and (size is None or int(size.group(1)) == 0):
        raise ConfigError(f"{TRACE_MAX_ENV}={raw_max!r}: not a size; want bytes > 0, e.g. 33554432 or 32Mi")
    max_bytes = int(size.group(1)) * _UNITS[size.group(2)] if size else DEFAULT_MAX_BYTES
    return TraceAccess(base, max_bytes, manifest_folders)


def pass_duty(env: Mapping[str, str] | None = None) -> float:
    """`GPUTWIN_PASS_DUTY`: the largest share of wall time the loop spends in passes, in (0, 1]."""
    raw = (os.environ if env is None else env).get("GPUTWIN_PASS_DUTY", "").strip()
    if not raw:
        return PASS_DUTY
    try:
        duty = float(raw)
    except ValueError:
        duty = math.nan
    if not 0.0 < duty <= 1.0:  # NaN fails too
        raise ConfigError(f"GPUTWIN_PASS_DUTY={raw!r}: not a share of time; want a number in (0, 1]")
    return duty


def forecast_start_latency(env: Mapping[str, str] | None = None) -> float:
    """`GPUTWIN_FORECAST_START_LATENCY`: seconds from the instant room appears to the next start on it,
    as measured on this cluster (`benchmarks/forecast_kube.py` prints it; never fitted), in
    [0, MAX_START_LATENCY]; unset or empty: 0, not modelled (`Snapshot.start_latency_s`)."""
    raw = (os.environ if env is None else env).get(START_LATENCY_ENV, "").strip()
    if not raw:
        return 0.0
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not 0.0 <= seconds <= MAX_START_LATENCY:  # NaN fails too
        raise ConfigError(f"{START_LATENCY_ENV}={raw[:40]!r}: not a start latency; want seconds in "
                          f"[0, {MAX_START_LATENCY:g}], as measured on the cluster")  # fmt: skip
    return seconds
