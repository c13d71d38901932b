"""Operator settings: which backend the operator drives, read from the environment.

The kopf handlers (issue: declarative API) read one `OperatorConfig` at start-up. Every setting
has an environment variable so the Deployment in manifests/ can set it without flags.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Mapping

BACKENDS = ("sim", "kubernetes", "slurm")
PASS_DUTY = 0.5  # the largest share of wall time reconcile passes take (gputwin.operator.service)


class ConfigError(ValueError):
    """A setting with a value the operator cannot use; the message names the variable."""


@dataclass(frozen=True, slots=True)
class OperatorConfig:
    backend: str = "sim"
    namespace: str = ""  # empty: watch every namespace
    health_port: int = 8080
    pass_duty: float = PASS_DUTY

    @staticmethod
    def from_env(env: Mapping[str, str] | None = None) -> OperatorConfig:
        env = os.environ if env is None else env
        backend = env.get("GPUTWIN_BACKEND", "sim")
        if backend not in BACKENDS:
            raise ConfigError(f"GPUTWIN_BACKEND: {backend!r} is not one of {', '.join(BACKENDS)}")
        port = env.get("GPUTWIN_HEALTH_PORT", "8080")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"GPUTWIN_HEALTH_PORT: {port!r} is not a TCP port")
        return OperatorConfig(backend, env.get("GPUTWIN_NAMESPACE", ""), int(port), pass_duty(env))


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
