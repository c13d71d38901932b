"""Which reservation pod holds each shared GPU, and which shares run on it (the Kubernetes backend's).

KAI scheduler and Run:ai deploy a GPU fraction as two kinds of pod: ONE reservation pod per shared
GPU, which requests `nvidia.com/gpu: 1` (so the kubelet's device plugin and every scheduler count
that GPU as taken, once), and the shares' own pods, which request no `nvidia.com/gpu` and say in
annotations which GPU they share (`gputwin.adapters.kube.manifests`: `SHARE_GPU`, `SHARE_MILLI`,
`SHARE_SLOT`). gputwin does the same: the core's `Shares` decides that a share goes on slot `s`
of node `n`; `SharedGpus` maps that (node, slot) to its reservation pod, made when the first
share joins the GPU (in the opener's namespace, named per opening: `reservation_name`) and
deleted when its last share leaves (stopped, ended, failed, lost).

After a restart a share's pod is adopted with the GPU its annotation names (`adopt`): the core
re-packs the adopted shares itself, and where its (node, slot) already belongs to another
reservation pod (the core merged shares that run on two GPUs) the share cannot stay where it runs
without the real GPU holding more than the core counts: it is queued again (`conflict`). A
reservation pod no share accounts for once adoption is done is deleted (`strays`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence

from gputwin.adapters.kube.manifests import (SHARE_GPU, SHARE_GPU_NAMESPACE, ShareOf, is_reservation, reservation_name,
                                             reservation_pod)  # fmt: skip
from gputwin.adapters.kube.pods import PodApi
from gputwin.api.bodies import Body, Key, Obj, Pod
from gputwin.core.decision import Start
from gputwin.runtime.capabilities import Failure, Resolved, Resolver

log = logging.getLogger("gputwin.adapters.kube.backend")

Gpu = tuple[str, int]  # (node name, slot) as the core's Shares numbers it


class SharedGpus:
    """Reservation pods by shared GPU, and the shares on each (all on the reconcile thread)."""

    def __init__(self) -> None:
        self.pod_of: dict[Gpu, Key] = {}  # shared GPU -> its reservation pod (namespace, name)
        self.gpu_of: dict[str, Gpu] = {}  # share's job id -> its GPU
        self._on: dict[Gpu, set[str]] = {}  # shared GPU -> the shares on it

    def join(self, job_id: str, namespace: str, gpu: Gpu, attempt: int) -> tuple[Key, bool]:
        """`job_id`'s share goes on `gpu`: its reservation pod, and whether it is new (to make)."""
        self.leave(job_id)
        key = self.pod_of.get(gpu)
        new = key is None
        if key is None:
            key = self.pod_of[gpu] = (namespace, reservation_name(gpu[0], gpu[1], f"{job_id}#{attempt}"))
        self.gpu_of[job_id] = gpu
        self._on.setdefault(gpu, set()).add(job_id)
        return key, new

    def conflict(self, job_id: str, gpu: Gpu, recorded: Key) -> str | None:
        """An adopted share that runs on reservation pod `recorded`, which the core put on `gpu`:
        None when that is consistent (the mapping is taken), else why the share cannot stay."""
        mapped = self.pod_of.get(gpu)
        if mapped is None and recorded in self.pod_of.values():
            slot = self._slot_of(recorded)
            return f"its GPU ({recorded[1]}) is now slot {slot} in the scheduler, not {gpu[1]}"
        if mapped is not None and mapped != recorded:
            return f"the scheduler packs it with the shares of {mapped[1]}, not of {recorded[1]}"
        self.pod_of[gpu] = recorded
        self.gpu_of[job_id] = gpu
        self._on.setdefault(gpu, set()).add(job_id)
        return None

    def _slot_of(self, key: Key) -> int:
        return next(slot for (_, slot), k in self.pod_of.items() if k == key)

    def leave(self, job_id: str) -> Key | None:
        """`job_id`'s share left its GPU; the reservation pod to delete if it was the last one."""
        gpu = self.gpu_of.pop(job_id, None)
        if gpu is None:
            return None
        on = self._on[gpu]
        on.discard(job_id)
        if on:
            return None
        del self._on[gpu]
        return self.pod_of.pop(gpu, None)

    def sweep(self, running: Callable[[str], bool]) -> list[Key]:
        """Shares whose run the backend no longer tracks leave; the reservation pods left empty."""
        gone = [job for job in self.gpu_of if not running(job)]
        return [key for job in gone if (key := self.leave(job)) is not None]

    def strays(self, reservations: Mapping[Key, Obj] | Iterable[Key]) -> list[Key]:
        """Reservation pods (of this pass's view) that no shared GPU maps to."""
        mapped = set(self.pod_of.values())
        return sorted(key for key in reservations if key not in mapped)


