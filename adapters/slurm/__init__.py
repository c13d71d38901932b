"""The SLURM backend: job history from `sacct` on a live cluster (policy rendering and apply to come).

Transports: the `sacct` CLI (`-P` and `--json`, parsed by `gputwin.adapters.traces`). slurmrestd is
not wired in yet; pyslurm is not used (see `pyslurm_support`). Every user-supplied value is checked
against a strict pattern (`checks`) before it reaches a command line; commands run without a shell.
"""

from .checks import check_name, check_names, check_state, check_time
from .commands import run_command, slurm_version
from .errors import SlurmCommandError, SlurmError, SlurmInputError
from .history import (
    NAME_BAR,
    SACCT_COLUMNS,
    TRANSPORTS,
    mend_job_names,
    parse_sacct_output,
    sacct_command,
    sacct_history,
    write_history,
)
from .pyslurm_support import pyslurm_status

__all__ = [
    "NAME_BAR",
    "SACCT_COLUMNS",
    "TRANSPORTS",
    "SlurmCommandError",
    "SlurmError",
    "SlurmInputError",
    "check_name",
    "check_names",
    "check_state",
    "check_time",
    "mend_job_names",
    "parse_sacct_output",
    "pyslurm_status",
    "run_command",
    "sacct_command",
    "sacct_history",
    "slurm_version",
    "write_history",
]
