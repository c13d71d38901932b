"""`StatusWriter` under `KubeStore` on the REAL API server (fixtures `kube`, `crds`, `namespace`): the
cluster kinds' status writes leave the pass and land; many writes to one object coalesce into one
request whose result is the last status; a pass reads its own writes while they wait (so condition
times carry over); a write to an object deleted meanwhile is dropped without error; closing sends
what is pending (bounded); a GPUJob's status is still written at once, by the pass itself.

The writer's requests are held where needed by a gate around its client's patch call, so what is
"in flight" and what is "pending" is decided by the test, not by timing.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from gputwin.adapters.kube import KubeStore, api_client
from gputwin.adapters.kube.status_writer import StatusWriter
from gputwin.adapters.kube.cluster_watch import ObjectWatches
from gputwin.api.meta import GROUP, VERSION
from gputwin.api.status import GPUPartitionStatus
from gputwin.operator.cluster import CLUSTER_KINDS
from gputwin.operator.statuses import StatusBook, condition, dump, updated
from polling import wait_for

Obj = dict[str, Any]


class Gate:
    """Wraps the writer's patch call: counts requests and, while closed, holds each one."""

    def __init__(self, writer: StatusWriter, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.open = threading.Event()
        self.open.set()
        api = writer.store._objects
        real: Callable[..., Any] = api.patch_cluster_custom_object_status

        def patch(group: str, version: str, plural: str, name: str, body: Obj, **kw: Any) -> Any:
            self.calls.append((name, body))
            assert self.open.wait(30), "the gate was never opened"
            return real(group, version, plural, name, body, **kw)

        monkeypatch.setattr(api, "patch_cluster_custom_object_status", patch)

    def hold(self) -> None:
        self.open.clear()

    def release(self) -> None:
        self.open.set()


@pytest.fixture
def setup(
    kube: Path, crds: None, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[KubeStore, StatusWriter, Any]]:
    """A store that defers the cluster kinds' statuses, its writer, and a client that reads the server."""
    monkeypatch.setenv("KUBECONFIG", str(kube))
    watches = ObjectWatches.connect()
    writer = StatusWriter.connect(CLUSTER_KINDS, None, watches)
    store = KubeStore.connect(cache=watches, writer=writer)
    reader = client.CustomObjectsApi(api_client())  # not the writer's client
    try:
        yield store, writer, reader
    finally:
        writer.close(5)
        watches.stop()


def partition(kubectl: Any, name: str) -> None:
    """A GPUPartition (cluster-scoped), in the store's copy before the test writes its status."""
    obj = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUPartition", "metadata": {"name": name},
           "spec": {"topology": "t", "taskTypes": ["train"], "nodes": "gpu[01-02]", "policy": "p"}}  # fmt: skip
    kubectl.run("apply", "-f", "-", input=json.dumps(obj))


def in_copy(store: KubeStore, name: str) -> Obj | None:
    return next((o for o in store.list("GPUPartition") if o["metadata"]["name"] == name), None)


def on_server(reader: Any, name: str) -> Obj:
    return dict(
        reader.get_cluster_custom_object_status(GROUP, VERSION, "gpupartitions", name).get("status") or {}
    )


@pytest.fixture
def names(kubectl: Any) -> Iterator[list[str]]:
    made: list[str] = []
    yield made
    for name in made:
        kubectl.run("delete", "gpupartition", name, "--ignore-not-found", "--wait=false", check=False)


@dataclass
class Writing:
    """What a test works with: the store, its writer, a client that reads the server, and the gate
    on the writer's requests (closed: each request waits until `gate.release()`)."""

    store: KubeStore
    writer: StatusWriter
    reader: Any
    gate: Gate
    kubectl: Any
    names: list[str]

    def partitions(self, count: int) -> list[str]:
        """New GPUPartitions, in the store's copy (deleted after the test)."""
        fresh = [f"sw-{uuid.uuid4().hex[:6]}" for _ in range(count)]
        self.names.extend(fresh)
        for name in fresh:
            partition(self.kubectl, name)
        wait_for("the partitions in the copy", lambda: all(in_copy(self.store, n) for n in fresh))
        return fresh

    def occupy(self, name: str) -> None:
        """A write to `name` that the gate holds in flight: the writer's thread is busy from now on."""
        self.store.patch_status("GPUPartition", None, name, {"queued": 1})
        wait_for("the first request in flight", lambda: len(self.gate.calls) == 1)

    def pass_sets(self, name: str, change: Callable[[GPUPartitionStatus], GPUPartitionStatus]) -> None:
        """One reconcile pass's status write, as the operator makes it: read, diff, patch."""
        book = StatusBook(self.store, "GPUPartition", GPUPartitionStatus)
        for obj in self.store.list("GPUPartition"):
            book.prime(obj)
        book.set(None, name, change(book.get(None, name)))
        book.flush()


@pytest.fixture
def writing(
    setup: tuple[KubeStore, StatusWriter, Any], kubectl: Any, names: list[str], monkeypatch: pytest.MonkeyPatch
) -> Writing:
    store, writer, reader = setup
    gate = Gate(writer, monkeypatch)
    gate.hold()
    return Writing(store, writer, reader, gate, kubectl, names)


