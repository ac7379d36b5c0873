"""A kube-apiserver on loopback with real TLS, client-certificate admin and service-account tokens.

Go origin: controller-runtime ``pkg/internal/testing/controlplane/apiserver.go`` and ``auth.go``.
Guarantees:

- It serves HTTPS on 127.0.0.1 only (``--bind-address`` and ``--advertise-address``), on a port chosen at
  first start and kept across :meth:`APIServer.restart`, with a serving certificate from a fresh test CA
  (SANs 127.0.0.1, localhost and the in-cluster names of the ``kubernetes`` Service).
- Authentication: x509 client certificates from the same CA (the admin is ``CN=admin, O=system:masters``)
  and service-account tokens signed with an RSA key (``--service-account-*``), so TokenRequest works and a
  test can act as a ServiceAccount. Authorization: RBAC only.
- ``--disable-admission-plugins=ServiceAccount``: without a controller-manager nobody creates the
  ``default`` ServiceAccount that plugin would insist on.
- Start returns once ``GET /readyz`` answers 200 for the admin, i.e. every post-start hook (RBAC bootstrap
  roles, CRD informers, priority-and-fairness config and, from 1.36, the built-in watch caches) has run.
- On SIGTERM it finishes within about 2 s even with watches open (``--shutdown-send-retry-after``), so
  stop and restart stay fast.
- Extra flags given by the caller replace the defaults of the same name (e.g. ``{"watch-cache": "false"}``).

Deliberately missing: the aggregation layer's front-proxy certificates, audit logging, webhooks calling out
and any network address but loopback. The Service CIDR (10.0.0.0/24) only names ClusterIPs; nothing dials it.
"""

from __future__ import annotations

import http.client
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from controller.clock import REAL_CLOCK, Clock
from controller.envtest.certs import CertificateAuthority, KeyPair, generate_rsa_keypair
from controller.envtest.errors import EnvtestError, StartError
from controller.envtest.process import ManagedProcess, free_port, retry_port_races, start_until_ready

ADMIN_USER = "admin"
ADMIN_GROUPS = ("system:masters",)
SERVICE_CLUSTER_IP_RANGE = "10.0.0.0/24"
# The ClusterIP of the `kubernetes` Service: the first address of the range.
_KUBERNETES_SERVICE_IP = "10.0.0.1"
_SERVING_HOSTS = (
    "127.0.0.1",
    "localhost",
    _KUBERNETES_SERVICE_IP,
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True, slots=True, kw_only=True)
class PKIFiles:
    """Where the apiserver's certificates and keys are on disk."""

    ca_cert: Path
    serving_cert: Path
    serving_key: Path
    admin_cert: Path
    admin_key: Path
    service_account_public_key: Path
    service_account_private_key: Path

    @classmethod
    def create(cls, directory: Path) -> PKIFiles:
        """Generate a fresh CA, serving and admin certificates and a service-account key in ``directory``."""
        ca = CertificateAuthority.new("envtest-ca")
        ca_cert = directory / "ca.crt"
        directory.mkdir(parents=True, exist_ok=True)
        ca_cert.write_bytes(ca.cert_pem)
        serving_cert, serving_key = ca.issue_serving(_SERVING_HOSTS, common_name="kube-apiserver").write(
            directory, "apiserver.crt", "apiserver.key"
        )
        admin_cert, admin_key = ca.issue_client(ADMIN_USER, ADMIN_GROUPS).write(
            directory, "admin.crt", "admin.key"
        )
        sa_public, sa_private = generate_rsa_keypair().write(directory, "sa.pub", "sa.key")
        return cls(
            ca_cert=ca_cert,
            serving_cert=serving_cert,
            serving_key=serving_key,
            admin_cert=admin_cert,
            admin_key=admin_key,
            service_account_public_key=sa_public,
            service_account_private_key=sa_private,
        )

    def admin_keypair(self) -> KeyPair:
        return KeyPair(self.admin_cert.read_bytes(), self.admin_key.read_bytes())


