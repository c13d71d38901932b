"""A model `gputwin estimator train` saved, read back and checked: for the operator and the SLURM table.

`read(folder)` checks `model.json` field by field and parses `model.txt` with LightGBM; any
problem is one `SavedModelError` line, `FILE: FIELD: reason`. A `SavedModel` then gives fresh
`LearnedEstimator`s (`estimator`, what the scheduler's factory calls; the booster is parsed once)
and the per-(user, job name) predictions job_submit.lua's estimate table is filled from (`table`).
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gputwin.core.model import JobSpec
from gputwin.errors import InputError
from gputwin.estimators.features import CATEGORICAL, FEATURES, FeatureState
from gputwin.estimators.model import FORMAT, META, MODEL, TrainError
from gputwin.estimators.modeldir import check_file, read_bytes
from gputwin.estimators.online import LearnedConfig, LearnedEstimator


class SavedModelError(TrainError):
    """A saved model that cannot be used (missing, corrupt, another format); one line."""


@dataclass(frozen=True)
class SavedModel:
    folder: Path
    booster: Any
    config: LearnedConfig
    offsets: tuple[float, float]
    smear: float
    codes: list[tuple[int, str, float]]

    def estimator(self, upcoming: Sequence[JobSpec] = (), origin: float = 0.0) -> LearnedEstimator:
        """A fresh estimator starting from this model (refitted on live jobs as usual)."""
        estimator = LearnedEstimator(self.config, upcoming=upcoming, origin=origin)
        estimator.features.restore_codes(self.codes)
        estimator.start_from(self.booster, self.offsets, self.smear)
        return estimator

    def table(self, finished: Iterable[JobSpec], origin: float = 0.0,
              keys: Collection[tuple[str, str]] | None = None) -> dict[tuple[str, str], float]:  # fmt: skip
        """Predicted run seconds per (user, job name) (those in `keys`, default all): each group's
        latest job described with every finished job observed (what a resubmission is told)."""
        import numpy as np

        state = FeatureState(origin=origin)
        state.restore_codes(self.codes)
        latest: dict[tuple[str, str], JobSpec] = {}
        for job in sorted(finished, key=lambda j: (j.submit + j.duration, j.seq, j.job_id)):
            state.observe(job, job.duration)
            key = (job.user, job.name)
            if key not in latest or latest[key].submit <= job.submit:
                latest[key] = job
        wanted = sorted(latest if keys is None else set(keys) & latest.keys())
        if not wanted:
            return {}
        logs = self.booster.predict(np.asarray(state.rows([latest[k] for k in wanted])), num_threads=1)
        return {k: max(math.exp(float(v)) * self.smear - 1.0, 0.0) for k, v in zip(wanted, logs)}


def read(folder: Path) -> SavedModel:
    """The model in `folder` (model.txt + model.json, not symlinks), every field checked."""
    folder = folder.resolve()
    for name in (META, MODEL):
        try:
            check_file(folder / name, None, str(folder / name))
        except InputError as exc:
            raise SavedModelError(str(exc)) from None
    meta_path = folder / META
    try:
        metadata = json.loads(_read(meta_path).decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        line = f":{exc.lineno}" if isinstance(exc, json.JSONDecodeError) else ""
        raise SavedModelError(f"{meta_path}{line}: model.json: not JSON") from None
    fields = _fields(meta_path, metadata)
    return SavedModel(folder, _booster(folder / MODEL), *fields)


def _fields(
    path: Path, meta: Any
) -> tuple[LearnedConfig, tuple[float, float], float, list[tuple[int, str, float]]]:
    def bad(field: str, reason: str) -> SavedModelError:
        return SavedModelError(f"{path}: {field}: {reason}")

    if not isinstance(meta, dict):
        raise bad("model.json", "want a JSON object")
    if meta.get("format") != FORMAT:
        raise bad("format", f"want {FORMAT!r}")
    if meta.get("features") != list(FEATURES):
        raise bad("features", "not the features this version computes; retrain the model")
    config = _config(meta.get("config"), bad)
    offsets = meta.get("offsets")
    if not (isinstance(offsets, list) and len(offsets) == 2 and all(_finite(v) for v in offsets)):
        raise bad("offsets", "want two finite numbers")
    smear: Any = meta.get("smear")
    if not (_finite(smear) and 0 < smear < 1e6):
        raise bad("smear", "want a positive finite number")
    return config, (float(offsets[0]), float(offsets[1])), float(smear), _codes(meta.get("codes", []), bad)


def _config(raw: Any, bad: Any) -> LearnedConfig:
    if not isinstance(raw, dict):
        raise bad("config", "want a JSON object")
    default, values = LearnedConfig(), {}
    known = {f.name for f in dataclasses.fields(LearnedConfig)}
    for key, value in raw.items():
        if key not in known:
            raise bad(f"config.{key}", "unknown setting")
        values[key] = _setting(type(getattr(default, key)), value, lambda r, k=key: bad(f"config.{k}", r))
    return dataclasses.replace(default, **values)


def _setting(want: type, value: Any, bad: Any) -> Any:
    """`value` as a setting of type `want` (bool, int or float; numbers >= 0), else `bad(reason)`."""
    if want is bool:
        if not isinstance(value, bool):
            raise bad("want true or false")
        return value
    if not _finite(value) or (want is int and not isinstance(value, int)):
        raise bad(f"want a finite {want.__name__}")
    if value < 0:
        raise bad("want a number >= 0")
    return want(value)


def _codes(raw: Any, bad: Any) -> list[tuple[int, str, float]]:
    if not isinstance(raw, list):
        raise bad("codes", "want a list of [column, value, code]")
    out: list[tuple[int, str, float]] = []
    for i, item in enumerate(raw):
        if not (isinstance(item, list) and len(item) == 3 and item[0] in CATEGORICAL
                and isinstance(item[1], str) and _finite(item[2])):  # fmt: skip
            raise bad(f"codes[{i}]", "want [category column, value, code]")
        out.append((int(item[0]), item[1], float(item[2])))
    if sorted(code for _, _, code in out) != [float(i) for i in range(len(out))]:
        raise bad("codes", "codes are not 0..N-1, each once")
    return out


def _booster(path: Path) -> Any:
    from gputwin.estimators.trees import lightgbm_module

    lightgbm = lightgbm_module()

    try:
        booster = lightgbm.Booster(model_str=_read(path).decode("utf-8"))
    except (UnicodeDecodeError, lightgbm.basic.LightGBMError, ValueError):
        raise SavedModelError(f"{path}: model.txt: not a LightGBM model") from None
    if booster.num_feature() != len(FEATURES):
        raise SavedModelError(f"{path}: model.txt: {booster.num_feature()} features, want {len(FEATURES)}")
    return booster


def _read(path: Path) -> bytes:
    try:
        return read_bytes(path, str(path))
    except InputError as exc:
        raise SavedModelError(str(exc)) from None


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
