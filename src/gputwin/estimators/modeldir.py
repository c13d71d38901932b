"""Which saved learned model a SchedulingPolicy may name: a folder inside the admin's model folder.

A policy says `estimator: {type: learned, model: NAME}`; the operator (or `gputwin slurm render`)
reads `$GPUTWIN_MODEL_DIR/NAME/model.txt` and `model.json` with its own rights. The security rule
(a custom resource never makes the operator read anything outside what an admin allowed) holds
because a model is read only when all of these hold (tests/hostile/test_hostile_models.py):

- an admin set `GPUTWIN_MODEL_DIR` (unset: learned policies are refused, nothing is read);
- NAME is a plain name: `[A-Za-z0-9][A-Za-z0-9_.-]{0,62}` without `..` (no `/`, so no absolute
  path and no walking up);
- NAME resolves (symlinks followed) to a folder inside the model folder, and neither file is a
  symlink (one leading outside is named as such);
- both files are regular files (no FIFO or device can block the read) of at most MAX_MODEL_BYTES;
  `read_bytes` checks that again on the descriptor it reads (opened O_NOFOLLOW | O_NONBLOCK), so a
  file swapped for a symlink or a FIFO after the check is refused too.

Errors name the field and never quote the file's contents.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Mapping
from pathlib import Path

from gputwin.errors import InputError

MODEL_DIR_ENV = "GPUTWIN_MODEL_DIR"
MODEL_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}", re.ASCII)
MODEL_NAME_RULE = "a plain name: letters, digits, '_', '.', '-' (at most 63, no '..', no '/')"
MAX_MODEL_BYTES = 64 * 1024 * 1024  # a 40-round model of 15 leaves is ~0.1 MB
FILES = ("model.txt", "model.json")
WHERE = "spec.estimator.model"


class ModelRefused(InputError, ValueError):
    """A model the sandbox will not read, or a model folder setting that is wrong; one line."""


def model_dir(env: Mapping[str, str] | None = None) -> Path | None:
    """`$GPUTWIN_MODEL_DIR` resolved (an existing folder), or None when it is unset or empty."""
    env = os.environ if env is None else env
    raw = env.get(MODEL_DIR_ENV, "").strip()
    if not raw:
        return None
    base = Path(raw).resolve()
    if not base.is_dir():
        raise ModelRefused(f"{MODEL_DIR_ENV}={raw!r}: not a folder; want the folder saved models live in")
    return base


def check_name(name: str, where: str = WHERE) -> str:
    """`name` when it is a plain model name, else ModelRefused (no path is looked at)."""
    if MODEL_NAME.fullmatch(name) is None or ".." in name:
        raise ModelRefused(f"{where}: refused {name!r:.80}: want {MODEL_NAME_RULE}")
    return name


def locate(name: str, base: Path | None, where: str = WHERE) -> Path:
    """The resolved folder of model `name` inside `base`, its two files checked; else ModelRefused."""
    check_name(name, where)
    if base is None:
        raise ModelRefused(f"{where}: learned models are off: the setting {MODEL_DIR_ENV} (the folder "
                           "saved models live in) is not set; an admin sets it")  # fmt: skip
    root = base.resolve()
    folder = (root / name).resolve()
    if not folder.is_relative_to(root) or folder == root:
        raise ModelRefused(f"{where}: {name!r} leads outside {MODEL_DIR_ENV}")
    if not folder.is_dir():
        raise ModelRefused(f"{where}: no model {name!r} in {MODEL_DIR_ENV}")
    for file in FILES:
        check_file(folder / file, root, f"{where}: {name}/{file}")
    return folder


def check_file(path: Path, root: Path | None, what: str) -> None:
    """A regular file of at most MAX_MODEL_BYTES (inside `root` when given), else ModelRefused."""
    resolved = path.resolve()
    if root is not None and not resolved.is_relative_to(root):
        raise ModelRefused(f"{what}: leads outside {MODEL_DIR_ENV}")
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        raise ModelRefused(f"{what}: missing") from None
    if stat.S_ISLNK(info.st_mode):
        raise ModelRefused(f"{what}: a symlink; want the file itself")
    if not stat.S_ISREG(info.st_mode):
        raise ModelRefused(f"{what}: not a regular file")
    if info.st_size > MAX_MODEL_BYTES:
        raise ModelRefused(f"{what}: {info.st_size} bytes, more than {MAX_MODEL_BYTES}")


def read_bytes(path: Path, what: str) -> bytes:
    """The bytes of the regular file `path` (in a resolved folder), at most MAX_MODEL_BYTES, checked
    on the open descriptor (a symlink or FIFO swapped in after `check_file` is refused, never followed)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise ModelRefused(f"{what}: missing") from None
    except OSError:
        raise ModelRefused(f"{what}: not a regular file") from None
    with os.fdopen(fd, "rb") as stream:
        info = os.fstat(stream.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise ModelRefused(f"{what}: not a regular file")
        data = stream.read(MAX_MODEL_BYTES + 1)
    if len(data) > MAX_MODEL_BYTES:
        raise ModelRefused(f"{what}: more than {MAX_MODEL_BYTES} bytes")
    return data
