"""`kubectl gputwin …`: the kubectl plugin (console script `kubectl-gputwin`), on a real cluster.

kubectl runs any `kubectl-NAME` on PATH as `kubectl NAME`. The plugin has the gputwin commands that
read a live cluster, not the emulator's state folder:

- `describe KIND[/NAME] [NAME…]`: `gputwin describe`'s text (spec, conditions, events, and for a
  waiting GPUJob its queue position and the GPUs it waits for) for the objects in the API server
  kubectl's kubeconfig (or the in-cluster account) points at, read with `KubeStore`; the events
  are the core/v1 Events the operator posted about the object; ages are measured on the wall clock.
- `forecast`: `gputwin forecast` as is (`--slurm` reads the live SLURM cluster, `--snapshot FILE`
  a saved one).

`kubectl get gputwin` needs no plugin (the CRDs carry the printer columns), so `get` is not here.
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from gputwin.api.bodies import Obj
from gputwin.cli.kubectl import user_errors
from gputwin.cli.lazy import Lazy
from gputwin.cli.main import UserErrorGroup

COMMANDS = {
    "describe": Lazy("gputwin.cli.plugin:live_describe",
                     "Show gputwin objects of the live cluster in detail, like `kubectl describe`."),
    "forecast": Lazy("gputwin.cli.forecast:forecast",
                     "Forecast when each pending job starts (p50/p90) and ends, and when each partition's queue "
                     "drains."),
}  # fmt: skip


class LiveView:
    """What `describe` reads, from the API server: objects (KubeStore), core/v1 Events, the clock."""

    def __init__(self, store: Any, core: Any, namespace: str | None) -> None:
        self._store, self._core, self._namespace = store, core, namespace
        self.now = time.time()

    def list(self, kind: str) -> Sequence[Obj]:
        found: Sequence[Obj] = self._store.list(kind)
        return found

    def get(self, kind: str, namespace: str | None, name: str) -> Obj | None:
        found: Obj | None = self._store.get(kind, namespace, name)
        return found

    def events(self) -> Sequence[Obj]:
        """The gputwin objects' Events, in the shape `FileStore.events` has (oldest first)."""
        selector = "involvedObject.apiVersion=gputwin.io/v1alpha1"
        if self._namespace is None:
            items = self._core.list_event_for_all_namespaces(field_selector=selector).items
        else:
            items = self._core.list_namespaced_event(self._namespace, field_selector=selector).items
        return sorted((_event(e) for e in items), key=lambda e: str(e["time"]))


def _event(event: Any) -> Obj:
    target = event.involved_object
    when = event.last_timestamp or event.event_time or event.first_timestamp
    return {"kind": target.kind, "name": target.name, "namespace": target.namespace or "",
            "time": when.strftime("%Y-%m-%dT%H:%M:%SZ") if when is not None else "<unknown>",
            "type": event.type or "Normal", "reason": event.reason or "", "message": event.message or ""}  # fmt: skip


@click.command("describe")
@click.argument("kind")
@click.argument("names", nargs=-1)
@click.option("-n", "--namespace", default="default", show_default=True, help="Namespace of GPUJobs and TraceReplays.")
@click.option("-A", "--all-namespaces", is_flag=True, help="Describe namespaced kinds across all namespaces.")
@click.option("--kubeconfig", type=click.Path(path_type=Path, dir_okay=False),
              help="The kubeconfig to use [default: $KUBECONFIG, else ~/.kube/config; in a pod, its service account].")
@click.option("--context", help="The kubeconfig context to use [default: its current one].")
@user_errors
def live_describe(kind: str, names: tuple[str, ...], namespace: str, all_namespaces: bool, kubeconfig: Path | None,
                  context: str | None) -> None:  # fmt: skip
    """Show gputwin objects of the live cluster in detail, like `kubectl describe`."""
    from kubernetes import client  # the Kubernetes client only for this command

    from gputwin.adapters.kube.connect import api_errors
    from gputwin.adapters.kube.store import KubeStore
    from gputwin.cli.describe import show

    scope = None if all_namespaces else namespace
    with _client(kubeconfig, context) as api, api_errors(api):
        store = KubeStore(api, scope)
        show(LiveView(store, client.CoreV1Api(api), scope), kind, names, namespace, all_namespaces)


def _client(kubeconfig: Path | None, context: str | None) -> Any:
    from gputwin.adapters.kube.connect import kubeconfig_client
    from gputwin.adapters.kube.store import api_client

    if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
        return api_client()  # in a pod without a kubeconfig: its service account, as kubectl does
    return kubeconfig_client(kubeconfig, context)


@click.group(cls=UserErrorGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
def plugin() -> None:
    """gputwin as a kubectl plugin: `kubectl gputwin describe|forecast …` on the live cluster."""


def main() -> None:
    plugin(prog_name="kubectl gputwin")


__all__ = ["COMMANDS", "LiveView", "live_describe", "main", "plugin"]
