"""Click parameter types the commands share, stricter than click's own where a number must be finite.

`click.FloatRange` takes "nan" (every comparison with NaN is false, so no bound refuses it) and, with
no upper bound, "inf": a NaN start latency then turns every forecast into NaN, an infinite timeout
waits forever. `FiniteRange` refuses both with click's usual usage error.
"""

from __future__ import annotations

import math
from typing import Any

import click


class FiniteRange(click.FloatRange):
    """A `click.FloatRange` of finite numbers only."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number.", param, ctx)
        return number
