"""JSON merge patch (RFC 7386), the patch flavour of `kubectl patch --type merge` and of kopf.

`merge_patch(target, patch)` applies a patch; `merge_diff(old, new)` computes the smallest patch
that turns `old` into `new`. Both stores (the operator's in-memory one and the emulator's files)
and the controller's status writes use them, so "patch the status" means the same everywhere:
maps merge key by key, `None` deletes a key, anything else (lists included) is replaced whole.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any


def merge_patch(target: Mapping[str, Any] | None, patch: Mapping[str, Any]) -> dict[str, Any]:
    """A new dict: `target` with `patch` merged in (neither argument is changed)."""
    out: dict[str, Any] = copy.deepcopy(dict(target)) if target else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping):
            current = out.get(key)
            out[key] = merge_patch(current if isinstance(current, Mapping) else None, value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def merge_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> dict[str, Any]:
    """The merge patch from `old` to `new`; empty when they are equal."""
    old = old or {}
    patch: dict[str, Any] = {key: None for key in old if key not in new}
    for key, value in new.items():
        before = old.get(key)
        if isinstance(value, Mapping) and isinstance(before, Mapping):
            inner = merge_diff(before, value)
            if inner:
                patch[key] = inner
        elif key not in old or before != value:
            patch[key] = copy.deepcopy(value)
    return patch


__all__ = ["merge_diff", "merge_patch"]
