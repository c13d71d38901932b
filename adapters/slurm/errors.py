"""The errors the SLURM adapter raises; `str(e)` is always one line a CLI can print as is.

- `SlurmInputError`: a value from the user (a partition or state name, a time) was refused by a
  strict pattern before any command ran.
- `SlurmCommandError`: a SLURM command could not run, timed out, or exited non-zero; the message
  carries the command name, exit status and the most telling line of its stderr.
"""

from __future__ import annotations

from gputwin.errors import InputError


class SlurmError(InputError):
    """Anything the SLURM adapter reports to a user."""


class SlurmInputError(SlurmError, ValueError):
    """A user-supplied value refused before it could reach a command line or a config file."""


class SlurmCommandError(SlurmError):
    """A SLURM command failed: not installed, timed out, or a non-zero exit status."""
