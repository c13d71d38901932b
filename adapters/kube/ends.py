"""How the Kubernetes backend's runs end: from its view of live pods and the ends the watch saw.

`RunEnds` is the end side of `gputwin.adapters.kube.backend.KubernetesBackend` (its base class,
sharing its view and runs). A run whose pods all Succeeded is finished. A Failed pod fails the
job (`Failure(retry=False)`: the GPUJob shows Failed; the gang's other pods are deleted). A pod
deleted by someone else (or its node) re-queues the GPUJob (`retry=True`): the job did not fail,
its run was lost; a plain Pod that vanished is just gone. Then orphans are deleted: pods of a
GPUJob whose run the backend does not track (bound before a crash, but the job's status never
said Running; or left by a deleted job). A pod the watch has not shown yet (just created) counts
as pending; one still unseen after `UNSEEN_SECONDS` is read once.
"""

from __future__ import annotations

import logging

from gputwin.adapters.kube.cluster_watch import ClusterWatch
from gputwin.adapters.kube.plain_pods import PlainPods, deleting, phase_of
from gputwin.adapters.kube.pods import PodApi
from gputwin.adapters.kube.view import Key, Run, Runs
from gputwin.adapters.kube.watch import Ended
from gputwin.api.bodies import Body, Obj, Pod
from gputwin.runtime.capabilities import Failure, is_own_job

DONE = ("Succeeded", "Failed")
UNSEEN_SECONDS = 30.0  # a pod we made that the watch has not shown by then is read once

log = logging.getLogger("gputwin.adapters.kube.backend")


class RunEnds:
    """Finished, failed and lost runs, and orphaned pods, as of the backend's latest pass."""

    api: PodApi
    watch: ClusterWatch | None
    plain: PlainPods
    _runs: Runs
    _pods: dict[Key, Obj]  # our live pods as of this pass
    _gang: dict[Key, Obj]  # of them, the GPUJobs' pods
    _changed: dict[Key, None] | None  # pods changed for this pass; None: look at all
    _suspects: set[Key]  # GPUJob pods a run let go of: the orphan scan looks at them
    _failures: list[Failure]
    _terminal: dict[Key, Obj]  # ended pods of runs still tracked
    _gone: set[Key]  # pods of tracked runs deleted before they ended
    _unseen: dict[Key, float]  # pods of tracked runs not in the copy yet: since

    def _note_ended(self, ended: dict[Key, Ended]) -> None:
        """How runs ended, as the watch saw it (no read per pod)."""
        tracked = self._runs.job_of
        for key, end in ended.items():
            if key in tracked:
                if end.gone:
                    self._gone.add(key)
                else:
                    self._terminal[key] = end.pod

    def finished(self, now: float) -> list[str]:
        done: list[str] = []
        self._failures = self.plain.collect(self._runs)  # plain Pods whose bind failed since the last pass
        for job_id in self._to_check():
            run = self._runs.get(job_id)
            assert run is not None
            if self._still_running(run):
                self._runs.recheck.discard(job_id)  # until one of its pods changes
                continue
            pods = [self._pods.get((run.namespace, n)) or self._ended(run.namespace, n, now)
                    for n in run.pods]  # fmt: skip
            live = [p for p in pods if p is not None and not Body(p).deleting]
            if not run.pods or len(live) < len(pods):
                self._runs.remove(job_id)
                self._failures.append(Failure(job_id, "PodsLost", "its pods were deleted outside the scheduler",
                                              retry=not is_own_job(job_id)))  # fmt: skip
                self.stop_pods(run, [p for p in live if phase_of(p) not in DONE])
            elif any(phase_of(p) == "Failed" for p in live):
                self._runs.remove(job_id)
                failed = Pod(next(p for p in live if phase_of(p) == "Failed"))
                why = failed.status.get("message") or failed.status.get("reason") or ""
                message = f"pod {failed.name} failed{': ' + why if why else ''}"
                self._failures.append(Failure(job_id, "PodFailed", message, retry=False))
                self.stop_pods(run, [p for p in live if phase_of(p) not in DONE])
            elif all(phase_of(p) == "Succeeded" for p in live):
                self._runs.remove(job_id)
                done.append(job_id)
        tracked = self._runs.job_of
        if self._terminal:
            self._terminal = {k: v for k, v in self._terminal.items() if k in tracked}
        self._gone &= tracked.keys()
        if self._unseen:
            self._unseen = {k: v for k, v in self._unseen.items() if k in tracked and k not in self._pods}
        self._delete_orphans()
        return done

    def _to_check(self) -> list[str]:
        """The runs `finished` looks at, in the order they began: all of them on a full pass; else
        those whose pods changed, and those not seen running yet (`Runs.recheck`)."""
        if self._changed is None:
            return list(self._runs)
        job_of = self._runs.job_of
        touched = {job_of[key] for key in self._changed if key in job_of}
        return self._runs.in_order(touched | self._runs.recheck)

    def failures(self, now: float) -> list[Failure]:
        """The runs that ended without success in the last `finished` (each reported once)."""
        found, self._failures = self._failures, []
        return found

    def _delete_orphans(self) -> None:
        """Delete GPUJob pods no run accounts for: of the pods changed this pass (all on a full
        pass) and those a run let go of (`_suspects`)."""
        tracked, gang = self._runs.job_of, self._gang
        keys = gang if self._changed is None else [
            k for k in dict.fromkeys((*self._changed, *self._suspects)) if k in gang
        ]
        self._suspects.clear()
        for key in list(keys):
            pod = gang[key]
            if key in tracked or deleting(pod):  # per changed pod: direct, not a view
                continue
            if phase_of(pod) not in DONE:
                log.info("deleting pod %s/%s: no run of its GPUJob accounts for it", *key)
                self.api.delete(key[0], key[1], 0)

    def _still_running(self, run: Run) -> bool:
        """Every pod of `run` in this pass's view, none being deleted or ended: `finished` has
        nothing to do for it (and `_ended`, with its side effects, is not needed)."""
        if not run.pods:
            return False
        for name in run.pods:
            pod = self._pods.get((run.namespace, name))
            if pod is None or deleting(pod) or phase_of(pod) in DONE:  # per pod of a run: direct
                return False
        return True

    def _ended(self, namespace: str, name: str, now: float) -> Obj | None:
        """A tracked pod missing from the pods not ended: ended (kept while its run lasts: a gang
        waits for its slowest pod), or gone (None). With a watch, how it ended came with the event;
        a pod the copy has not shown yet (just created) is taken as pending, and read once after
        `UNSEEN_SECONDS`. Without a watch it is read once."""
        key = (namespace, name)
        if key in self._gone:
            return None
        if key not in self._terminal and self.watch is not None:
            since = self._unseen.setdefault(key, now)
            if now - since < UNSEEN_SECONDS:
                return {"metadata": {"namespace": namespace, "name": name}, "status": {"phase": "Pending"}}
        if key not in self._terminal:
            pod = self.api.pod(namespace, name)
            if pod is None or phase_of(pod) not in DONE:
                return pod
            self._terminal[key] = pod
        return self._terminal[key]

    def stop_pods(self, run: Run, pods: list[Obj]) -> None:
        for pod in pods:
            self.api.delete(run.namespace, Body(pod).name, 0)


__all__ = ["DONE", "UNSEEN_SECONDS", "RunEnds"]
