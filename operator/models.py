"""The learned run-time model a cluster's SchedulingPolicies name, as the scheduler's estimator.

A policy names a model (`spec.estimator: {type: learned, model: NAME}`); the operator reads it
from its model folder only (`GPUTWIN_MODEL_DIR`, see gputwin.estimators.modeldir for the sandbox)
and hands the scheduler a factory of estimators starting from it. A model that cannot be used
(off, missing, escaping the folder, corrupt) is a one-line reason the cluster is not ready, like
any other invalid declaration: the operator does not fall back to another estimator silently.
Read models are kept per (folder, file times and sizes): a reconcile pass re-reads only a changed one.
A model made unusable after the scheduler started (the policy edited to name another) leaves the
running scheduler as it was, the last valid configuration, and says why on the policy's status.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gputwin.api.estimator import cluster_model
from gputwin.api.v1alpha1 import GPUPartition, SchedulingPolicy
from gputwin.core.scheduler import SchedulerOptions
from gputwin.errors import InputError
from gputwin.estimators.modeldir import FILES, locate
from gputwin.operator.cluster import ClusterView, Issue

_CACHE: dict[tuple[Path, tuple[tuple[int, int], ...]], Any] = {}


class ModelUnusable(InputError):
    """Why the named model cannot drive the scheduler (the cluster's blocker)."""


def with_model_issue(view: ClusterView, problem: ModelUnusable) -> ClusterView:
    """`view` without a spec, blocked by `problem`, which also becomes the Ready=False reason of the
    SchedulingPolicy it names (`SchedulingPolicy/NAME: field: reason`): an admin's edit to an
    absent model shows on the policy, while the scheduler already running keeps the last valid one."""
    issues = dict(view.issues)
    found = re.match(r"SchedulingPolicy/([^:]+): (.+)", str(problem))
    if found is not None:
        key = ("SchedulingPolicy", found.group(1))
        issues[key] = (*issues.get(key, ()), Issue("ModelUnusable", found.group(2)))
    return dataclasses.replace(view, spec=None, blocker=str(problem), issues=issues)


def estimator_options(
    models: Iterable[object], base: Path | None, options: SchedulerOptions
) -> SchedulerOptions:
    """`options` with the estimator the used policies among `models` (parsed cluster objects) name."""
    models = list(models)
    used = {m.spec.policy for m in models if isinstance(m, GPUPartition)}
    uses = [(m.metadata.name, m.spec.estimator) for m in models
            if isinstance(m, SchedulingPolicy) and m.metadata.name in used]  # fmt: skip
    try:
        named = cluster_model(uses)
        if named is None:
            return options
        policy, name = named
        saved = _read(locate(name, base, f"SchedulingPolicy/{policy}: spec.estimator.model"))
    except (InputError, ValueError) as exc:
        raise ModelUnusable(str(exc)) from None
    return dataclasses.replace(options, estimator=saved.estimator)


def _read(folder: Path) -> Any:
    from gputwin.estimators.saved import read  # LightGBM loads only when a policy names a model

    stamp = tuple((int(s.st_mtime_ns), int(s.st_size)) for s in ((folder / f).stat() for f in FILES))
    key = (folder, stamp)
    if key not in _CACHE:
        _CACHE.clear()  # one live model at a time: bounded memory
        _CACHE[key] = read(folder)
    return _CACHE[key]
