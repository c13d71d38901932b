"""MIG profiles as pods (`gputwin.adapters.kube.manifests`, `.gang`; pure, no API server): a MIG
job's pod requests one `nvidia.com/mig-<profile>` (the NVIDIA device plugin's mixed strategy) and no
`nvidia.com/gpu`; before, it held a whole `nvidia.com/gpu`, so seven 1g slices the core packed on
one GPU asked the node for seven GPUs. Profile strings are checked before they become resource names.
The real API server + KWOK case is tests/operator/test_operator_mig_live.py."""

from __future__ import annotations

import re
from typing import Any

import pytest

from gputwin.adapters.kube.gang import MigRoom, gang_pods
from gputwin.adapters.kube.manifests import MigOf, NoMigResource, PodPlan, gpus_of, job_pod, mig_resource
from gputwin.core.decision import Start
from gputwin.runtime.capabilities import Resolved, StartRefused


def plan(profile: str, slot: int = 0) -> PodPlan:
    return PodPlan("team-a", "infer-1", 0, 0, "kb-1", 1, "infer", "leaf0", 0.0, 30.0, mig=MigOf(profile, slot))


def test_a_mig_pod_requests_its_profile_and_no_whole_gpu() -> None:
    """Whatever the template asks for: no nvidia.com/gpu, no other MIG resource, one of its own."""
    asks = {"nvidia.com/gpu": "1", "nvidia.com/mig-3g.40gb": "2", "cpu": "2"}
    template = {"spec": {"containers": [{"name": "m", "image": "x", "resources": {"limits": dict(asks),
                                                                                   "requests": dict(asks)}},
                                        {"name": "side", "image": "y", "resources": {"limits": dict(asks)}}]}}  # fmt: skip
    pod = job_pod(plan("1g.10gb", 3), template, None, [])
    first, side = pod["spec"]["containers"]
    want = {"cpu": "2", "nvidia.com/mig-1g.10gb": "1"}
    assert first["resources"] == {"limits": want, "requests": want}
    assert side["resources"] == {"limits": {"cpu": "2"}, "requests": {}}  # the job's slice: counted once
    assert gpus_of(pod) == 0 and gpus_of(pod, "nvidia.com/mig-1g.10gb") == 1
    notes = pod["metadata"]["annotations"]
    assert notes["gputwin.io/mig-profile"] == "1g.10gb" and notes["gputwin.io/gpu-slot"] == "3"
    assert "gputwin.io/gpu-fraction-milli" not in notes and "gputwin.io/gpu-reservation" not in notes


def test_a_whole_gpu_profile_names_no_slot() -> None:
    pod = job_pod(plan("7g.80gb", -1), None, None, [])
    assert pod["spec"]["containers"][0]["resources"]["limits"] == {"nvidia.com/mig-7g.80gb": "1"}
    assert "gputwin.io/gpu-slot" not in pod["metadata"]["annotations"]


# A profile string -> its resource name, or None: refused before it names any resource.
PROFILES: dict[str, tuple[Any, str | None]] = {
    "1g": ("1g.10gb", "nvidia.com/mig-1g.10gb"),
    "3g": ("3g.40gb", "nvidia.com/mig-3g.40gb"),
    "7g": ("7g.80gb", "nvidia.com/mig-7g.80gb"),
    "media-engine": ("1g.10gb+me", None),  # NVIDIA's name; the API server refuses `+` in a pod's resources
    "eight-slices": ("8g.80gb", None),
    "path": ("1g.10gb/../gpu", None),
    "newline": ("1g.10gb\n", None),
    "other-resource": ("gpu", None),
    "empty": ("", None),
    "not-text": (7, None),
}


@pytest.mark.parametrize(("profile", "resource"), PROFILES.values(), ids=PROFILES.keys())
def test_only_a_plain_profile_name_becomes_a_resource_name(profile: Any, resource: str | None) -> None:
    if resource is not None:
        assert mig_resource(profile) == resource
        return
    with pytest.raises(NoMigResource, match="no resource a pod can request"):
        mig_resource(profile)
    with pytest.raises(NoMigResource):
        job_pod(plan(profile), None, None, [])


