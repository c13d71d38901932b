"""The SLURM backend: job history in (`history`, `rest`, `ctld_log`), policy out (`render`,
`tables`, `topology_files`, `apply`), and the live cluster's hardware (`live`).

History transports: the `sacct` CLI (`-P` and `--json`, parsed by `gputwin.adapters.traces`) and
slurmrestd's `/slurmdb/v0.0.NN/jobs` over its unix socket; pyslurm is not used (see `pyslurm_support`). Every user-supplied value is checked
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