def test_a_deferred_write_lands_and_the_pass_reads_it_at_once(writing: Writing) -> None:
    store, writer, reader, gate = writing.store, writing.writer, writing.reader, writing.gate
    (name,) = writing.partitions(1)
    store.patch_status(
        "GPUPartition", None, name, {"freeGPUs": 3, "totalGPUs": 16}
    )  # returns: the gate holds it
    assert writer.puts == 1
    found = in_copy(store, name)
    assert found is not None and found["status"]["freeGPUs"] == 3  # the pass reads its own write
    got = store.get("GPUPartition", None, name)
    assert got is not None and got["status"]["totalGPUs"] == 16
    wait_for("the request to be in flight", lambda: len(gate.calls) == 1)
    assert on_server(reader, name).get("freeGPUs") is None  # not written yet
    gate.release()
    wait_for("the write on the server", lambda: on_server(reader, name).get("freeGPUs") == 3)
    assert writer.flush(5)
    assert (writer.writes, writer.failed, writer.dropped) == (1, 0, 0)
    found = in_copy(store, name)
    assert found is not None and found["status"] == on_server(reader, name)  # the answer is in the copy


def test_many_writes_to_one_object_coalesce_into_one_request(writing: Writing) -> None:
    store, writer, reader, gate = writing.store, writing.writer, writing.reader, writing.gate
    name, other = writing.partitions(2)
    writing.occupy(other)
    # A pass per iteration: each diffs against what it reads (its own last write) and patches.
    for i in range(50):
        writing.pass_sets(name, lambda status, i=i: updated(status, free_gpus=i, queued=50 - i, running=i % 3))
    last = dump(updated(GPUPartitionStatus(), free_gpus=49, queued=1, running=1))
    found = in_copy(store, name)
    assert found is not None and found["status"] == last
    assert (writer.puts, writer.coalesced) == (51, 49)  # 49 patches merged into the first's pending run
    gate.release()
    assert writer.flush(10)
    assert [c[0] for c in gate.calls] == [other, name]  # one request for the 49 writes
    assert on_server(reader, name) == last
    assert gate.calls[1][1] == {"status": last}  # diffed against the status the server had (none)


def test_a_pass_reads_its_waiting_writes_so_condition_times_carry_over(writing: Writing) -> None:
    """Two passes while the first one's write waits: the Ready condition's transition time is the
    first pass's, as it would be with synchronous writes (the second pass reads the waiting write)."""
    writer, reader, gate = writing.writer, writing.reader, writing.gate
    name, other = writing.partitions(2)
    writing.occupy(other)
    for now in (1_000.0, 2_000.0):

        def ready(status: GPUPartitionStatus, now: float = now) -> GPUPartitionStatus:
            conditions = condition(status.conditions, "Ready", "True", "Valid", "scheduling", now)
            return updated(status, conditions=conditions, free_gpus=int(now))

        writing.pass_sets(name, ready)
    gate.release()
    assert writer.flush(10)
    written = on_server(reader, name)
    assert written["freeGPUs"] == 2000
    assert written["conditions"][0]["lastTransitionTime"] == "1970-01-01T00:16:40Z"  # the first pass's


def test_a_write_to_a_deleted_object_is_dropped_without_error(writing: Writing) -> None:
    store, writer, reader, gate = writing.store, writing.writer, writing.reader, writing.gate
    gone, other, later = writing.partitions(3)
    writing.occupy(other)
    store.patch_status("GPUPartition", None, gone, {"queued": 2})  # pending while the object goes
    writing.kubectl.run("delete", "gpupartition", gone)
    gate.release()
    assert writer.flush(10)
    assert (writer.dropped, writer.failed) == (1, 0)
    store.patch_status("GPUPartition", None, later, {"queued": 3})  # the thread goes on
    assert writer.flush(10)
    assert on_server(reader, later)["queued"] == 3
    assert writer.writes == 2


def test_close_sends_what_is_pending_then_writes_go_synchronously(writing: Writing) -> None:
    store, writer, reader, gate = writing.store, writing.writer, writing.reader, writing.gate
    first, *rest = writing.partitions(4)
    writing.occupy(first)
    for i, name in enumerate(rest):
        store.patch_status("GPUPartition", None, name, {"queued": 10 + i})
    assert writer.close(0.2) is False  # bounded: the gate still holds a request
    assert store.writer is writer
    gate.release()
    assert writer.close(10) is True
    assert [on_server(reader, n).get("queued") for n in [first, *rest]] == [1, 10, 11, 12]
    calls = len(gate.calls)
    store.patch_status("GPUPartition", None, first, {"queued": 5})  # closed: written by the caller, at once
    assert on_server(reader, first)["queued"] == 5
    assert len(gate.calls) == calls and writer.puts == 4


def test_a_gpujob_status_is_written_synchronously(writing: Writing, namespace: str) -> None:
    store, writer, reader, gate = writing.store, writing.writer, writing.reader, writing.gate
    # the gate is closed: the writer cannot write anything, and the job's status must not need it
    job = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "GPUJob", "metadata": {"name": "j", "namespace": namespace},
           "spec": {"taskType": "train", "gpus": 1, "user": "u", "jobName": "j", "durationSeconds": 60}}  # fmt: skip
    writing.kubectl.run("apply", "-f", "-", input=json.dumps(job))
    store.patch_status("GPUJob", namespace, "j", {"phase": "Queued"})
    got = reader.get_namespaced_custom_object_status(GROUP, VERSION, namespace, "gpujobs", "j")
    assert got["status"]["phase"] == "Queued"  # on the server when the call returned
    assert writer.puts == 0 and gate.calls == []
    gate.release()