def test_a_profile_no_pod_can_request_refuses_the_start() -> None:
    """Never startable as asked: StartRefused (the job fails, saying why), not a retry loop."""
    start = Start("ns/m", "infer", ((0, 1),), 30.0, 0.0, 1, 0, 0)
    body = {"metadata": {"name": "m"}, "spec": {"gpus": 1, "gpuModel": "h100", "gpuProfile": "1g.10gb+me"}}
    with pytest.raises(StartRefused, match=r"1g\.10gb\+me") as refused:
        gang_pods(start, Resolved(("n0",), ("l0",), body, 0, None, mig=("1g.10gb+me", 0)), [])
    assert refused.value.reason == "NoMigResource"
    (pod,) = gang_pods(start, Resolved(("n0",), ("l0",), body, 0, None, mig=("2g.20gb", 1)), [])
    assert pod["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/mig-2g.20gb": "1"}


def node(advertised: str | None) -> dict[str, Any]:
    allocatable = {"nvidia.com/gpu": "2"} | ({"nvidia.com/mig-1g.10gb": advertised} if advertised else {})
    return {"metadata": {"name": "n0"}, "status": {"allocatable": allocatable}}


def bound_slice(job: str, where: str = "n0") -> dict[str, Any]:
    pod = job_pod(PodPlan("ns", job, 0, 0, where, 1, "infer", "l0", 0.0, None, mig=MigOf("1g.10gb", 0)), None, None, [])
    pod["spec"]["nodeName"] = where
    return pod


# Node's allocatable nvidia.com/mig-1g.10gb (None: none advertised; "gone": no Node seen), 1g pods
# of other jobs bound on n0 (and 3 on n1, never counted), starts this pass -> how many bind.
ROOM = {
    "the-last-of-14": ("14", 13, 1, 1),
    "two-of-this-pass-fit-one": ("14", 13, 2, 1),
    "seven-fit-on-an-empty-node": ("7", 0, 9, 7),
    "not-advertised": (None, 0, 1, 0),
    "unreadable-quantity": ("lots", 0, 1, 0),
    "no-node-seen": ("gone", 0, 1, 0),
}


@pytest.mark.parametrize(("advertised", "bound", "starting", "binds"), ROOM.values(), ids=ROOM.keys())
def test_a_slice_binds_only_where_the_node_advertises_one_more(advertised: str | None, bound: int, starting: int,
                                                              binds: int) -> None:  # fmt: skip
    """What a kubelet would check (`OutOfnvidia.com/mig-1g.10gb`), before any pod is made: the
    node's count less our bound pods' and this pass's earlier starts'."""
    body = {"metadata": {"name": "m"}, "spec": {"gpus": 1, "gpuModel": "h100", "gpuProfile": "1g.10gb"}}
    pods = [bound_slice(f"b{i}") for i in range(bound)] + [bound_slice(f"o{i}", "n1") for i in range(3)]
    room = MigRoom({} if advertised == "gone" else {"n0": node(advertised)}, pods)
    made, refused = 0, []
    for i in range(starting):
        start = Start(f"ns/m{i}", "infer", ((0, 1),), 30.0, 0.0, 1, 0, 0)
        try:
            gang_pods(start, Resolved(("n0",), ("l0",), body, 0, None, mig=("1g.10gb", 0)), [], None, room)
            made += 1
        except RuntimeError as exc:
            refused.append(str(exc))
    assert made == binds
    assert all(re.match(r"node n0 advertises \d+ nvidia.com/mig-1g.10gb, this start would make \d+", r) for r in refused)


def test_a_retried_start_does_not_count_its_own_pod_twice() -> None:
    """A start cut short (a crash) left its pod bound: making it again is not one slice more."""
    room = MigRoom({"n0": node("1")}, [bound_slice("m")])
    room.take("n0", "nvidia.com/mig-1g.10gb", "ns/m")
    with pytest.raises(RuntimeError, match="advertises 1 nvidia.com/mig-1g.10gb, this start would make 2"):
        room.take("n0", "nvidia.com/mig-1g.10gb", "ns/other")
