"""Where a report's numbers came from: the input files and their sha256, the gputwin build, when, how.

A report read weeks later (or pasted into a pull request) must say which trace and cluster it ran
on, byte for byte, and which gputwin produced it. `provenance` hashes the files streamed in 1 MiB
blocks (a multi-gigabyte trace costs no memory); the clock reading, the core flavour and the
command line are the caller's (`gputwin.cli.compare`), so this module reads no clock itself.
"""

from __future__ import annotations

import hashlib
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from gputwin import __version__

BLOCK = 1 << 20


@dataclass(frozen=True, slots=True)
class InputFile:
    path: str
    sha256: str
    bytes: int


@dataclass(frozen=True, slots=True)
class Provenance:
    """The inputs (trace, cluster), the gputwin version and core, the UTC date and the command line."""

    trace: InputFile
    cluster: InputFile
    version: str
    core: str  # "compiled core" or "pure Python core" (gputwin.cli.version.core_flavour)
    date: str  # ISO 8601, UTC, seconds
    command: str  # shell-quoted, as typed

    def to_json(self) -> dict[str, Any]:
        return {"trace": _file_json(self.trace), "cluster": _file_json(self.cluster), "version": self.version,
                "core": self.core, "date": self.date, "command": self.command}  # fmt: skip

    def lines(self) -> list[tuple[str, str]]:
        """(label, text) pairs, in the order a report header shows them."""
        return [
            ("trace", f"{self.trace.path} (sha256 {self.trace.sha256}, {self.trace.bytes:,} bytes)"),
            ("cluster", f"{self.cluster.path} (sha256 {self.cluster.sha256}, {self.cluster.bytes:,} bytes)"),
            ("gputwin", f"{self.version} ({self.core})"),
            ("date", self.date),
            ("command", self.command),
        ]


def _file_json(f: InputFile) -> dict[str, Any]:
    return {"path": f.path, "sha256": f.sha256, "bytes": f.bytes}


def sha256_file(path: Path) -> tuple[str, int]:
    """The file's sha256 (hex) and size, read in BLOCK-sized pieces."""
    digest, size = hashlib.sha256(), 0
    with open(path, "rb") as fh:
        while block := fh.read(BLOCK):
            digest.update(block)
            size += len(block)
    return digest.hexdigest(), size


def input_file(path: Path) -> InputFile:
    """`path` and its hash; a pipe or device (read once, already) or a file gone since is said so, not
    re-read: the report is still written."""
    try:
        if not path.is_file():
            return InputFile(str(path), "unavailable: not a regular file", 0)
        digest, size = sha256_file(path)
    except OSError as exc:
        return InputFile(str(path), f"unavailable: {exc.strerror or exc}", 0)
    return InputFile(str(path), digest, size)


def provenance(trace: Path, cluster: Path, core: str, now: datetime, argv: Sequence[str]) -> Provenance:
    """The provenance of a run on `trace` and `cluster` at `now` (made UTC), started as `argv`."""
    date = now.astimezone(timezone.utc).replace(microsecond=0).isoformat().replace("+00:00", "Z")
    return Provenance(input_file(trace), input_file(cluster), __version__, core, date, shlex.join(argv))


__all__ = ["InputFile", "Provenance", "provenance", "sha256_file"]
