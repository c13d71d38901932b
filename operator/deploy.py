"""Putting the declared policies into effect on a backend, and saying how it went.

The sim and Kubernetes backends run the operator's own scheduler: a policy is in effect as soon
as the Controller rebuilds its scheduler, so they need no `Deployer`. A backend whose jobs are
scheduled by someone else — SLURM, where slurmctld places jobs under the configuration we compile
for it — is given one: on every valid change of the cluster objects the Controller hands the new
`ClusterSpec` to `Deployer.deploy`, and the outcome becomes each used SchedulingPolicy's
`status.lastDeploy` (Succeeded, Failed with nothing changed, or RolledBack).

A deployer also says whether the operator may run GPUJobs itself (`jobs_blocker`): under SLURM
users submit with `sbatch`, so GPUJobs wait as Pending with that reason instead of being placed by
a scheduler that does not own the nodes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from gputwin.core.model import ClusterSpec

DeployResultKind = Literal["Succeeded", "Failed", "RolledBack"]


@dataclass(frozen=True, slots=True)
class DeployOutcome:
    """How one deployment went; `message` is one line a user can act on."""

    result: DeployResultKind
    message: str = ""


class Deployer(Protocol):
    """Compiles a cluster's policies into a backend's own configuration and applies it."""

    @property
    def jobs_blocker(self) -> str | None:
        """Why GPUJobs cannot run through this backend (None: they can)."""
        ...

    def deploy(self, cluster: ClusterSpec) -> DeployOutcome:
        """Put `cluster` into effect, or leave the previous configuration live and say why not."""
        ...


__all__ = ["DeployOutcome", "DeployResultKind", "Deployer"]
