"""What a user's mistake looks like on stderr: `error: WHERE: FIELD: reason`, one line per problem.

Every command group turns the errors it expects into these lines and exit status 2. A ClusterError
carries every problem of a manifest at once: each gets its own `error:` line, so a script reading
stderr (or a person) sees one problem per line and none hides behind another's prefix. Any other
error is one line, its whitespace (a reader's newline, a tab) folded into single spaces.
"""

from __future__ import annotations

import click

from gputwin.errors import InputError


def error_lines(exc: Exception) -> list[str]:
    """The `error: …` lines for `exc`."""
    if isinstance(exc, InputError):
        texts = exc.messages()  # a ClusterError has one per problem
    elif isinstance(exc, OSError):
        # Imported here: the group imports this module, and --help should not pay for tempfile & co.
        from gputwin.sim.atomic import describe

        texts = [describe(exc)]
    else:
        texts = [str(exc)]
    return [f"error: {' '.join(text.split())}" for text in texts]


def report(exc: Exception) -> None:
    """Print `exc` as its error lines on stderr."""
    for line in error_lines(exc):
        click.echo(line, err=True)
