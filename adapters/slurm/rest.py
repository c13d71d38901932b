"""slurmrestd as a history transport: ``GET /slurmdb/v0.0.NN/jobs`` over its unix socket.

The test cluster runs ``slurmrestd -a rest_auth/local unix:$RUN/restd.sock`` (scripts/slurm/start.sh,
when the Debian package ``slurmrestd`` is installed) and exports ``GPUTWIN_SLURMRESTD=unix:PATH``;
``rest_auth/local`` authenticates the caller by the socket's peer uid, so no token is involved.

The API version is not guessed: ``GET /openapi/v3`` lists the daemon's paths and the newest
``/slurmdb/v0.0.NN/jobs`` is used (22.05 serves v0.0.36-38; 24.11 v0.0.40-42 per SLURM's docs).
Its job objects are those of ``sacct --json`` (same ``openapi/dbv0.0.NN`` plugin), so the
``sacct-json`` trace reader parses them. Query values are checked by `checks` before they are
URL-encoded; times go as ``YYYY-MM-DDTHH:MM:SS`` or ``now-N<unit>``, read by slurmrestd in its
own zone (start.sh starts it with ``TZ=UTC``, like every sacct call here).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlencode

from .errors import SlurmCommandError, SlurmInputError

ENV = "GPUTWIN_SLURMRESTD"
_JOBS_PATH = re.compile(r"^/slurmdb/v0\.0\.(\d+)/jobs$")
DEFAULT_TIMEOUT = 60.0


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a unix socket (slurmrestd's ``unix:`` listener)."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("slurmrestd", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        sock.connect(self._path)
        self.sock = sock


def socket_path(address: str | None = None) -> str:
    """The socket of ``unix:PATH`` (given, else $GPUTWIN_SLURMRESTD); one-line error otherwise."""
    address = address if address is not None else os.environ.get(ENV, "")
    if not address:
        raise SlurmInputError(f"slurmrestd: {ENV} is not set (unix:PATH of a running slurmrestd)")
    if not address.startswith("unix:") or "\n" in address:
        raise SlurmInputError(f"slurmrestd: want unix:PATH, got {address!r:.80}")
    return address[len("unix:") :]


def get_json(path: str, params: Mapping[str, str] | None = None, *, address: str | None = None,
             timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any]:  # fmt: skip
    """GET `path` (with URL-encoded `params`) and return the decoded JSON object."""
    target = path + ("?" + urlencode(params) if params else "")
    connection = _UnixConnection(socket_path(address), timeout)
    try:
        connection.request("GET", target, headers={"Accept": "application/json"})
        response = connection.getresponse()
        body = response.read()
    except OSError as exc:
        raise SlurmCommandError(f"slurmrestd: {path}: {exc}") from None
    finally:
        connection.close()
    try:
        document = json.loads(body)
    except json.JSONDecodeError:
        raise SlurmCommandError(
            f"slurmrestd: {path}: HTTP {response.status}, no JSON in the answer"
        ) from None
    if not isinstance(document, dict):
        raise SlurmCommandError(f"slurmrestd: {path}: HTTP {response.status}, not a JSON object")
    return document


def jobs_path(address: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The newest ``/slurmdb/v0.0.NN/jobs`` the daemon serves (from ``GET /openapi/v3``)."""
    paths = get_json("/openapi/v3", address=address, timeout=timeout).get("paths", {})
    found: list[tuple[int, str]] = [
        (int(m.group(1)), str(p)) for p in paths if isinstance(p, str) and (m := _JOBS_PATH.match(p))
    ]
    if not found:
        raise SlurmCommandError("slurmrestd: /openapi/v3 lists no /slurmdb/v0.0.NN/jobs path")
    return max(found)[1]


def jobs_text(params: Mapping[str, str], address: str | None = None, timeout: float = DEFAULT_TIMEOUT) -> str:
    """The jobs answer as text, for the sacct-json reader (its errors are checked there)."""
    return json.dumps(get_json(jobs_path(address, timeout), params, address=address, timeout=timeout))
