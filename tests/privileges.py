"""Make file mode bits bind root too, for the length of a `with` block.

Root writes anywhere, so a test of "the output folder is read-only" means nothing as root. Dropping
to `nobody` (seteuid) made mode bits bite, but `nobody` may not read root's own site-packages under
`/root/.pyenv` (CI's interpreter): optuna reads its migration scripts from there mid-command. So root
stays root and only gives up, from its effective set, the two capabilities that override mode bits
(CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH); they stay permitted and come back at the end. Capabilities
are per thread: the command must run in this thread (click's CliRunner does).
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterator
from contextlib import contextmanager

_CAPABILITY_VERSION_3 = 0x20080522
_OVERRIDES = (1 << 1) | (1 << 2)  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH


class _Header(ctypes.Structure):
    _fields_ = [("version", ctypes.c_uint32), ("pid", ctypes.c_int)]


class _Data(ctypes.Structure):
    _fields_ = [("effective", ctypes.c_uint32), ("permitted", ctypes.c_uint32), ("inheritable", ctypes.c_uint32)]


def _capabilities(call: str, data: ctypes.Array[_Data]) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    header = _Header(_CAPABILITY_VERSION_3, 0)
    if getattr(libc, call)(ctypes.byref(header), data) != 0:
        raise OSError(ctypes.get_errno(), f"{call} failed")


@contextmanager
def mode_bits_bind() -> Iterator[None]:
    """Within the block, this thread obeys file mode bits even as root."""
    if os.geteuid() != 0:
        yield
        return
    data = (_Data * 2)()
    _capabilities("capget", data)
    saved = data[0].effective
    data[0].effective = saved & ~_OVERRIDES
    _capabilities("capset", data)
    try:
        yield
    finally:
        data[0].effective = saved
        _capabilities("capset", data)
