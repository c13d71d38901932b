"""The cluster a Kubernetes snapshot test declares, from its YAML (SwitchTopology, GPUPartition and
SchedulingPolicy documents), as `gputwin forecast --kube` reads it off the API server."""

from __future__ import annotations

from typing import Any

import yaml

from gputwin.adapters.kube.snapshot import declared_cluster


def declared(text: str) -> Any:
    docs = list(yaml.safe_load_all(text))
    return declared_cluster(*([d for d in docs if d["kind"] == k] for k in
                              ("SwitchTopology", "GPUPartition", "SchedulingPolicy")))  # fmt: skip
