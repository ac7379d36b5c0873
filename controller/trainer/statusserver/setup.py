"""Wires the status server into a manager behind the ``TrainJobStatus`` gate, with its own API client.

Go origin: kubeflow/trainer ``pkg/statusserver/setup.go`` (``SetupServer``, ``createClient``: its own client
with ``statusServer.qps``/``burst``).
"""

from __future__ import annotations

import os

from controller.client.client import Client
from controller.client.gvk import BUILTIN_RESOURCES
from controller.client.restmapper import RESTMapper
from controller.manager.manager import Manager
from controller.serving.authentication import (
    TOKEN_REVIEW_RESOURCE,
    CachingAuthenticator,
    TokenReviewAuthenticator,
)
from controller.serving.certwatcher import CertWatcher
from controller.serving.tlsconfig import TLSOptions
from controller.serving.webhook.server import CERT_NAME, DEFAULT_CERT_DIR, KEY_NAME
from controller.trainer.config import Configuration
from controller.trainer.statusserver.handler import StatusHandler
from controller.trainer.statusserver.server import READ_TIMEOUT, StatusServer
from runtime.features import TRAIN_JOB_STATUS

__all__ = [
    "client_for",
    "setup_status_server",
]

HEALTHZ_CHECK = "status-server-healthz"
READYZ_CHECK = "status-server-readyz"
CLIENT_GO_DEFAULT_QPS = 5.0
CLIENT_GO_DEFAULT_BURST = 10


def client_for(manager_client: Client, config: Configuration) -> Client:
    """The status server's own client (upstream's ``createClient``): the manager's configuration and
    credentials, its own connection pool, ``statusServer.qps``/``burst`` (a 0 reads as client-go's 5/10)
    with one token bucket per resource (TokenReviews and TrainJobs each get theirs), and TokenReviews
    resolved without discovery."""
    transport = manager_client.transport.with_options(read_timeout=READ_TIMEOUT, connect_timeout=READ_TIMEOUT)
    client = Client(
        transport,
        qps=config.status_server.qps or CLIENT_GO_DEFAULT_QPS,
        burst=config.status_server.burst or CLIENT_GO_DEFAULT_BURST,
    )
    client.mapper = RESTMapper(client, builtins=(*BUILTIN_RESOURCES, TOKEN_REVIEW_RESOURCE))
    return client


def setup_status_server(
    manager: Manager,
    config: Configuration,
    *,
    bind_address: str | None = None,
    cert_dir: str | os.PathLike[str] = DEFAULT_CERT_DIR,
) -> StatusServer | None:
    """With the ``TrainJobStatus`` gate on: the status server on ``bind_address`` (default
    ``127.0.0.1:<statusServer.port>``; the entry point resolves ``:<port>`` against the Pod IP), with the
    certificate ``cert_dir/tls.crt``/``tls.key`` (the webhook server's, reloaded when it changes) and the
    ``tls`` options, added to ``manager`` with the checks ``status-server-healthz`` and
    ``status-server-readyz``. None (and nothing added) with the gate off."""
    if not config.feature_gates.enabled(TRAIN_JOB_STATUS):
        return None
    if bind_address is None:
        bind_address = f"127.0.0.1:{config.status_server.port}"
    directory = os.fspath(cert_dir)
    tls = TLSOptions(
        min_version=config.tls.min_version,
        cipher_suites=tuple(config.tls.cipher_suites),
        next_protos=tuple(config.tls.next_protos),
    )
    certs = CertWatcher(os.path.join(directory, CERT_NAME), os.path.join(directory, KEY_NAME), tls=tls)
    client = client_for(manager.client, config)
    reviews = CachingAuthenticator(TokenReviewAuthenticator(client), clock=manager.clock)
    handler = StatusHandler(reviews, client)
    server = StatusServer(
        handler,
        certs=certs,
        bind_address=bind_address,
        allow_all_interfaces=manager.options.allow_all_interfaces,
    )
    manager.add(server)
    manager.add_healthz_check(HEALTHZ_CHECK, server.health_checker())
    manager.add_readyz_check(READYZ_CHECK, server.ready_checker())
    return server
