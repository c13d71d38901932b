"""The `kubernetes` executor: a sweep as one Indexed Job, completion index i running candidate i.

The Job's pods run `gputwin sweep-task /sweep` in the gputwin image; the task reads its index
from `JOB_COMPLETION_INDEX` (set by the Job controller) and writes `results/<i>.json` into the
sweep folder, which the pods mount from a PersistentVolumeClaim (`claim`) or, on a one-node
cluster such as kind, a hostPath (`host_path`, the folder itself). Tasks whose result already
exists return at once, so a resumed sweep runs the whole index range again cheaply.

The executor creates the Job, waits (polling its status) until it has as many succeeded
completions as candidates, or it failed, or `timeout` passes, and deletes it with its pods either
way (foreground propagation) unless `keep` is set.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from gputwin.adapters.kube.store import api_client

from gputwin.adapters.sweeps import DEFAULT_IMAGE
from gputwin.adapters.sweeps.plan import SweepError, follow, read_plan

Progress = Callable[[int], None]
Clock = Callable[[], float]
MOUNT = "/sweep"
POLL_SECONDS = 1.0
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
_IMAGE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}")


def _label(value: str, what: str) -> str:
    if _DNS_LABEL.fullmatch(value) is None:
        raise SweepError(f"{what} {value!r}: want a DNS label (lower-case letters, digits, '-')")
    return value


def job_manifest(completions: int, *, image: str, parallel: int, claim: str | None,
                 host_path: Path | None) -> dict[str, Any]:  # fmt: skip
    """The Indexed Job for a sweep of `completions` tasks."""
    if _IMAGE.fullmatch(image) is None:
        raise SweepError(f"image {image!r}: not an image reference")
    if (claim is None) == (host_path is None):
        raise SweepError("give exactly one of a PersistentVolumeClaim or a host path for the sweep folder")
    volume: dict[str, Any] = (
        {"name": "sweep", "persistentVolumeClaim": {"claimName": _label(claim, "claim")}}
        if claim is not None
        else {"name": "sweep", "hostPath": {"path": str(host_path), "type": "Directory"}}
    )
    container = {"name": "task", "image": image, "command": ["python", "-m", "gputwin", "sweep-task", MOUNT],
                 "volumeMounts": [{"name": "sweep", "mountPath": MOUNT}],
                 "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}  # fmt: skip
    return {
        "apiVersion": "batch/v1", "kind": "Job",
        "metadata": {"generateName": "gputwin-sweep-", "labels": {"app.kubernetes.io/name": "gputwin-sweep"}},
        "spec": {
            "completionMode": "Indexed", "completions": completions,
            "parallelism": parallel if parallel > 0 else completions, "backoffLimitPerIndex": 1,
            "maxFailedIndexes": completions,  # a failed candidate is reported by gather, not retried forever
            "template": {"spec": {"restartPolicy": "Never", "containers": [container], "volumes": [volume]}},
        },
    }  # fmt: skip


class KubernetesExecutor:
    """Runs a sweep as an Indexed Job in `namespace`; the cluster is that of $KUBECONFIG (or in-cluster)."""

    name = "kubernetes"

    def __init__(self, *, namespace: str = "default", image: str = DEFAULT_IMAGE, parallel: int = 0,
                 claim: str | None = None, host_path: bool = False, timeout: float = 3600.0, keep: bool = False,
                 clock: Clock = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:  # fmt: skip
        self.namespace = _label(namespace, "namespace")
        self.image, self.parallel, self.claim, self.host_path = image, parallel, claim, host_path
        self.timeout, self.keep = timeout, keep
        self._clock, self._sleep = clock, sleep

    def submit(self, folder: Path, batch: client.BatchV1Api) -> str:
        completions = len(read_plan(folder).candidates)
        body = job_manifest(completions, image=self.image, parallel=self.parallel, claim=self.claim,
                            host_path=folder.resolve() if self.host_path else None)  # fmt: skip
        created = batch.create_namespaced_job(self.namespace, body)  # type: ignore[arg-type]  # a dict body
        assert created.metadata is not None and created.metadata.name
        return created.metadata.name

    def run(self, folder: Path, indices: Sequence[int], progress: Progress | None = None) -> None:
        if not indices:
            return
        batch = client.BatchV1Api(api_client())
        name = self.submit(folder, batch)
        try:
            self._wait(folder, batch, name, indices, progress)
        finally:
            if not self.keep:
                self._delete(batch, name)

    def _wait(self, folder: Path, batch: client.BatchV1Api, name: str, indices: Sequence[int],
              progress: Progress | None) -> None:  # fmt: skip
        def done() -> bool:
            status = batch.read_namespaced_job_status(name, self.namespace).status or client.V1JobStatus()
            conditions = {c.type: c.status for c in (status.conditions or [])}
            return "True" in (conditions.get("Complete"), conditions.get("Failed"))  # gather names the failed

        if not follow(folder, indices, done, timeout=self.timeout, progress=progress, clock=self._clock,
                      sleep=self._sleep, poll=POLL_SECONDS):  # fmt: skip
            raise SweepError(f"Job {self.namespace}/{name}: not finished after {self.timeout:g} s")

    def _delete(self, batch: client.BatchV1Api, name: str) -> None:
        try:
            batch.delete_namespaced_job(name, self.namespace, propagation_policy="Foreground")
        except ApiException as exc:
            if exc.status != 404:
                raise
