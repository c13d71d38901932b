"""The operator's `slurm` backend: every valid change of the cluster objects is compiled and applied.

`SlurmDeployer.deploy` is the whole of it: render the SwitchTopology, GPUPartitions and
SchedulingPolicies into SLURM's managed files (`gputwin.adapters.slurm.render`), then apply them
to the live slurmctld with validation, atomic writes, `scontrol reconfigure`, verification and
rollback (`gputwin.adapters.slurm.apply`). The adapter's errors map onto the SchedulingPolicy's
`status.lastDeploy.result`:

- `Succeeded`: written (or already identical) and verified live;
- `Failed`: refused before anything was written (a hostile name, an unknown node, a Lua syntax
  error, a setting that needs a slurmctld restart), or the controller is unreachable;
- `RolledBack`: written, then reconfigure or verification failed, and the previous files were
  put back and verified live again.

SLURM schedules its own jobs, so the operator does not place GPUJobs under this backend
(`jobs_blocker`): users submit with `sbatch --comment=task:<type>` and the compiled
job_submit.lua routes them. The Lua tables (GPU sizes, qssf/srtf estimates) come from `tables`,
a function of the cluster: `from_sacct(start)` reads the finished jobs of the window from the live
cluster's accounting at every deployment (the operator sets it from `GPUTWIN_SLURM_HISTORY`, e.g.
`now-30days`); without it the tables are empty and requests are kept as asked.

Because SLURM runs the jobs, the operator's own scheduler stays idle: `SlurmBackend.occupancy`
reads SLURM's real occupancy (`gputwin.adapters.slurm.occupancy`: GPUs allocated per partition,
jobs pending and running) once per pass, and the GPUPartition statuses and /metrics gauges show
that instead. A failed read (slurmctld down) keeps the last counts, marked stale, and is tried
again `RETRY_SECONDS` later, so a dead controller does not cost every pass sinfo's retries.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from gputwin.adapters.slurm import SlurmError, check_time, slurm_version
from gputwin.adapters.slurm.apply import AfterWrite, SlurmApplyError, apply
from gputwin.adapters.slurm.occupancy import READ_TIMEOUT, PartitionOccupancy, live_occupancy
from gputwin.adapters.slurm.render import SUPPORTED_VERSIONS, LuaTables, render
from gputwin.adapters.slurm.tables import tables_from_sacct
from gputwin.api.status import Backend as BackendName
from gputwin.core.decision import Start
from gputwin.core.model import ClusterSpec
from gputwin.runtime.capabilities import DeployOutcome, Occupancy, PartitionCounts

JOBS_BLOCKER = (
    "the slurm backend deploys policies to slurmctld, which runs its own jobs: "
    "submit with sbatch --comment=task:<type>"
)
TablesFor = Callable[[ClusterSpec], LuaTables]
RETRY_SECONDS = 30.0  # after a failed occupancy read, passes before this keep the stale counts
log = logging.getLogger(__name__)


def from_sacct(start: str) -> TablesFor:
    """Tables from the finished jobs since `start` (checked now: a bad window fails at start-up)."""
    window = check_time(start, "GPUTWIN_SLURM_HISTORY")
    return lambda cluster: tables_from_sacct(cluster, window).tables


def live_version() -> str:
    """The SLURM release of the live clients, as the renderer names it ("22.05", "24.11")."""
    major, minor, _ = slurm_version()
    version = f"{major}.{minor:02d}"
    if version not in SUPPORTED_VERSIONS:
        raise SlurmError(f"SLURM {version} is not supported: want one of {', '.join(SUPPORTED_VERSIONS)}")
    return version


class SlurmBackend:
    """The job side of the slurm backend: it runs nothing (GPUJobs are held, see `JOBS_BLOCKER`), and
    reports what SLURM runs (`occupancy`). `timeout` bounds each sinfo/squeue call of a read."""

    name: BackendName = "slurm"

    def __init__(self, *, timeout: float = READ_TIMEOUT) -> None:
        self.timeout = timeout
        self._last = Occupancy({}, None)
        self._read_at: float | None = None  # when the last read was tried, good or not

    def occupancy(self, now: float) -> Occupancy:
        """SLURM's occupancy: read once per `now`; after a failure, kept stale for `RETRY_SECONDS`."""
        tried = self._read_at
        if tried is not None and (now == tried or (self._last.error and now < tried + RETRY_SECONDS)):
            return self._last
        self._read_at = now
        try:
            read = live_occupancy(self.timeout)
        except SlurmError as exc:
            if not self._last.error:  # log the change, not every pass of an outage
                log.warning("SLURM occupancy read failed; statuses keep the last counts: %s", exc)
            self._last = Occupancy(self._last.partitions, self._last.as_of, _one_line(exc) or "read failed")
        else:
            self._last = Occupancy({name: _counts(p) for name, p in read.items()}, now)
        return self._last

    def start_all(
        self, starts: Sequence[Start], node_names: Sequence[str], now: float
    ) -> list[tuple[Start, Exception]]:
        # Never reached: the Controller holds GPUJobs under slurm (`SlurmDeployer.jobs_blocker`).
        return [(start, SlurmError(JOBS_BLOCKER)) for start in starts]

    def stop(self, job_id: str, grace: float | None = None) -> None:
        pass

    def ended(self, now: float) -> list[tuple[str, float]]:
        return []

    def next_event(self) -> float | None:
        return None


class SlurmDeployer:
    """Compiles and applies a cluster to the slurmctld of `conf_dir` (default: that of $SLURM_CONF)."""

    def __init__(
        self,
        conf_dir: Path | None = None,
        *,
        version: str | None = None,
        tables: TablesFor | None = None,
        after_write: AfterWrite | None = None,  # a test hook, passed to `apply`
    ) -> None:
        self.conf_dir, self.version, self.tables = conf_dir, version, tables
        self.after_write = after_write

    @property
    def jobs_blocker(self) -> str | None:
        return JOBS_BLOCKER

    def deploy(self, cluster: ClusterSpec) -> DeployOutcome:
        try:
            version = self.version or live_version()
            tables = self.tables(cluster) if self.tables is not None else None
            rendered = render(cluster, version=version, tables=tables)
            result = apply(rendered, self.conf_dir, after_write=self.after_write)
        except SlurmApplyError as exc:  # written, failed, restored (or said it could not restore)
            return DeployOutcome("RolledBack" if exc.restored else "Failed", _one_line(exc))
        except SlurmError as exc:  # refused before writing anything
            return DeployOutcome("Failed", _one_line(exc))
        changed = ", ".join(result.changed) or "nothing (already live)"
        return DeployOutcome("Succeeded", f"SLURM {version} in {result.conf_dir}: changed {changed}; verified")


def _counts(part: PartitionOccupancy) -> PartitionCounts:
    return PartitionCounts(nodes=part.nodes, total_gpus=part.total_gpus, free_gpus=part.free_gpus,
                           queued=part.pending, running=part.running)  # fmt: skip


def _one_line(exc: Exception) -> str:
    return " ".join(str(exc).split())


__all__ = ["JOBS_BLOCKER", "RETRY_SECONDS", "SlurmBackend", "SlurmDeployer", "from_sacct", "live_version"]
