"""A GPUJob's run as a gang of pods: built from a resolved start, placed all or none, found again.

`gang_pods` turns a start the controller resolved (`gputwin.runtime.capabilities.Resolved`: node
and leaf-switch names, the GPUJob as the pass read it, its preemptions so far) into its pods: one
per node of the placement, `nvidia.com/gpu` requests = limits = that node's slot, named
`<job>-<attempt>-<i>` (attempt = the job's preemptions so far) so a retry after a crash meets a 409
and adopts the same pod. `place_gang` creates and binds them one by one; if any create or bind
fails, every pod of this start is deleted and the start raises (the GPUs go back): never
half-bound. `find_run` finds a Running GPUJob's run again after a restart.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from kubernetes.client.exceptions import ApiException

from gputwin.adapters.kube.manifests import (ATTEMPT_LABEL, JOB_ID, JOB_LABEL, MIG_PREFIX, MigOf, NoMigResource,
                                             PodPlan, ShareOf, gpus_of, job_pod, label_value, mig_resource)
from gputwin.adapters.kube.nodes import mig_shortfall
from gputwin.adapters.kube.plain_pods import job_id_of
from gputwin.adapters.kube.pods import PodApi, reason_of
from gputwin.api.bodies import Body, Obj, Pod
from gputwin.core.decision import Start
from gputwin.runtime.capabilities import Resolved, StartRefused

BACKOFF_SECONDS = (1.0, 2.0, 4.0, 8.0, 15.0, 30.0)  # between failed starts of one job


def gang_pods(start: Start, resolved: Resolved, tolerated: Sequence[str], share: ShareOf | None = None,
              room: MigRoom | None = None) -> list[Obj]:  # fmt: skip
    """The pods of this run, one per slot, from the GPUJob's pod template (`share`: a GPU share's
    one pod, on the GPU that reservation pod holds; `resolved.mig`: a MIG profile's one pod, asking
    for its `nvidia.com/mig-<profile>`, taken from `room`). StartRefused for a profile no pod can
    request; RuntimeError (the start fails, retried after its backoff) when `room` has no such
    slice left on its node: a kubelet would refuse the pod."""
    if resolved.body is None:
        raise RuntimeError(f"GPUJob {start.job_id} is gone")
    namespace, name = start.job_id.split("/", 1)
    job = resolved.body
    spec = Body(job).spec
    run = start.run_seconds if spec.get("durationSeconds") is not None else None
    switches = ",".join(resolved.switches)
    mig = MigOf(*resolved.mig) if resolved.mig is not None else None
    try:
        pods = [job_pod(PodPlan(namespace, name, resolved.attempt, i, node, gpus, start.partition, switches,
                                start.overhead, run, share, mig), spec.get("podTemplate"), job, tolerated)
                for i, (node, (_, gpus)) in enumerate(zip(resolved.nodes, start.slots))]  # fmt: skip
    except NoMigResource as exc:  # never startable as asked: the job fails, saying why
        raise StartRefused(str(exc), "NoMigResource") from None
    if mig is not None and room is not None:
        room.take(resolved.nodes[0], mig_resource(mig.profile), start.job_id)
    return pods


class MigRoom:
    """MIG slices one pass's starts may still bind, per node and profile: what the Node advertises
    (allocatable `nvidia.com/mig-<profile>`), less what our bound pods there request and what
    this pass's earlier starts took (a kubelet counts the same, and refuses a pod past it)."""

    def __init__(self, nodes: Mapping[str, Obj], pods: Iterable[Obj]) -> None:
        self.nodes = nodes
        self._pods = pods  # our live GPUJob pods; read once, at the pass's first MIG start
        # (node, resource) -> job id -> slices its pods there request
        self._held: dict[tuple[str, str], dict[str, int]] | None = None

    def take(self, node: str, resource: str, job_id: str) -> None:
        """One `resource` on `node` for `job_id`'s pod; RuntimeError when the node has none left."""
        held = self._index().setdefault((node, resource), {})
        wanted = sum(n for j, n in held.items() if j != job_id) + 1  # its own pod (a retry's): counted once
        short = mig_shortfall(self.nodes.get(node), node, resource, wanted)
        if short is not None:
            raise RuntimeError(short)
        held[job_id] = 1

    def _index(self) -> dict[tuple[str, str], dict[str, int]]:
        if self._held is None:
            self._held = {}
            for pod in self._pods:
                there, job_id = Pod(pod).node_name, str(Body(pod).annotations.get(JOB_ID))
                for container in (Pod(pod).spec.get("containers") or []) if there else ():
                    for resource in (container.get("resources") or {}).get("limits") or {}:
                        if str(resource).startswith(MIG_PREFIX):
                            jobs = self._held.setdefault((there, str(resource)), {})
                            jobs[job_id] = jobs.get(job_id, 0) + gpus_of(pod, str(resource))
        return self._held


def place_gang(api: PodApi, namespace: str, pods: list[tuple[Obj, str]], on_error: Callable[[], None]) -> None:
    """Create and bind every pod, or none: on any failure delete what this start made (`on_error`
    is told first)."""
    made: list[str] = []
    try:
        for pod, node in pods:
            got, created = api.create(pod)
            name, there = Body(pod).name, Pod(got).node_name
            if not created and (
                job_id_of(got) != job_id_of(pod)  # someone else's pod: never ours to adopt or delete
                or Body(got).deleting
                or (there and there != node)
            ):
                raise RuntimeError(f"pod {namespace}/{name} exists and is not this run's; retrying later")
            made.append(name)  # created, or ours from a start cut short (a crash): adopted
            if not there:
                api.bind(namespace, name, node)
    except Exception as exc:
        on_error()
        for name in made:
            api.delete(namespace, name, 0)
        if isinstance(exc, ApiException) and exc.status == 422:
            raise StartRefused(f"its pod is invalid: {reason_of(exc)}") from exc
        raise


def find_run(api: PodApi, job_id: str, node_names: Sequence[str]) -> tuple[tuple[str, ...], list[Obj]]:
    """A Running GPUJob's run after a restart: the names of its newest attempt's pods (none: lost,
    or not where the status says it runs), and every pod of the job not being deleted."""
    namespace, name = job_id.split("/", 1)
    # Its pods may have ended while the operator was down: ask for all of them, ended or not.
    found = api.pods(label_selector=f"{JOB_LABEL}={label_value(name)}", namespace=namespace)
    mine = [p for p in found if job_id_of(p) == job_id and not Body(p).deleting]
    newest = max(map(attempt_of, mine), default=0)
    names = tuple(sorted(Body(p).name for p in mine if attempt_of(p) == newest))
    nodes = sorted(Pod(p).node_name for p in mine if Body(p).name in names)
    return (names if sorted(node_names) == nodes else ()), mine


def attempt_of(pod: Obj) -> int:
    """The run attempt a GPUJob pod belongs to (its `gputwin.io/attempt` label; 0 without one)."""
    return int(Body(pod).labels.get(ATTEMPT_LABEL, 0))


__all__ = ["BACKOFF_SECONDS", "MigRoom", "attempt_of", "find_run", "gang_pods", "place_gang"]
