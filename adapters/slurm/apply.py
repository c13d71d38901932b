"""Apply safely: put a `RenderedConfig` live on a running slurmctld, or leave the old one live.

Order (`apply`):
1. validate BEFORE writing: names and hostlists in the rendered lines, every partition and switch
   node exists in ``scontrol show node``, the live controller already has the settings a restart
   would be needed for (`RenderedConfig.requires`), and the Lua script parses (``luac5.1 -p``:
   SLURM's job_submit/lua links Lua 5.1). This matters more than it looks: on 22.05 an unknown node
   in a partition makes slurmctld *exit* (``fatal: Invalid node names in partition``) on reconfigure.
2. a unified diff of every managed file; a dry run stops here. A dry run needs no live SLURM: where
   no controller answers (`scontrol` missing or failing), the checks against it are skipped and a
   note says so; the rendered lines, the Lua script and the diff against the folder still are.
3. back up the current managed files (in memory and as ``NAME.gputwin-backup`` next to them),
   write each new file atomically (temp file in the same folder, fsync, ``os.replace``).
4. ``scontrol reconfigure``, then verify: ``scontrol show partition`` lists each partition with
   exactly its nodes, ``scontrol show topology`` lists each switch, ``scontrol show config`` shows
   the rendered PreemptType.
5. any failure in 3-4: restore the backups, reconfigure again, verify the old partitions are live,
   and raise `SlurmApplyError` naming what failed and that it rolled back.

Only the four managed files are touched; slurm.conf (the site's own settings) is never written.
"""

from __future__ import annotations

import difflib
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

import hostlist

from .checks import check_name
from .commands import run_command
from .errors import SlurmCommandError, SlurmError, SlurmInputError
from .render import JOB_SUBMIT, PARTITIONS, SCHEDULING, TOPOLOGY, RenderedConfig

BACKUP_SUFFIX = ".gputwin-backup"
DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")  # where Debian's clients look without SLURM_CONF
LUAC = ("luac5.1", "luac")  # job_submit_lua.so links liblua5.1 on Debian 12 and 13
_KEY_VALUE = re.compile(r"([A-Za-z]+)=(\S+)", re.ASCII)


class SlurmVerifyError(SlurmError):
    """The live controller does not show what was just applied (inside `apply`: triggers the rollback)."""


class SlurmApplyError(SlurmError):
    """Applying failed; the message says what failed and whether the old config is live again."""

    def __init__(self, message: str, *, restored: bool) -> None:
        super().__init__(message)
        self.restored = restored  # the previous files are back and verified live


@dataclass(frozen=True, slots=True)
class ApplyResult:
    """What `apply` did: the diff it showed, whether it wrote, and which files changed."""

    diff: str
    applied: bool
    changed: tuple[str, ...]
    conf_dir: Path
    notes: tuple[str, ...] = ()  # checks that could not run here, said out loud


# A test hook: called with (conf_dir) after the new files are written and before reconfigure, so a
# test can corrupt a file the way a broken renderer would and watch the rollback. None in production.
AfterWrite = Callable[[Path], None]


def default_conf_dir() -> Path:
    """The folder of the live slurm.conf (SLURM_CONF), where the managed files live."""
    conf = os.environ.get("SLURM_CONF")
    if not conf:
        raise SlurmInputError("SLURM_CONF is not set: give --conf-dir or source the cluster's env.sh")
    return Path(conf).parent


def client_config() -> Path | None:
    """The slurm.conf SLURM's clients would read, or None when it does not exist: they would then
    retry for 60 s before failing, so a dry run does not ask them (it goes offline at once)."""
    conf = Path(os.environ.get("SLURM_CONF") or DEFAULT_SLURM_CONF)
    return conf if conf.is_file() else None


def apply(rendered: RenderedConfig, conf_dir: Path | None = None, *, dry_run: bool = False,
          after_write: AfterWrite | None = None) -> ApplyResult:  # fmt: skip
    """Validate, diff, write atomically, reconfigure and verify; roll back on any failure."""
    conf_dir = Path(conf_dir) if conf_dir is not None else default_conf_dir()
    notes = validate(rendered, offline_ok=dry_run)
    old = read_current(conf_dir, rendered)
    new = rendered.as_dict()
    changed = tuple(name for name in new if old.get(name) != new[name])
    diff = unified_diff(old, new)
    if dry_run:
        return ApplyResult(diff, False, changed, conf_dir, notes)
    _backup(conf_dir, old)
    try:
        for name in changed:
            write_atomic(conf_dir / name, new[name])
        if after_write is not None:
            after_write(conf_dir)
        reconfigure()
        verify(rendered)
    except SlurmError as exc:
        _roll_back(conf_dir, old, exc)
    return ApplyResult(diff, True, changed, conf_dir, notes)


# --- validation -----------------------------------------------------------------------------------


