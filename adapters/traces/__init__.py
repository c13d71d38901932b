"""Streaming readers for GPU job traces (sacct, Helios, Alibaba, PAI, SWF, Philly) and writers (SWF, Helios).

Every reader turns one record at a time into a `gputwin.core.model.JobSpec`, reports bad input as
a `TraceError` located by file, line (or JSON path) and field, and counts what it leaves out
(job steps, never-started jobs, zero-GPU jobs, ...) by reason. Each format's decisions are in its
module's docstring; clocks and ordering in `reader`'s; the writers in `writers`'.
"""

from .errors import TraceError
from .helios import write_helios_csv
from .reader import TraceResult, iter_jobs, read_trace
from .sniff import FORMATS, sniff_format

__all__ = [
    "FORMATS",
    "TraceError",
    "TraceResult",
    "iter_jobs",
    "read_trace",
    "sniff_format",
    "write_helios_csv",
]
