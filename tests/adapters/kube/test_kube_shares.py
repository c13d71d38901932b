"""GPU shares as pods (`gputwin.adapters.kube.manifests`, `.sharing`, `.view`; pure, no API server):
a share's pod asks for no GPU and names its reservation pod, which holds the GPU once."""

from __future__ import annotations

from copy import deepcopy
from typing import Any

from cluster_builders import build_cluster

from gputwin.adapters.kube.backend import KubernetesBackend
from gputwin.adapters.kube.manifests import (PodPlan, ShareOf, bound_gpus, gpus_of, is_reservation, job_pod,
                                             reservation_name, reservation_pod)  # fmt: skip
from gputwin.adapters.kube.sharing import Reservations, SharedGpus
from gputwin.adapters.kube.view import PodView
from gputwin.core.decision import Start
from gputwin.runtime.capabilities import Resolved

SHARE = PodPlan("team-a", "infer-1", 0, 0, "kb-1", 1, "infer", "leaf0", 0.0, 30.0,
                ShareOf(250, "gputwin-gpu-kb-1-0-abc", 0))  # fmt: skip
CLUSTER = build_cluster({"l0": [2]})  # node n0, 2 GPUs


def bound(pod: dict[str, Any], node: str) -> dict[str, Any]:
    pod["spec"]["nodeName"] = node
    pod.setdefault("status", {})["phase"] = "Running"
    return pod


