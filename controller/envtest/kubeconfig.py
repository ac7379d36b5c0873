"""Kubeconfig files for a test control plane: one cluster, one user, one context.

Go origin: controller-runtime ``pkg/internal/testing/controlplane/kubectl.go`` (``KubeConfigFromREST``).
Guarantees: the file is self-contained (the CA, client certificate and key are embedded as base64 data, a
token inline), so it stays valid wherever it is copied while the control plane runs; it is written as JSON,
which every kubeconfig reader accepts because JSON is YAML; it is created with mode 0600 because it holds
credentials. Deliberately missing: merging into an existing kubeconfig, exec plugins and auth providers.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import orjson

from controller.envtest.certs import KeyPair

CONTEXT = "envtest"


def build_kubeconfig(
    *,
    server: str,
    ca_pem: bytes,
    user: str,
    client: KeyPair | None = None,
    token: str | None = None,
    namespace: str | None = None,
) -> dict[str, Any]:
    """A kubeconfig dict for ``user`` authenticating with exactly one of ``client`` or ``token``."""
    credentials: dict[str, str]
    if client is not None and token is None:
        credentials = {
            "client-certificate-data": _b64(client.cert_pem),
            "client-key-data": _b64(client.key_pem),
        }
    elif token is not None and client is None:
        credentials = {"token": token}
    else:
        raise ValueError("give exactly one of client (a certificate) or token")
    context: dict[str, str] = {"cluster": CONTEXT, "user": user}
    if namespace is not None:
        context["namespace"] = namespace
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": CONTEXT, "cluster": {"server": server, "certificate-authority-data": _b64(ca_pem)}}
        ],
        "users": [{"name": user, "user": credentials}],
        "contexts": [{"name": CONTEXT, "context": context}],
        "current-context": CONTEXT,
        "preferences": {},
    }


def write_kubeconfig(path: Path, config: dict[str, Any]) -> Path:
    """Write ``config`` to ``path`` with mode 0600 and return the path."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(orjson.dumps(config, option=orjson.OPT_INDENT_2))
    os.chmod(path, 0o600)  # the mode given to os.open does not apply when the file already existed
    return path


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
