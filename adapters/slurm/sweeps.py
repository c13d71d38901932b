"""The `slurm` executor: a sweep as one SLURM job array, task i running candidate i.

`sbatch --array=<pending indices>%<parallel>` submits a small batch script (written into the
sweep folder) that runs `python -m gputwin sweep-task FOLDER`; the task reads its index from
`SLURM_ARRAY_TASK_ID` and writes `results/<i>.json`, so the folder must be on a filesystem the
compute nodes share. The sweep then waits, polling `squeue`, until no task of the array is left,
and reports progress as result files appear. Nothing a user typed reaches a shell: the folder is
an argument of the script, the partition is checked against SLURM's name pattern first.
"""

from __future__ import annotations

import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from gputwin.adapters.slurm import check_name, run_command

from gputwin.adapters.sweeps.plan import LOGS, SweepError, follow

Progress = Callable[[int], None]
Clock = Callable[[], float]
POLL_SECONDS = 1.0
_SAFE_PATH = re.compile(r"[A-Za-z0-9._/+-]+")


def task_script(python: str = sys.executable) -> str:
    """The batch script every array task runs; its one argument is the sweep folder."""
    return "\n".join([
        "#!/bin/sh",
        "# gputwin sweep task: runs candidate $SLURM_ARRAY_TASK_ID of the sweep in folder $1",
        f'exec {shlex.quote(python)} -m gputwin sweep-task "$1"',
        "",
    ])  # fmt: skip


class SlurmExecutor:
    """Submits the pending tasks as one job array and waits for it (at most `timeout` seconds)."""

    name = "slurm"

    def __init__(self, *, partition: str | None = None, parallel: int = 0, timeout: float = 3600.0,
                 clock: Clock = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self.partition = check_name(partition, "partition") if partition else None
        self.parallel, self.timeout = parallel, timeout
        self._clock, self._sleep = clock, sleep

    def submit(self, folder: Path, indices: Sequence[int]) -> str:
        """sbatch the array; returns its job id."""
        folder = folder.resolve()  # the tasks start in another working directory
        if not _SAFE_PATH.fullmatch(str(folder)):  # sbatch expands % in --output; keep paths plain
            raise SweepError(f"sweep folder {str(folder)!r}: use a path of letters, digits and ._/+- only")
        script = folder / "sweep-task.sh"
        script.write_text(task_script())
        script.chmod(0o755)
        array = ",".join(str(i) for i in indices) + (f"%{self.parallel}" if self.parallel > 0 else "")
        argv = ["sbatch", "--parsable", f"--array={array}", "--job-name=gputwin-sweep",
                f"--output={folder / LOGS / '%a.out'}", f"--chdir={folder}"]  # fmt: skip
        if self.partition:
            argv.append(f"--partition={self.partition}")
        out = run_command([*argv, str(script), str(folder)]).strip()
        job_id = out.split(";")[0]
        if not job_id.isdigit():
            raise SweepError(f"sbatch printed {out!r}, not a job id")
        return job_id

    def run(self, folder: Path, indices: Sequence[int], progress: Progress | None = None) -> None:
        if not indices:
            return
        job_id = self.submit(folder, indices)
        left: list[str] = []

        def done() -> bool:
            squeue = ["squeue", "--noheader", "--array", f"--jobs={job_id}", "--format=%i"]
            left[:] = run_command(squeue).split()
            return not left

        if not follow(folder, indices, done, timeout=self.timeout, progress=progress, clock=self._clock,
                      sleep=self._sleep, poll=POLL_SECONDS):  # fmt: skip
            run_command(["scancel", job_id])
            raise SweepError(f"SLURM array {job_id}: {len(left)} task(s) still queued or running after "
                             f"{self.timeout:g} s; cancelled")  # fmt: skip
