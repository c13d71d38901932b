"""A client for the API server a user's kubeconfig names, for the commands a person runs (forecast
--kube, `kubectl gputwin describe`), with every way of not getting there as one line.

The operator connects with `store.api_client` (its service account first); a person's command
reads the kubeconfig (`--kubeconfig` or `$KUBECONFIG`, an optional context) and must not show a
traceback for a missing file, an unknown context or a server that refuses: `kubeconfig_client`
and `api_errors` turn those into InputError (`FILE: kubeconfig: reason`, `HOST: API server: reason`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from gputwin.errors import InputError

REASON_CHARS = 200  # a server's or library's message, cut: one readable line


def kubeconfig_client(kubeconfig: Path | None = None, context: str | None = None) -> client.ApiClient:
    """A client for `context` (default: the current one) of `kubeconfig` (default: $KUBECONFIG,
    else ~/.kube/config); InputError naming the file when it cannot be used."""
    configuration = client.Configuration()
    path = str(kubeconfig) if kubeconfig is not None else os.environ.get("KUBECONFIG")
    try:  # kubernetes.config is the one untyped corner of the (otherwise typed) client
        config.load_kube_config(config_file=path, context=context,  # type: ignore[no-untyped-call]
                                client_configuration=configuration)  # fmt: skip
    # The loader walks the YAML as it finds it: a file that is not a kubeconfig fails anywhere in it.
    except (config.ConfigException, OSError, ValueError, TypeError, AttributeError, KeyError, yaml.YAMLError) as exc:
        reason = str(exc).splitlines()[0][:REASON_CHARS] if str(exc) else type(exc).__name__
        if isinstance(exc, (TypeError, AttributeError, KeyError)):
            reason = "not a kubeconfig (a YAML mapping of clusters, users and contexts)"
        raise InputError(f"{path or '~/.kube/config'}: kubeconfig: {reason}") from None
    return client.ApiClient(configuration)


@contextmanager
def api_errors(api: client.ApiClient) -> Iterator[None]:
    """Errors from talking to `api`'s server (refused, 403, a broken connection) as one InputError."""
    host = api.configuration.host
    try:
        yield
    except ApiException as exc:
        raise InputError(f"{host}: API server: {exc.status} {exc.reason}") from None
    except (HTTPError, OSError) as exc:
        cause = getattr(exc, "reason", None) or exc  # urllib3's MaxRetryError: the last attempt's error
        raise InputError(f"{host}: API server: {str(cause)[:REASON_CHARS]}") from None


__all__ = ["api_errors", "kubeconfig_client"]