def test_a_share_pod_requests_no_gpu_and_names_its_fraction_and_reservation() -> None:
    template = {"metadata": {"labels": {"gputwin.io/gpu-reservation": "spoofed"}},
                "spec": {"containers": [{"name": "m", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
    pod = job_pod(SHARE, template, None, [])
    annotations = pod["metadata"]["annotations"]
    assert annotations["gputwin.io/gpu-fraction-milli"] == "250"
    assert annotations["gputwin.io/gpu-reservation"] == "gputwin-gpu-kb-1-0-abc"
    assert annotations["gputwin.io/gpu-slot"] == "0" and annotations["gputwin.io/gpu-reservation-namespace"] == "team-a"
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {}, "limits": {}} and gpus_of(pod) == 0
    assert not is_reservation(pod)  # a template cannot make a job's pod pass for a reservation


def test_a_whole_gpu_pod_is_unchanged_by_sharing() -> None:
    pod = job_pod(PodPlan("ns", "j", 0, 0, "n", 2, "p", "l", 0.0, None), None, None, [])
    assert gpus_of(pod) == 2 and "gputwin.io/gpu-fraction-milli" not in pod["metadata"]["annotations"]


def test_the_reservation_pod_holds_exactly_one_gpu_and_is_ours() -> None:
    name = reservation_name("kb-1", 2, "team-a/infer-1#0")
    pod = reservation_pod("team-a", name, 2, ["kwok.x-k8s.io/node"])
    assert name.startswith("gputwin-gpu-kb-1-2-") and name == reservation_name("kb-1", 2, "team-a/infer-1#0")
    assert name != reservation_name("kb-1", 2, "team-a/infer-2#0")  # opened again: a pod of its own
    assert pod["spec"]["schedulerName"] == "gputwin" and "nodeName" not in pod["spec"]
    assert pod["spec"]["containers"][0]["resources"] == {"requests": {"nvidia.com/gpu": "1"},
                                                         "limits": {"nvidia.com/gpu": "1"}}  # fmt: skip
    assert pod["metadata"]["labels"] == {"gputwin.io/gpu-reservation": "2"} and is_reservation(pod)
    assert len(reservation_name("n" * 250, 0, "x")) <= 253


def test_four_quarter_shares_on_one_gpu_hold_one_gpu_of_the_node() -> None:
    pods = [bound(reservation_pod("ns", "r", 0, []), "kb-1")]
    pods += [bound(job_pod(PodPlan("ns", f"s{i}", 0, 0, "kb-1", 1, "p", "l", 0.0, None,
                                   ShareOf(250, "r", 0)), None, None, []), "kb-1") for i in range(4)]  # fmt: skip
    pods.append(bound(job_pod(PodPlan("ns", "whole", 0, 0, "kb-1", 1, "p", "l", 0.0, None), None, None, []), "kb-1"))
    assert bound_gpus(pods) == {"kb-1": 2}


def test_the_view_keeps_reservations_apart_from_jobs_and_from_other_schedulers_gpus() -> None:
    view = PodView(None)
    reservation = bound(reservation_pod("ns", "r", 0, []), "kb-1")
    view.apply(("ns", "r"), reservation)
    assert view.reservations == {("ns", "r"): reservation} and not view.ours and not view.plain
    assert view.foreign == {}  # ours: the core counts that GPU as a shared GPU, never again
    view.apply(("ns", "r"), None)
    assert view.reservations == {}


def test_shares_join_one_reservation_and_the_last_to_leave_frees_it() -> None:
    gpus = SharedGpus()
    first, new = gpus.join("ns/a", "ns", ("kb-1", 0), 0)
    assert new and first[0] == "ns"
    for job in ("ns/b", "ns/c"):
        assert gpus.join(job, "ns", ("kb-1", 0), 0) == (first, False)
    other, new = gpus.join("ns/d", "ns", ("kb-1", 1), 0)
    assert new and other != first
    assert gpus.leave("ns/a") is None and gpus.leave("ns/b") is None and gpus.leave("ns/c") == first
    assert gpus.sweep(lambda job: job != "ns/d") == [other] and gpus.pod_of == {}
    again, new = gpus.join("ns/e", "ns", ("kb-1", 0), 0)
    assert new and again != first  # a GPU opened again has a reservation pod of its own


def test_an_adopted_share_keeps_its_gpu_unless_the_scheduler_packs_it_with_another_one() -> None:
    gpus = SharedGpus()
    assert gpus.conflict("ns/a", ("kb-1", 0), ("ns", "r0")) is None
    assert gpus.conflict("ns/b", ("kb-1", 0), ("ns", "r0")) is None  # same GPU, same slot
    assert gpus.conflict("ns/c", ("kb-1", 1), ("ns", "r1")) is None  # renumbered slots are fine
    merged = gpus.conflict("ns/d", ("kb-1", 0), ("ns", "r2"))
    assert merged is not None and "r0" in merged and "r2" in merged
    split = gpus.conflict("ns/e", ("kb-1", 2), ("ns", "r0"))
    assert split is not None and "slot 0" in split
    assert gpus.strays([("ns", "r0"), ("ns", "r1"), ("ns", "r2")]) == [("ns", "r2")]


def test_a_share_makes_sure_of_its_reservation_pod_until_the_view_shows_it() -> None:
    shares = Reservations(["kwok.x-k8s.io/node"])
    resolved = Resolved(("kb-1",), ("leaf0",), None, 0, None, (0, 250))
    assert shares.plan("ns/w", Resolved(("kb-1",), ("leaf0",), None, 0, None), {}) is None  # whole GPUs
    planned = shares.plan("ns/a", resolved, {})
    assert planned is not None
    share, reservation = planned
    assert reservation is not None and reservation[1] == "kb-1" and is_reservation(reservation[0])
    assert share == ShareOf(250, reservation[0]["metadata"]["name"], 0, "ns")
    assert shares.plan("ns/b", resolved, {}) == (share, reservation)  # same pass: b may be placed first
    seen = {("ns", share.reservation): bound(reservation[0], "kb-1")}
    assert shares.plan("ns/c", resolved, seen) == (share, None)  # a later pass saw it held



# --- the backend with shares, over an in-memory API (the real API server: test_operator_shares_live.py)


class MemoryApi:
    """A stand-in for `PodApi` that keeps pods in a dict: create (409 -> the pod there), bind, delete,
    read and list, as the API server answers them (no control plane can run per unit test)."""

    def __init__(self) -> None:
        self.pods_by_key: dict[tuple[str, str], dict[str, Any]] = {}
        self.deleted: list[str] = []
        self.node = {"metadata": {"name": "n0", "labels": {"gputwin.io/switch": "l0"}}, "spec": {},
                     "status": {"conditions": [{"type": "Ready", "status": "True"}],
                                "allocatable": {"nvidia.com/gpu": "2"}}}  # fmt: skip

    def create(self, pod: dict[str, Any]) -> tuple[dict[str, Any], bool]:
        key = (pod["metadata"]["namespace"], pod["metadata"]["name"])
        if key in self.pods_by_key:
            return deepcopy(self.pods_by_key[key]), False
        self.pods_by_key[key] = deepcopy(pod)
        return deepcopy(pod), True

    def bind(self, namespace: str, name: str, node: str) -> None:
        bound(self.pods_by_key[(namespace, name)], node)

    def delete(self, namespace: str, name: str, grace: int | None = None) -> None:
        if self.pods_by_key.pop((namespace, name), None) is not None:
            self.deleted.append(name)

    def pod(self, namespace: str, name: str) -> dict[str, Any] | None:
        return deepcopy(self.pods_by_key.get((namespace, name)))

    def pods(self, field_selector: str = "", label_selector: str = "", namespace: str | None = None) -> list[Any]:
        want = dict([label_selector.split("=", 1)]) if label_selector else {}
        return [deepcopy(p) for (ns, _), p in self.pods_by_key.items() if namespace in (None, ns)
                and all(p["metadata"].get("labels", {}).get(k) == v for k, v in want.items())]  # fmt: skip

    def nodes(self) -> list[Any]:
        return [deepcopy(self.node)]

    def reservations(self) -> list[str]:
        return sorted(name for (_, name), p in self.pods_by_key.items() if is_reservation(p))


class TableResolver:
    """Stands in for the controller (`JobControl.resolve`): each job's share slot from a table."""

    def __init__(self, slots: dict[str, int]) -> None:
        self.slots = slots

    def resolve(self, start: Start) -> Resolved:
        body = {"metadata": {"name": start.job_id.split("/")[1]}, "spec": {"gpus": 1, "gpuFraction": 0.25}}
        return Resolved(("n0",), ("l0",), body, 0, None, (self.slots[start.job_id], 250))


def backend(api: MemoryApi, slots: dict[str, int]) -> KubernetesBackend:
    made = KubernetesBackend(api, watch=None)  # type: ignore[arg-type]
    made.resolve_with(TableResolver(slots))
    made.observe(CLUSTER, 0.0)
    return made


def start(job_id: str) -> Start:
    return Start(job_id, "p", ((0, 1),), 30.0, 0.0, 1, 0, 0)


def test_the_backend_opens_one_reservation_per_shared_gpu_and_deletes_it_with_its_last_share() -> None:
    api = MemoryApi()
    slots = {"ns/a": 0, "ns/b": 0, "ns/c": 1}
    kube = backend(api, slots)
    assert kube.start_all([start(j) for j in slots], ["n0"], 0.0) == []
    assert len(api.reservations()) == 2  # slot 0 (a, b) and slot 1 (c)
    assert bound_gpus(list(api.pods_by_key.values())) == {"n0": 2}
    kube.stop("ns/a")
    assert len(api.reservations()) == 2
    kube.stop("ns/b")  # the last share on slot 0
    (left,) = api.reservations()
    assert api.pod("ns", "c-0-0")["metadata"]["annotations"]["gputwin.io/gpu-reservation"] == left  # type: ignore[index]


def test_after_a_restart_shares_are_adopted_on_their_gpu_or_queued_again() -> None:
    api = MemoryApi()
    kube = backend(api, {"ns/a": 0, "ns/b": 1})
    kube.start_all([start("ns/a"), start("ns/b")], ["n0"], 0.0)
    # The new process's scheduler packs both shares on its slot 0: b's GPU cannot be kept.
    again = backend(api, {"ns/a": 0, "ns/b": 0})
    again.adopt(start("ns/a"), ["n0"], 0.0)
    again.adopt(start("ns/b"), ["n0"], 0.0)
    again.observe(CLUSTER, 1.0)
    assert again.ended(1.0) == []
    (refused,) = again.failures(1.0)
    assert refused.job_id == "ns/b" and refused.reason == "ShareNotKept" and refused.retry
    assert "b-0-0" in api.deleted  # its pod goes; its GPU's reservation too, no share is left on it
    (kept,) = api.reservations()
    assert api.pod("ns", "a-0-0")["metadata"]["annotations"]["gputwin.io/gpu-reservation"] == kept  # type: ignore[index]