def validate(rendered: RenderedConfig, *, offline_ok: bool = False) -> tuple[str, ...]:
    """Everything that can be checked without touching the live files; raises `SlurmInputError`.

    Returns notes on checks that could not run (no Lua checker installed; with `offline_ok`, no
    controller to ask: a dry run on a machine without SLURM).
    """
    _check_lines(rendered[PARTITIONS], "PartitionName", ("Nodes",))
    _check_lines(rendered[TOPOLOGY], "SwitchName", ("Nodes", "Switches"))
    notes: list[str] = []
    try:
        if offline_ok and client_config() is None:
            raise SlurmCommandError(f"no slurm.conf at {os.environ.get('SLURM_CONF') or DEFAULT_SLURM_CONF}")
        live = live_nodes()
    except SlurmCommandError as exc:
        if not offline_ok:
            raise
        notes.append(f"node names and restart-only settings not checked against slurmctld: {exc}")
    else:
        _check_live(rendered, live)
    if lua_checker() is None:
        return (*notes, "job_submit.lua syntax not checked: no luac5.1 here (Debian package lua5.1)")
    check_lua(rendered[JOB_SUBMIT])
    return tuple(notes)


def _check_live(rendered: RenderedConfig, live: set[str]) -> None:
    """Every partition's and switch's nodes are known to slurmctld; it has the restart-only settings."""
    wanted = [(f"partition {name}", nodes) for name, nodes in rendered.partitions]
    wanted += [(f"switch {name}", nodes) for name, nodes in _topology_nodes(rendered[TOPOLOGY])]
    for what, nodes in wanted:
        missing = [n for n in hostlist.expand_hostlist(nodes) if n not in live]
        if missing:
            raise SlurmInputError(
                f"{what}: node(s) {hostlist.collect_hostlist(missing)} unknown to slurmctld "
                "(scontrol show node); nothing was written"
            )
    _check_requires(rendered)


def _check_lines(data: bytes, head: str, list_keys: tuple[str, ...]) -> None:
    """Re-read rendered lines: the name and every hostlist must pass the strict checks."""
    for line in data.decode("ascii").splitlines():
        if not line or line.startswith("#"):
            continue
        pairs = _KEY_VALUE.findall(line)
        if " ".join(f"{k}={v}" for k, v in pairs) != line or not pairs or pairs[0][0] != head:
            raise SlurmInputError(f"rendered line refused: {line!r:.100}")
        check_name(pairs[0][1], head)
        for key, value in pairs:
            if key in list_keys:
                for item in _expand(value, line):
                    check_name(item, f"{head} {pairs[0][1]} {key}")


def _topology_nodes(data: bytes) -> list[tuple[str, str]]:
    lines = (dict(_KEY_VALUE.findall(line)) for line in data.decode("ascii").splitlines())
    return [(f["SwitchName"], f["Nodes"]) for f in lines if "SwitchName" in f and "Nodes" in f]


def _expand(value: str, line: str) -> list[str]:
    try:
        return list(hostlist.expand_hostlist(value))
    except hostlist.BadHostlist as exc:
        raise SlurmInputError(f"bad hostlist {value!r:.60} in {line!r:.80}: {exc}") from None


def live_nodes() -> set[str]:
    out = run_command(["scontrol", "show", "node", "--oneliner"], timeout=30)
    return {m.group(1) for m in re.finditer(r"^NodeName=(\S+)", out, re.MULTILINE)}


def live_config() -> dict[str, str]:
    out = run_command(["scontrol", "show", "config"], timeout=30)
    found = {}
    for line in out.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            found[key.strip()] = value.strip()
    return found


def _check_requires(rendered: RenderedConfig) -> None:
    config = live_config()
    for key, want in rendered.requires:
        have = config.get(key, "")
        if want not in have.split(","):
            raise SlurmInputError(
                f"the live controller has {key}={have or '(unset)'}, the policy needs {key}={want}: "
                "that setting needs a slurmctld restart, so gputwin does not change it"
            )


def lua_checker() -> str | None:
    """The Lua 5.1 syntax checker, or None when none is installed (Debian package lua5.1)."""
    return next((path for name in LUAC if (path := shutil.which(name))), None)


def check_lua(script: bytes) -> None:
    """`luac -p` on the script; raises `SlurmInputError` when it does not parse or no luac exists."""
    luac = lua_checker()
    if luac is None:
        raise SlurmInputError("no Lua 5.1 checker (luac5.1) installed: apt-get install lua5.1")
    with tempfile.NamedTemporaryFile(suffix=".lua") as tmp:
        tmp.write(script)
        tmp.flush()
        try:
            run_command([luac, "-p", tmp.name], timeout=30)
        except SlurmCommandError as exc:
            raise SlurmInputError(f"job_submit.lua does not parse: {exc}") from None


# --- files ----------------------------------------------------------------------------------------


def read_current(conf_dir: Path, rendered: RenderedConfig) -> dict[str, bytes | None]:
    """The managed files as they are now (None when absent)."""
    return {name: _read(conf_dir / name) for name in rendered}


