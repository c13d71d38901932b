"""The base of the core's frozen dataclasses: pickled through their constructor.

Values cross process boundaries (tune's and compare's worker pools, a forecast's samples). Compiled
by mypyc, a class pickles by setting its fields one by one on a blank instance, which a frozen
dataclass refuses (`FrozenInstanceError` in the worker, a broken pool in the parent); interpreted,
the dataclass's own slots pickling works. Rebuilding through the constructor works in both builds
(and runs the class's own checks again).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any


def rebuild(cls: type[Any], values: tuple[object, ...]) -> object:
    """The instance of `cls` made from its init fields' values, in order (the unpickling side)."""
    return cls(*values)


class Frozen:
    """Base class of a frozen dataclass whose instances must pickle in both builds."""

    __slots__ = ()  # a slots dataclass below stays without a __dict__

    def __reduce__(self) -> tuple[object, ...]:
        values = tuple([getattr(self, f.name) for f in fields(self) if f.init])  # type: ignore[arg-type]
        return (rebuild, (type(self), values))
