"""Status writing shared by the reconcilers: times, conditions, and patches that change only what changed.

Every status goes through its pydantic model (`gputwin.api.status`), so what the operator writes
always fits the CRD schema. A `StatusBook` collects the statuses one reconcile pass wants,
starting from what the store holds, and writes each object at most once, as a merge patch of the
difference: an unchanged status is never written (a write would wake kopf's watch for nothing).

Times are epoch seconds everywhere inside; objects carry RFC 3339 strings (`2026-01-01T00:00:00Z`,
milliseconds only when the time has a fraction), derived from the `now` the caller passes.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

from pydantic import ValidationError

from gputwin.api.bodies import Body, Obj
from gputwin.api.mergepatch import merge_diff
from gputwin.api.status import Condition, StatusBase, rfc3339
from gputwin.api.status import epoch_seconds as epoch
from gputwin.operator.store import Store

S = TypeVar("S", bound=StatusBase)


def condition(
    previous: Sequence[Condition],
    type: str,
    status: str,
    reason: str,
    message: str,
    now: float,
    generation: int | None = None,
) -> list[Condition]:
    """`previous` with condition `type` set; its transition time moves only when `status` changes."""
    old = next((c for c in previous if c.type == type), None)
    since = old.last_transition_time if old is not None and old.status == status else rfc3339(now)
    new = Condition.model_validate(
        {
            "type": type,
            "status": status,
            "reason": reason,
            "message": message[:32768],
            "last_transition_time": since,
            "observed_generation": generation,
        }
    )
    return [new if c.type == type else c for c in previous] if old else [*previous, new]


def updated(status: S, **changes: Any) -> S:
    """A validated copy of `status` with `changes` (snake_case field names)."""
    return type(status).model_validate({**status.model_dump(), **changes})


def dump(status: StatusBase) -> Obj:
    """The status as the object carries it: camelCase, unset fields left out."""
    return status.model_dump(by_alias=True, exclude_none=True, mode="json")


def round_seconds(value: float) -> float:
    """Seconds as statuses show them: milliseconds, and no float noise (4140.000000000001)."""
    return round(value, 3) if math.isfinite(value) else 0.0


_Key = tuple[str | None, str]


class StatusBook(Generic[S]):
    """The statuses of one kind that a reconcile pass wants, written together by `flush`."""

    def __init__(self, store: Store, kind: str, model: type[S]) -> None:
        self.store, self.kind, self.model = store, kind, model
        self._old: dict[_Key, Obj | None] = {}
        self._generation: dict[_Key, int | None] = {}
        self._new: dict[_Key, S] = {}

    def prime(self, obj: Obj) -> None:
        """Remember an object's stored status (saves a `get` when it is first touched).

        Prime only with objects just read from the store: the diff is taken against them.
        """
        body = Body(obj)
        key = (body.namespace or None, body.name)
        if key not in self._old:
            self._old[key] = obj.get("status")  # as stored (None if none): the diff's base
            self._generation[key] = body.generation

    def generation(self, namespace: str | None, name: str) -> int | None:
        self._load((namespace, name))
        return self._generation.get((namespace, name))

    def get(self, namespace: str | None, name: str) -> S:
        """The status as this pass has it so far (the stored one at first; default if unreadable)."""
        key = (namespace, name)
        if key in self._new:
            return self._new[key]
        self._load(key)
        try:
            return self.model.model_validate(self._old[key] or {})
        except ValidationError:
            return self.model()  # written by an incompatible version: start over

    def set(self, namespace: str | None, name: str, status: S) -> None:
        self._load((namespace, name))
        self._new[(namespace, name)] = status

    def flush(self) -> int:
        """Write every status that differs from the stored one; the number written.

        Afterwards the book forgets what it read, so the next pass starts from the store again.
        """
        written = 0
        for key, status in self._new.items():
            old = self._old.get(key)
            patch = merge_diff(old, dump(status))
            if not patch:
                continue
            try:
                self.store.patch_status(self.kind, key[0], key[1], patch)
            except LookupError:
                continue  # deleted since it was read: nothing to report on
            written += 1
        self._new.clear()
        self._old.clear()
        self._generation.clear()
        return written

    def _load(self, key: _Key) -> None:
        if key not in self._old:
            obj = self.store.get(self.kind, key[0], key[1])
            self._old[key] = obj.get("status") if obj else None
            self._generation[key] = Body(obj).generation


__all__ = ["StatusBook", "condition", "dump", "epoch", "rfc3339", "round_seconds", "updated"]
