"""A partition's queue without fairness: its (key, order) entries kept sorted, compiled.

What `PartitionState.order` asked of `sortedcontainers.SortedList` - add, a sorted batch, remove,
the head, the first few hundred as a slice (backfill's window), iteration - in the same order, as
lists of at most `2 * LOAD` entries with each list's last entry beside them (bisected to find the
list an entry belongs in), as SortedList keeps them. SortedList is pure Python: compiled, its
calls were about a sixth of a forecast's replay (issue 15); here the core's own compiled code
does them, and the head and the window are C-level list reads of the first list.
`changes` counts every change, so a reader can tell "not changed since" without a copy to compare.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from typing import Iterable, Iterator, overload

from gputwin.core.policies import Key

Entry = tuple[Key, int]  # (the job's key, its order): unique, so no two entries compare equal
LOAD = 1000  # a list is split at twice this (SortedList's default load)
NEAR = 32  # `remove` looks through this many entries at the head before bisecting


class SortedQueue:
    """Entries in sorted order (see the module)."""

    __slots__ = ("_lists", "_maxes", "_len", "changes")

    def __init__(self, entries: Iterable[Entry] = ()) -> None:
        self._lists: list[list[Entry]] = []
        self._maxes: list[Entry] = []  # each list's last (largest) entry
        self._len = 0
        # Entries added or taken out so far: unchanged, the queue holds the same entries (the
        # backfill window's kept bounds hold without slicing the window again, `reservation`).
        self.changes = 0
        self.update(entries)

    def __len__(self) -> int:
        return self._len

    def __bool__(self) -> bool:
        return self._len > 0

    def __iter__(self) -> Iterator[Entry]:
        for entries in self._lists:
            yield from entries

    def __contains__(self, entry: Entry) -> bool:
        maxes = self._maxes
        k = bisect_left(maxes, entry)
        if k == len(maxes):
            return False
        entries = self._lists[k]
        i = bisect_left(entries, entry)
        return entries[i] == entry

    @overload
    def __getitem__(self, index: int) -> Entry: ...

    @overload
    def __getitem__(self, index: slice) -> list[Entry]: ...

    def __getitem__(self, index: int | slice) -> Entry | list[Entry]:
        if isinstance(index, slice):
            return self._slice(index)
        if index < 0:
            index += self._len
        if not 0 <= index < self._len:
            raise IndexError("SortedQueue index out of range")
        for entries in self._lists:
            if index < len(entries):
                return entries[index]
            index -= len(entries)
        raise IndexError("SortedQueue index out of range")  # not reached: the length says so

    def head_order(self) -> int:
        """The first entry's order (IndexError if empty): the strict loop's head, without the
        generic `[0]` (an int-or-slice argument, boxed, and a tuple to unpack)."""
        return self._lists[0][0][1]

    def _slice(self, index: slice) -> list[Entry]:
        start, stop, step = index.indices(self._len)
        if step != 1:
            return list(self)[start:stop:step]
        return self.between(start, stop)

    def between(self, start: int, stop: int) -> list[Entry]:
        """`self[start:stop]` for 0 <= start <= stop (backfill's window), called directly."""
        lists = self._lists
        if lists and stop <= len(lists[0]):  # the usual case: the head's list holds it all
            return lists[0][start:stop]
        out: list[Entry] = []
        for entries in lists:
            if stop <= 0:
                break
            if start < len(entries):
                out += entries[max(start, 0):stop]
            start -= len(entries)
            stop -= len(entries)
        return out

    def add(self, entry: Entry) -> None:
        maxes, lists = self._maxes, self._lists
        if not maxes:
            lists.append([entry])
            maxes.append(entry)
        else:
            k = bisect_right(maxes, entry)
            if k == len(maxes):  # after every entry: the last list's end
                k -= 1
                lists[k].append(entry)
                maxes[k] = entry
            else:
                insort(lists[k], entry)
            if len(lists[k]) > 2 * LOAD:
                self._split(k)
        self._len += 1
        self.changes += 1

    def update(self, entries: Iterable[Entry], ordered: bool = False) -> None:
        """Add every one of `entries`; a batch as large as a quarter of the queue is merged in
        one sort (a sorted batch into an empty queue: one pass), as SortedList.update does.
        `ordered`: `entries` is a list already sorted (not sorted again)."""
        values = entries if ordered and isinstance(entries, list) else sorted(entries)
        if not values:
            return
        if len(values) * 4 >= self._len:
            self.changes += 1
            merged = values if not self._len else sorted([*self, *values])
            self._lists = [merged[i:i + LOAD] for i in range(0, len(merged), LOAD)]
            self._maxes = [chunk[-1] for chunk in self._lists]
            self._len = len(merged)
            return
        for entry in values:
            self.add(entry)

    def _split(self, k: int) -> None:
        entries = self._lists[k]
        self._lists[k + 1:k + 1] = [entries[LOAD:]]
        del entries[LOAD:]
        self._maxes[k:k + 1] = [entries[-1], self._lists[k + 1][-1]]

    def remove(self, entry: Entry) -> None:
        """Take `entry` out; ValueError if it is not queued. Backfill takes its jobs from just after
        the head: the first `NEAR` entries are looked through by order (unique) before bisecting,
        which compares whole entries (a key tuple each) at ~600 instructions a comparison."""
        lists, order = self._lists, entry[1]
        if lists:
            first = lists[0]
            for i in range(min(len(first), NEAR)):
                if first[i][1] == order:
                    if first[i] != entry:
                        break  # the same order with another key: not queued (the bisect says so)
                    self._drop(0, i)
                    return
        maxes = self._maxes
        k = bisect_left(maxes, entry)
        if k == len(maxes):
            raise ValueError(f"{entry!r} not in SortedQueue")
        entries = self._lists[k]
        i = bisect_left(entries, entry)
        if entries[i] != entry:
            raise ValueError(f"{entry!r} not in SortedQueue")
        self._drop(k, i)

    def pop(self, index: int = -1) -> Entry:
        """Take the entry at `index` out (the head: 0) and return it."""
        lists = self._lists
        if not self._len:
            raise IndexError("pop from an empty SortedQueue")
        if index == 0:
            k, i = 0, 0
        elif index == -1:
            k = len(lists) - 1
            i = len(lists[k]) - 1
        else:
            if index < 0:
                index += self._len
            if not 0 <= index < self._len:
                raise IndexError("SortedQueue index out of range")
            k = 0
            while index >= len(lists[k]):
                index -= len(lists[k])
                k += 1
            i = index
        entry = lists[k][i]
        self._drop(k, i)
        return entry

    def pop_head(self) -> int:
        """`pop(0)[1]`: take the head out and return its order (IndexError if empty), in one call (the
        strict loop takes each job it starts so)."""
        lists = self._lists
        first = lists[0]
        entry = first.pop(0)
        self._len -= 1
        self.changes += 1
        if not first:  # (else its last entry, `_maxes[0]`, stays)
            del lists[0]
            del self._maxes[0]
        return entry[1]

    def _drop(self, k: int, i: int) -> None:
        entries = self._lists[k]
        entries.pop(i)  # compiled, a direct list op; `del entries[i]` is the generic one
        self._len -= 1
        self.changes += 1
        if not entries:
            del self._lists[k]
            del self._maxes[k]
        elif i == len(entries):
            self._maxes[k] = entries[-1]

    def __repr__(self) -> str:
        return f"SortedQueue({list(self)!r})"


__all__ = ["Entry", "LOAD", "SortedQueue"]
