"""The Kubernetes API as the operator's object store (`KubeStore`), over the official client.

The Kubernetes *backend*'s raw calls live beside it: `pods` (create, bind, delete and list pods,
a thread pool of binders) and `nodes` (which declared nodes the live cluster lets us use).
"""

from .store import COMPONENT, KubeStore, MissingCRD, ObjectNotFound, Retry, api_client

__all__ = ["COMPONENT", "KubeStore", "MissingCRD", "ObjectNotFound", "Retry", "api_client"]
