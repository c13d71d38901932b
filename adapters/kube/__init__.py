"""The Kubernetes API as the operator's object store (`KubeStore`), over the official client.

The Kubernetes *backend* (pods bound to `nvidia.com/gpu` nodes) is a different part and arrives
with its own issue; this package only reads and writes gputwin's custom resources and events.
"""

from .store import COMPONENT, KubeStore, MissingCRD, ObjectNotFound, Retry, api_client

__all__ = ["COMPONENT", "KubeStore", "MissingCRD", "ObjectNotFound", "Retry", "api_client"]
