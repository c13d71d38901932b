"""Whether pyslurm could serve as a transport here, and if not, why not.

pyslurm links against libslurm and its setup demands the exact SLURM major.minor it was written
for. PyPI carries only 25.11.x and the ancient 17.11/18.08 lines, so on SLURM 22.05 (Debian 12) or
24.11 (Debian 13) no pyslurm from a package registry can import; the upstream tag v22.5.x builds
against 22.05 from GitHub sources only. gputwin therefore reads history through the sacct CLI
(`-P` and `--json`), which every SLURM release ships; `pyslurm_status()` states the situation.
A pyslurm transport is not wired in: with no matching build installable here it could not be
tested, and untested code talking to libslurm is worse than none.
"""

from __future__ import annotations

import importlib
import re

from .commands import slurm_version
from .errors import SlurmCommandError

_MAJOR_MINOR = re.compile(r"(\d+)\.(\d+)")


def pyslurm_status() -> str:
    """One line: is pyslurm importable, does it match this SLURM, and what gputwin uses instead."""
    try:
        module = importlib.import_module("pyslurm")
    except ImportError as exc:
        return (
            f"pyslurm not used: it does not import ({exc}); PyPI only has builds for SLURM 25.11 "
            f"(and 17.11/18.08), none for {_slurm_text()}; history is read with sacct -P / --json"
        )
    version = str(getattr(module, "__version__", "") or getattr(module, "version", lambda: "")())
    match = _MAJOR_MINOR.match(version)
    try:
        major, minor, _ = slurm_version()
    except SlurmCommandError as exc:
        return f"pyslurm {version or '?'} imports, but the SLURM version is unknown ({exc}); using sacct"
    if match is None or (int(match.group(1)), int(match.group(2))) != (major, minor):
        return (
            f"pyslurm not used: pyslurm {version or '?'} does not match SLURM {major}.{minor:02d} "
            "(pyslurm needs the exact major.minor); history is read with sacct -P / --json"
        )
    return (
        f"pyslurm {version} matches SLURM {major}.{minor:02d}, but gputwin has no pyslurm transport yet; "
        "history is read with sacct -P / --json"
    )


def _slurm_text() -> str:
    try:
        major, minor, micro = slurm_version()
    except SlurmCommandError:
        return "this host's SLURM (version unknown)"
    return f"SLURM {major}.{minor:02d}.{micro}"