def apiserver_flags(
    *, port: int, etcd_url: str, pki: PKIFiles, extra: Mapping[str, str] | None = None
) -> list[str]:
    """The kube-apiserver command-line flags (without the binary), ``extra`` replacing same-named defaults."""
    flags: dict[str, str] = {
        "advertise-address": "127.0.0.1",
        "bind-address": "127.0.0.1",
        "secure-port": str(port),
        "tls-cert-file": str(pki.serving_cert),
        "tls-private-key-file": str(pki.serving_key),
        "client-ca-file": str(pki.ca_cert),
        "etcd-servers": etcd_url,
        "service-cluster-ip-range": SERVICE_CLUSTER_IP_RANGE,
        "service-account-issuer": f"https://127.0.0.1:{port}",
        "service-account-key-file": str(pki.service_account_public_key),
        "service-account-signing-key-file": str(pki.service_account_private_key),
        "authorization-mode": "RBAC",
        "disable-admission-plugins": "ServiceAccount",
        "allow-privileged": "true",
        # On SIGTERM, finish within ~2 s even with watches open (by default the HTTP server waits up to
        # --request-timeout, 60 s, for them); requests arriving meanwhile get 429 with Retry-After.
        "shutdown-send-retry-after": "true",
    }
    flags.update(extra or {})
    return [f"--{name}={value}" for name, value in flags.items()]


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """An HTTP answer from the API server."""

    status: int
    body: bytes

    def json(self) -> Any:
        return orjson.loads(self.body)


class APIServer:
    """One kube-apiserver process. Not thread-safe: one owner starts, restarts and stops it."""

    def __init__(
        self,
        binary: Path,
        etcd_url: str,
        pki: PKIFiles,
        log_path: Path,
        *,
        extra_flags: Mapping[str, str] | None = None,
        clock: Clock = REAL_CLOCK,
        start_timeout: float = 120.0,
    ) -> None:
        self._binary = binary
        self._etcd_url = etcd_url
        self.pki = pki
        self._log_path = log_path
        self._extra_flags = dict(extra_flags or {})
        self._clock = clock
        self._start_timeout = start_timeout
        self._process: ManagedProcess | None = None
        self.port = 0
        self._ssl = ssl.create_default_context(cafile=str(pki.ca_cert))
        self._ssl.load_cert_chain(pki.admin_cert, pki.admin_key)

    @property
    def url(self) -> str:
        """``https://127.0.0.1:<port>``."""
        if not self.port:
            raise RuntimeError("kube-apiserver has not been started")
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        """Start on a fresh loopback port and wait until ``/readyz`` is 200."""
        try:
            retry_port_races(lambda: self._start_on(free_port()))
        except StartError:
            self.port = 0
            raise

    def restart(self) -> None:
        """Stop, then start again on the same port with the same flags, certificates and etcd."""
        if not self.port:
            raise RuntimeError("kube-apiserver has not been started")
        self.stop()
        # Another process may grab the port in the gap; give it a few tries before giving up.
        retry_port_races(lambda: self._start_on(self.port), pause=0.5, clock=self._clock)

    def stop(self) -> None:
        """Stop kube-apiserver (SIGTERM, then SIGKILL); idempotent."""
        if self._process is not None:
            self._process.stop()

    def running(self) -> bool:
        return self._process is not None and self._process.running()

    @property
    def pid(self) -> int | None:
        """The process's id while it runs (for ``/proc`` readers: CPU and memory in benchmarks)."""
        return self._process.pid if self._process is not None and self._process.running() else None

    def ready(self) -> bool:
        """True if ``GET /readyz`` answers 200; False while unreachable or not ready."""
        try:
            return self.request("GET", "/readyz", timeout=5.0).status == 200
        except EnvtestError:
            return False

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        *,
        content_type: str = "application/json",
        timeout: float = 30.0,
    ) -> Response:
        """One HTTPS request as the admin; any status is returned, transport failures raise EnvtestError."""
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=self._ssl, timeout=timeout)
        headers = {"Accept": "application/json"}
        if body is not None:
            headers["Content-Type"] = content_type
        try:
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return Response(status=response.status, body=response.read())
        except (OSError, http.client.HTTPException) as exc:
            raise EnvtestError(f"{method} {self.url}{path} failed: {exc!r}") from exc
        finally:
            conn.close()

    def _start_on(self, port: int) -> None:
        argv = [
            str(self._binary),
            *apiserver_flags(port=port, etcd_url=self._etcd_url, pki=self.pki, extra=self._extra_flags),
        ]
        self._process = ManagedProcess("kube-apiserver", argv, self._log_path)
        self.port = port
        start_until_ready(self._process, self.ready, timeout=self._start_timeout, clock=self._clock)

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        url = f"https://127.0.0.1:{self.port}" if self.port else None
        return f"APIServer({state}, url={url!r})"