def _read(path: Path) -> bytes | None:
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def unified_diff(old: Mapping[str, bytes | None], new: Mapping[str, bytes]) -> str:
    parts: list[str] = []
    for name, data in new.items():
        before = (old.get(name) or b"").decode("utf-8", "replace").splitlines(keepends=True)
        after = data.decode("ascii").splitlines(keepends=True)
        parts += difflib.unified_diff(before, after, f"a/{name}", f"b/{name}")
    return "".join(parts)


def write_atomic(path: Path, data: bytes) -> None:
    """Write via a temp file in the same folder and `os.replace`: readers see old or new, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)  # slurmctld and clients (maybe not root) read these
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _backup(conf_dir: Path, old: Mapping[str, bytes | None]) -> None:
    # On disk too, so a crash between write and rollback still leaves the old files findable.
    for name, data in old.items():
        if data is not None:
            write_atomic(conf_dir / (name + BACKUP_SUFFIX), data)


def _restore(conf_dir: Path, old: Mapping[str, bytes | None]) -> None:
    for name, data in old.items():
        if data is None:
            (conf_dir / name).unlink(missing_ok=True)
        else:
            write_atomic(conf_dir / name, data)


# --- controller -----------------------------------------------------------------------------------


def reconfigure() -> None:
    run_command(["scontrol", "reconfigure"], timeout=60)


def live_partitions() -> dict[str, set[str]]:
    out = run_command(["scontrol", "show", "partition", "--oneliner"], timeout=30)
    found = {}
    for line in out.splitlines():
        fields = dict(_KEY_VALUE.findall(line))
        if "PartitionName" in fields:
            nodes = fields.get("Nodes", "(null)")
            found[fields["PartitionName"]] = (
                set() if nodes == "(null)" else set(hostlist.expand_hostlist(nodes))
            )
    return found


def live_switches() -> set[str]:
    out = run_command(["scontrol", "show", "topology"], timeout=30)
    return set(re.findall(r"SwitchName=(\S+)", out))


def verify(rendered: RenderedConfig) -> None:
    """The controller reports the rendered partitions (exact nodes), switches and scheduling settings."""
    verify_partitions(dict(rendered.partitions))
    missing = sorted(set(rendered.switches) - live_switches())
    if missing:
        raise SlurmVerifyError(f"scontrol show topology lacks switch(es) {', '.join(missing)}")
    # slurm.conf keys are case-insensitive; show config spells some differently (FairShare).
    config = {key.lower(): value for key, value in live_config().items()}
    settings = [
        line for line in rendered[SCHEDULING].decode("ascii").splitlines() if not line.startswith("#")
    ]
    for key, want in _KEY_VALUE.findall("\n".join(settings)):
        have = config.get(key.lower())
        if have != want:
            raise SlurmVerifyError(f"scontrol show config has {key}={have!r}, expected {want!r}")


def verify_partitions(expected: Mapping[str, str]) -> None:
    live = live_partitions()
    for name, nodes in expected.items():
        if name not in live:
            raise SlurmVerifyError(f"scontrol show partition lacks partition {name}")
        if live[name] != set(hostlist.expand_hostlist(nodes)):
            got = hostlist.collect_hostlist(sorted(live[name])) or "(none)"
            raise SlurmVerifyError(f"partition {name} has nodes {got}, expected {nodes}")


def partitions_in(data: bytes | None) -> dict[str, str]:
    """(name -> node hostlist) of the PartitionName lines in a partitions file."""
    found = {}
    for line in (data or b"").decode("utf-8", "replace").splitlines():
        fields = dict(_KEY_VALUE.findall(line))
        if not line.startswith("#") and "PartitionName" in fields:
            found[fields["PartitionName"]] = fields.get("Nodes", "")
    return found


def _roll_back(conf_dir: Path, old: Mapping[str, bytes | None], cause: SlurmError) -> None:
    """Put the old files back, reconfigure, check the old partitions are live; always raises."""
    what = " ".join(str(cause).split())
    _restore(conf_dir, old)
    try:
        reconfigure()
        verify_partitions(partitions_in(old.get(PARTITIONS)))
    except SlurmError as again:
        raise SlurmApplyError(
            f"apply failed ({what}); the previous files were restored but the controller did not come "
            f"back on them ({' '.join(str(again).split())}): check slurmctld's log and restart it",
            restored=False,
        ) from cause
    raise SlurmApplyError(
        f"apply failed ({what}); rolled back: previous config restored and live", restored=True
    ) from cause


__all__ = [
    "ApplyResult",
    "SlurmApplyError",
    "SlurmVerifyError",
    "apply",
    "check_lua",
    "client_config",
    "default_conf_dir",
    "live_partitions",
    "live_switches",
    "lua_checker",
    "partitions_in",
    "reconfigure",
    "validate",
    "verify",
    "write_atomic",
]
