"""Fixtures of the Kubernetes adapter tests: a throwaway namespace on the session's control plane."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture
def namespace(kubectl: Any) -> Iterator[str]:
    name = f"kube-{uuid.uuid4().hex[:6]}"
    kubectl.run("create", "namespace", name)
    yield name
    kubectl.run("delete", "namespace", name, "--wait=false", check=False)
