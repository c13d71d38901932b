"""Compact columns for per-job results: narrow integer arrays, interned strings, sorted runs.

What a 10M-job replay keeps per job decides whether it fits in memory (issue 17: <= 300 bytes a
job resident). A Python int or float in a list costs 8 bytes of pointer plus, unless small, a
24-32 byte object; a `str` costs ~50 bytes plus its text. Here:
* `widened`: integer arrays start at one or two bytes an item and are copied to the next wider
  type code the first time a value does not fit (a trace's GPU counts, node indices and
  preemption counts are small; nothing is lost when one is not).
* `Blob`: strings that do not repeat (job ids) as UTF-8 in one buffer (the repeated ones, users
  and names, are codes into a table: `gputwin.sim.finished.SpecColumns`).
* `SortedRuns`: percentiles of millions of floats without a list of float objects: the values
  are sorted in runs of `RUN` (one run's list at a time) kept as `array('d')` (the last one as
  the list itself), and the k-th smallest is found by bisection over the runs (the same value `sorted(values)[k]` gives).
"""

from __future__ import annotations

import heapq
import itertools
import math
import struct
from array import array
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import TypeVar, overload

# The next wider type code; 'q' is the widest (a value beyond 64 bits raises OverflowError).
_WIDER = {"B": "H", "H": "I", "I": "q", "b": "h", "h": "i", "i": "q"}


def widened(column: array[int], value: int) -> array[int]:
    """A copy of `column` in the narrowest wider type code that holds `value`, with it appended."""
    code: str = column.typecode
    while code in _WIDER:
        code = _WIDER[code]
        wider: array[int] = array(code, column)
        try:
            wider.append(value)
        except OverflowError:
            continue  # e.g. a negative value in an unsigned column: only a signed code holds it
        return wider
    raise OverflowError(f"{value} does not fit a 64-bit integer column")


def extended(column: array[int], values: Sequence[int]) -> array[int]:
    """`column` with `values` appended, or a wider copy where one does not fit. Packed by `struct`
    in one call: an array's own `append`/`extend` parses each item as a call's arguments, ten
    times the instructions (a 10M-job replay stores ~160M items)."""
    try:
        # A one-byte column from `bytes`, which reads a list of small ints without parsing each
        # as call arguments: a fifth of `struct`'s instructions.
        packed = bytes(values) if column.typecode == "B" else struct.pack(f"{len(values)}{column.typecode}", *values)
        column.frombytes(packed)
        return column
    except (struct.error, ValueError, TypeError):
        pass  # a value out of the column's range (or not an integer): item by item, widening
    for value in values:
        try:
            column.append(value)
        except OverflowError:
            column = widened(column, value)
    return column


def extend_floats(column: array[float], values: Sequence[float]) -> None:
    """Append `values` to a `'d'` column, packed in one call (see `extended`)."""
    column.frombytes(struct.pack(f"{len(values)}d", *values))


class Blob:
    """Strings that rarely repeat (job ids) as UTF-8 in one buffer: string i is
    `data[ends[i-1]:ends[i]]` (~len + 4 bytes each instead of ~57 + len for a `str` in a list).
    `surrogatepass`: any `str` a reader produced round-trips, lone surrogates included."""

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends: array[int] = array("I")

    def append(self, value: str) -> None:
        self.data += value.encode("utf-8", "surrogatepass")
        try:
            self.ends.append(len(self.data))
        except OverflowError:
            self.ends = widened(self.ends, len(self.data))

    def __getitem__(self, i: int) -> str:
        lo = self.ends[i - 1] if i else 0
        return self.data[lo : self.ends[i]].decode("utf-8", "surrogatepass")

    def __len__(self) -> int:
        return len(self.ends)


RUN = 1 << 20  # values per sorted run: one run's list of float objects (~32 MB) at a time
_SIGN = 0x7FFF_FFFF_FFFF_FFFF
T = TypeVar("T")


def _key(x: float) -> int:
    """An int ordered as the floats are (-0.0 just before 0.0): the IEEE bits, negatives flipped."""
    bits = int(struct.unpack("<q", struct.pack("<d", x))[0])
    return bits if bits >= 0 else bits ^ _SIGN


def _value(key: int) -> float:
    (x,) = struct.unpack("<d", struct.pack("<q", key if key >= 0 else key ^ _SIGN))
    return float(x)


class SortedRuns(Sequence[float]):
    """`values` read as if sorted (`runs[k]` the k-th smallest), held as sorted `array('d')` runs
    (the last run as the list `sorted` made)."""

    def __init__(self, values: Iterable[float]) -> None:
        it = iter(values)
        self.runs: list[Sequence[float]] = []
        run = sorted(itertools.islice(it, RUN))
        while run:
            ahead = list(itertools.islice(it, 1))
            if not ahead:  # the last run (most often the only one) stays a list: packing would only copy it
                self.runs.append(run)
                break
            packed: array[float] = array("d")
            extend_floats(packed, run)  # not array("d", run): that parses each item as call arguments
            self.runs.append(packed)
            run = sorted(itertools.chain(ahead, itertools.islice(it, RUN - 1)))
        self._n = sum(map(len, self.runs))

    def __len__(self) -> int:
        return self._n

    def total(self) -> float:
        """`math.fsum` of the values (exactly rounded, so the order of the runs does not matter)."""
        return math.fsum(itertools.chain.from_iterable(self.runs))

    @overload
    def __getitem__(self, k: int) -> float: ...
    @overload
    def __getitem__(self, k: slice) -> list[float]: ...
    def __getitem__(self, k: int | slice) -> float | list[float]:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(self._n))]
        if k < 0:
            k += self._n
        if not 0 <= k < self._n:
            raise IndexError("SortedRuns index out of range")
        runs = self.runs
        if len(runs) == 1:
            return runs[0][k]
        # The smallest key whose value has more than k values <= it is the k-th smallest's.
        lo, hi = min(_key(r[0]) for r in runs), max(_key(r[-1]) for r in runs)
        while lo < hi:
            mid = (lo + hi) // 2
            x = _value(mid)
            if sum(bisect_right(r, x) for r in runs) > k:
                hi = mid
            else:
                lo = mid + 1
        return _value(lo)

    def __iter__(self) -> Iterator[float]:
        return heapq.merge(*self.runs)


def picked(column: Sequence[T], at: Sequence[int], chunk: int = 1 << 16) -> Iterator[T]:
    """`column[i]` for each i of `at`, in order. Read by `itemgetter` a chunk at a time: one C call
    per chunk (`map(column.__getitem__, at)` makes a method-wrapper call an item, ~5x the
    instructions), and at most `chunk` values are held at once, whatever the log's length. A
    generator function, not a generator expression: mypyc compiles this module and would build
    an expression's whole list."""
    for lo in range(0, len(at), chunk):
        p = at[lo : lo + chunk]
        # (itemgetter of one item gives the item, not a tuple)
        yield from itemgetter(*p)(column) if len(p) > 1 else (column[p[0]],)


__all__ = ["RUN", "Blob", "SortedRuns", "picked", "widened"]
