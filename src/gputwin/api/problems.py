"""How the API layer reports user mistakes: located `Problem`s, gathered into one `ClusterError`.

A problem names where it is (`document`: `FILE:docN` for a YAML document, `FILE:LINE` for a CSV
row, `FILE` for the whole input; the operator may use `Kind/name`), the field inside it as a
dotted path with `[i]` indexes (`spec.nodeGroups[0].nodes`) and a reason. Checks return lists of
problems rather than raising on the first, so a user fixes a manifest in one round and the
operator can turn each problem into a status condition.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gputwin.errors import InputError

if TYPE_CHECKING:  # an annotation only: the CSV cluster reader reports problems without pydantic
    from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class Problem:
    """One thing wrong with the input; `str()` is `DOCUMENT: FIELD: REASON`."""

    document: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.document}: {self.field}: {self.reason}"


class ClusterError(InputError, ValueError):
    """The declared cluster cannot be loaded; `str()` is one `FILE[:docN]: field: reason` per line."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))

    def messages(self) -> list[str]:
        return [str(problem) for problem in self.problems] or [str(self)]

    def __reduce__(self) -> tuple[type[ClusterError], tuple[tuple[Problem, ...]]]:
        # The default pickling would pass the message string to __init__; keep the problems.
        return (type(self), (self.problems,))


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def field_path(loc: Iterable[int | str]) -> str:
    """`("spec", "nodeGroups", 0, "nodes")` -> `spec.nodeGroups[0].nodes`; odd keys get `["…"]`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.fullmatch(part):
            out += f".{part}" if out else part
        else:
            # Map keys such as label names (gputwin.io/pool) would read as nested fields.
            # JSON-quoted: a key holding a quote, newline or separator stays one readable line.
            out += f"[{json.dumps(part if len(part) <= 80 else part[:80] + '...')}]"
    return out or "document"


def validation_problems(document: str, exc: ValidationError) -> list[Problem]:
    """Every pydantic error of one document, translated to a located problem."""
    return [Problem(document, field_path(err["loc"]), _reason(err["msg"])) for err in exc.errors()]


def _reason(msg: str) -> str:
    # Custom validators raising ValueError get this prefix from pydantic; it adds nothing.
    return msg.removeprefix("Value error, ")