class Reservations(SharedGpus):
    """`SharedGpus` with the API calls: what the backend asks when a share starts, stops, is adopted."""

    def __init__(self, tolerated: Sequence[str]) -> None:
        super().__init__()
        self.tolerated = tuple(tolerated)

    def plan(
        self, job_id: str, resolved: Resolved, seen: Mapping[Key, Obj]
    ) -> tuple[ShareOf, tuple[Obj, str] | None] | None:
        """A starting share's place, and its GPU's reservation pod with its node unless this pass
        saw that pod (to make, or take if it is there, before the share's pod: a share joining a GPU
        another start of this pass opens must not run before its GPU is held, whichever is first).
        None for a start of whole GPUs."""
        if resolved.share is None:
            return None
        slot, milli = resolved.share
        node = resolved.nodes[0]
        key, new = self.join(job_id, job_id.split("/", 1)[0], (node, slot), resolved.attempt)
        make = new or key not in seen or Body(seen[key]).deleting
        reservation = (reservation_pod(key[0], key[1], slot, self.tolerated), node) if make else None
        return ShareOf(milli, key[1], slot, key[0]), reservation

    def release(self, api: PodApi, job_id: str) -> None:
        """`job_id`'s share left: its GPU's reservation pod is deleted if no share is left on it."""
        key = self.leave(job_id)
        if key is not None:
            api.delete(key[0], key[1], 0)

    def tidy(self, api: PodApi, running: Callable[[str], bool], seen: Mapping[Key, Obj]) -> None:
        """Shares whose runs ended leave; reservation pods left empty, or no GPU maps to, are deleted."""
        keys = self.sweep(running) + [k for k in self.strays(seen) if not Body(seen[k]).deleting]
        for key in dict.fromkeys(keys):
            log.info("deleting reservation pod %s/%s: no share runs on its GPU", *key)
            api.delete(key[0], key[1], 0)

    def refused(self, api: PodApi, start: Start, names: Sequence[str], pods: Sequence[Obj],
                resolver: Resolver | None) -> Failure | None:  # fmt: skip
        """A run found after a restart (`names`: its pods' names, of `pods`): a share that cannot
        stay on the GPU its annotation names is refused (queued again, the scheduler giving its
        share back); None for every other run, and for a share that stays."""
        if not names or resolver is None:
            return None
        run = [p for p in pods if Body(p).name in names]
        why = self._adopted(api, start.job_id, run, resolver.resolve(start))
        if why is None:
            return None
        return Failure(start.job_id, "ShareNotKept", f"{why}; stopped and queued again", retry=True)

    def _adopted(self, api: PodApi, job_id: str, pods: Sequence[Obj], resolved: Resolved) -> str | None:
        """A share found running after a restart (`pods`: its run's pods): None when it stays on
        the GPU its annotation names, else why it cannot."""
        recorded = next((Pod(p) for p in pods if Pod(p).annotations.get(SHARE_GPU)), None)
        if resolved.share is None or recorded is None:
            return "its pod names no shared GPU" if resolved.share is not None else None
        namespace = recorded.annotations.get(SHARE_GPU_NAMESPACE) or recorded.namespace
        key = (str(namespace), str(recorded.annotations[SHARE_GPU]))
        if key not in self.pod_of.values():  # first share adopted on it: does it still hold the GPU?
            holder = api.pod(*key)
            if holder is None or not is_reservation(holder) or Body(holder).deleting:
                return f"reservation pod {key[1]} is gone"
            if Pod(holder).node_name != recorded.node_name:
                return f"reservation pod {key[1]} is on {Pod(holder).node_name}, not {recorded.node_name}"
        return self.conflict(job_id, (resolved.nodes[0], resolved.share[0]), key)


def ensure_reservation(api: PodApi, pod: Obj, node: str) -> None:
    """Make the reservation pod and bind it to `node` (one already there under its name, ours and
    not being deleted, is taken: a retry after a crash, or two shares opening a GPU at once)."""
    got, created = api.create(pod)
    there = Pod(got).node_name
    if not created and (not is_reservation(got) or Body(got).deleting or (there and there != node)):
        raise RuntimeError(f"reservation pod {Body(pod).name} exists and is not this GPU's; retrying later")
    if not there:
        api.bind(Body(pod).namespace or "", Body(pod).name, node)


__all__ = ["Gpu", "Reservations", "SharedGpus", "ensure_reservation"]
