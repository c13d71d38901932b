"""Running SLURM commands: argument lists only, never a shell, with a bounded wait.

Every SLURM client reads `SLURM_CONF` from the environment, which is passed through. `TZ=UTC` is
set for every command: sacct then reads window bounds and prints times in UTC, which is how the
trace readers read them, so history never depends on the host's zone.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Sequence

from .errors import SlurmCommandError

DEFAULT_TIMEOUT = 120.0
_VERSION = re.compile(r"(\d+)\.(\d+)\.(\d+)")


def slurm_env() -> dict[str, str]:
    """The environment SLURM commands run with: ours, plus TZ=UTC (see the module docstring)."""
    return {**os.environ, "TZ": "UTC"}


def run_command(argv: Sequence[str], *, timeout: float = DEFAULT_TIMEOUT) -> str:
    """Run one command and return its stdout; any failure is a one-line `SlurmCommandError`."""
    name = os.path.basename(argv[0])
    try:
        proc = subprocess.run(
            list(argv), shell=False, capture_output=True, text=True, errors="replace",
            timeout=timeout, check=False, env=slurm_env(), stdin=subprocess.DEVNULL,
        )  # fmt: skip
    except FileNotFoundError:
        raise SlurmCommandError(
            f"{name}: command not found (is SLURM installed? see scripts/slurm/install.sh)"
        ) from None
    except subprocess.TimeoutExpired:
        raise SlurmCommandError(f"{name}: no answer within {timeout:g} s") from None
    if proc.returncode != 0:
        raise SlurmCommandError(f"{name} exited with status {proc.returncode}: {stderr_summary(proc.stderr)}")
    return proc.stdout


def stderr_summary(stderr: str) -> str:
    """The most telling stderr line, on one line: the last `fatal:` line, else the last line."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    if not lines:
        return "no error message"
    fatal = [line for line in lines if "fatal:" in line]
    chosen = (fatal or lines)[-1]
    hint = (
        " (is SLURM_CONF set?)"
        if "configuration" in chosen.lower() and "SLURM_CONF" not in os.environ
        else ""
    )
    more = f" (+{len(lines) - 1} more stderr lines)" if len(lines) > 1 else ""
    return chosen + hint + more


def slurm_version() -> tuple[int, int, int]:
    """The SLURM release the clients belong to, from `sacct --version` (`slurm-wlm 22.05.8`)."""
    out = run_command(["sacct", "--version"], timeout=30)
    match = _VERSION.search(out)
    if match is None:
        raise SlurmCommandError(f"sacct --version: no version in {out.strip()!r:.80}")
    major, minor, micro = (int(part) for part in match.groups())
    return major, minor, micro
