"""The base of every error that is a user's mistake rather than a bug: the CLI's one contract.

A command catches `InputError` (and `OSError`) and prints it as `error: …` lines with exit status
2. It lives here, importing nothing, so that the CLI can catch the errors of heavy modules (the
SLURM adapter, the sweep executors) without importing them: a module never imported cannot raise.
"""

from __future__ import annotations


class InputError(Exception):
    """What the user gave (a file, an option, a folder) cannot be used; the message says why."""

    def messages(self) -> list[str]:
        """One text per problem, each printed on its own `error:` line (most errors have one)."""
        return [str(self)]
