"""A single-member etcd on loopback for a test control plane.

Go origin: controller-runtime ``pkg/internal/testing/controlplane/etcd.go``. Guarantees:

- etcd listens for clients and peers on 127.0.0.1 only, on ports chosen at start; if another process takes
  a port between choosing and binding, start retries on new ports.
- Its data lives under the given directory; ``--unsafe-no-fsync`` trades durability (nobody needs it in a
  test) for speed.
- :meth:`Etcd.start` returns once ``GET /health`` reports healthy.
- :meth:`Etcd.compact` compacts the keyspace to a fresh revision through etcd's v3 HTTP/JSON gateway, so
  reads and watches of any earlier revision that reach etcd fail (kube-apiserver answers 410 Gone).

Deliberately missing: TLS between kube-apiserver and etcd (loopback only, one user), clusters of more than
one member, and restarting etcd.
"""

from __future__ import annotations

import base64
import http.client
from pathlib import Path
from typing import Any

import orjson

from controller.clock import REAL_CLOCK, Clock
from controller.envtest.errors import EnvtestError, StartError
from controller.envtest.process import ManagedProcess, free_port, retry_port_races, start_until_ready

# Written before each compaction; outside kube-apiserver's /registry prefix, so no client ever sees it.
_COMPACTION_MARKER = b"/envtest/compaction-marker"


class Etcd:
    """One etcd process. Not thread-safe: one owner starts and stops it."""

    def __init__(
        self,
        binary: Path,
        data_dir: Path,
        log_path: Path,
        *,
        clock: Clock = REAL_CLOCK,
        start_timeout: float = 60.0,
    ) -> None:
        self._binary = binary
        self._data_dir = data_dir
        self._log_path = log_path
        self._clock = clock
        self._start_timeout = start_timeout
        self._process: ManagedProcess | None = None
        self.client_port = 0
        self.peer_port = 0

    @property
    def client_url(self) -> str:
        """``http://127.0.0.1:<port>``, where kube-apiserver and :meth:`compact` talk to etcd."""
        if not self.client_port:
            raise RuntimeError("etcd has not been started")
        return f"http://127.0.0.1:{self.client_port}"

    def argv(self, client_port: int, peer_port: int) -> list[str]:
        """The command line for the given ports."""
        client = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        return [
            str(self._binary),
            "--name=default",
            f"--data-dir={self._data_dir}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--initial-cluster-state=new",
            "--unsafe-no-fsync=true",
        ]

    def start(self) -> None:
        """Start etcd on fresh loopback ports and wait until it is healthy."""
        try:
            retry_port_races(self._start_on_free_ports)
        except StartError:
            self.client_port = self.peer_port = 0
            raise

    def _start_on_free_ports(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self._process = ManagedProcess("etcd", self.argv(client_port, peer_port), self._log_path)
        self.client_port, self.peer_port = client_port, peer_port
        start_until_ready(self._process, self.healthy, timeout=self._start_timeout, clock=self._clock)

    def stop(self) -> None:
        """Stop etcd (SIGTERM, then SIGKILL); idempotent."""
        if self._process is not None:
            self._process.stop()

    def running(self) -> bool:
        return self._process is not None and self._process.running()

    @property
    def pid(self) -> int | None:
        """The process's id while it runs (for ``/proc`` readers: CPU and memory in benchmarks)."""
        return self._process.pid if self._process is not None and self._process.running() else None

    def healthy(self) -> bool:
        """True if ``GET /health`` says so; False while etcd is unreachable or unhealthy."""
        try:
            status, body = self._call("GET", "/health", None, timeout=2.0)
        except OSError:
            return False
        if status != 200:
            return False
        try:
            return bool(orjson.loads(body).get("health") == "true")
        except orjson.JSONDecodeError:
            return False

    def compact(self) -> int:
        """Compact etcd to a fresh revision and return it.

        Afterwards a watch from a resourceVersion read before the call gets 410 Expired (unless it was the
        newest revision of the whole keyspace), and one from a resourceVersion read after the call works.
        A marker key outside kube-apiserver's ``/registry`` prefix is written first and etcd is compacted to
        its revision: compacting to the revision of an object's own last write would make a watch from just
        before that write fail with a 500 instead (its previous value is gone). ``physical`` compaction:
        when this returns, the old revisions are gone.
        """
        put = self._gateway("/v3/kv/put", {"key": _b64(_COMPACTION_MARKER), "value": _b64(b"compacted")})
        revision = int(put["header"]["revision"])
        self._gateway("/v3/kv/compaction", {"revision": str(revision), "physical": True})
        return revision

    def _gateway(self, path: str, request: dict[str, Any]) -> dict[str, Any]:
        try:
            status, body = self._call("POST", path, orjson.dumps(request), timeout=30.0)
        except OSError as exc:
            raise EnvtestError(f"etcd {path} at {self.client_url} failed: {exc}") from exc
        if status != 200:
            raise EnvtestError(f"etcd {path}: HTTP {status}: {body.decode('utf-8', 'replace')[:1000]}")
        reply: dict[str, Any] = orjson.loads(body)
        return reply

    def _call(self, method: str, path: str, body: bytes | None, *, timeout: float) -> tuple[int, bytes]:
        conn = http.client.HTTPConnection("127.0.0.1", self.client_port, timeout=timeout)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            response = conn.getresponse()
            return response.status, response.read()
        except http.client.HTTPException as exc:
            raise OSError(f"bad HTTP exchange with etcd: {exc!r}") from exc
        finally:
            conn.close()

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        url = f"http://127.0.0.1:{self.client_port}" if self.client_port else None
        return f"Etcd({state}, client_url={url!r})"


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")
