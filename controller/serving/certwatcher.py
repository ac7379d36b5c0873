"""The serving certificate of an HTTPS server, read from a certificate and key file and reloaded when they
change, without a restart.

Go origin: controller-runtime ``pkg/certwatcher`` (``CertWatcher``: ``ReadCertificate``, ``GetCertificate``,
the ``certwatcher_read_certificate_total`` and ``certwatcher_read_certificate_errors_total`` counters).

Guarantees:

- :meth:`CertWatcher.context` returns an :class:`ssl.SSLContext` holding the newest certificate and key pair
  that loaded. Before it hands one out it compares the files' identity (device, inode, size, modification
  time, following symlinks as a mounted Secret's ``..data`` swap needs) with that of the last read, and,
  while a file was modified less than 2 seconds ago, a digest of their contents too (a file rewritten in
  place within one tick of the kernel's coarse file clock keeps its size and time): when either file
  changed, it reads both again. A server that calls it per connection therefore serves a
  rotated certificate from the very next connection; connections already open keep theirs.
- A pair that does not load (a half-written rotation, a key that does not match, a missing file) is counted
  and logged (at info while a file is under 2 seconds old, a rotation half done; at error once the files
  have settled), and the previous certificate stays in use; the same unchanged files are not read again until
  they change. Before any pair has loaded, :meth:`context` raises :class:`CertificateNotReady`, and
  :meth:`ready` is False: the server is not ready (the readiness probe says so) until the certificate
  rotator, or whoever provides the files, has written them.
- Thread-safe: one lock guards the current context; nothing else runs under it.

Deliberately missing: the inotify watch and the 10-second poll thread of upstream. Reading on demand needs
no thread and sees a change sooner; the cost is two ``stat`` calls per connection.
"""

from __future__ import annotations

import hashlib
import os
import ssl
import threading
import time
from pathlib import Path

import structlog
from prometheus_client import Counter

from controller import metrics
from controller.serving.tlsconfig import TLSOptions, server_context

__all__ = [
    "CertWatcher",
    "CertificateNotReady",
    "read_certificate_errors_total",
    "read_certificate_total",
]

_log = structlog.get_logger("controller.serving.certwatcher")

read_certificate_total = Counter(
    "certwatcher_read_certificate_total", "Total number of certificate reads", registry=metrics.REGISTRY
)
read_certificate_errors_total = Counter(
    "certwatcher_read_certificate_errors_total",
    "Total number of certificate read errors",
    registry=metrics.REGISTRY,
)

_Identity = tuple[int, int, int, int]
# The files' identities, and their contents' digests while an identity is too recent to be trusted.
_Signature = tuple[_Identity | None, _Identity | None, bytes | None]

_RACY_NS = 2_000_000_000
"""A file modified less than this long ago may change again without its size or modification time changing
(the kernel stamps files with a coarse clock, a few milliseconds): its contents are compared too."""


class CertificateNotReady(RuntimeError):
    """No certificate and key pair has loaded yet."""


def _identity(path: Path) -> _Identity | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _digest(*paths: Path) -> bytes:
    digest = hashlib.sha256()
    for path in paths:
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return digest.digest()


class CertWatcher:
    """The current certificate of ``cert_path`` and ``key_path`` as a server context (see the module doc)."""

    def __init__(
        self,
        cert_path: str | os.PathLike[str],
        key_path: str | os.PathLike[str],
        *,
        tls: TLSOptions | None = None,
    ) -> None:
        self.cert_path = Path(cert_path)
        self.key_path = Path(key_path)
        self._tls = tls or TLSOptions()
        self._lock = threading.Lock()
        # The context of the newest pair that loaded (None: none yet), and the identity of the files at the
        # last read attempt, successful or not.
        self._context: ssl.SSLContext | None = None
        self._attempted: _Signature | None = None
        self._error = "not read yet"

    def _signature(self) -> _Signature:
        cert, key = _identity(self.cert_path), _identity(self.key_path)
        now = time.time_ns()
        if any(i is not None and now - i[3] < _RACY_NS for i in (cert, key)):
            return (cert, key, _digest(self.cert_path, self.key_path))
        return (cert, key, None)

    def _unchanged(self, signature: _Signature) -> bool:
        """Whether the files are those of the last read (call with the lock held)."""
        attempted = self._attempted
        if attempted is None or signature[:2] != attempted[:2]:
            return False
        if attempted[2] is None:
            return True  # read when the files were already settled
        digest = signature[2] if signature[2] is not None else _digest(self.cert_path, self.key_path)
        if digest != attempted[2]:
            return False
        self._attempted = signature  # once settled, the identities alone decide
        return True

    def read_certificate(self) -> bool:
        """Reads the files again if they changed since the last read; returns whether a pair is loaded."""
        signature = self._signature()
        with self._lock:
            if self._unchanged(signature):
                return self._context is not None
            self._attempted = signature
            read_certificate_total.inc()
            if signature[0] is None or signature[1] is None:
                missing = self.cert_path if signature[0] is None else self.key_path
                self._error = f"{missing} does not exist"
                read_certificate_errors_total.inc()
                _log.info("certwatcher.certificate_missing", path=str(missing))
                return self._context is not None
            context = server_context(self._tls)
            try:
                context.load_cert_chain(self.cert_path, self.key_path)
            except (OSError, ssl.SSLError, ValueError) as exc:
                self._error = f"cannot load {self.cert_path} and {self.key_path}: {exc}"
                read_certificate_errors_total.inc()
                # Files written within the last 2 s are most likely a rotation between its two renames
                # (the next read, after the second, loads): info. A settled pair that fails is an error.
                log = _log.info if signature[2] is not None else _log.error
                log(
                    "certwatcher.read_failed",
                    cert=str(self.cert_path),
                    key=str(self.key_path),
                    error=str(exc),
                    settled=signature[2] is None,
                )
                return self._context is not None
            replaced = self._context is not None
            self._context = context
            self._error = ""
        _log.info(
            "certwatcher.certificate_updated" if replaced else "certwatcher.certificate_loaded",
            cert=str(self.cert_path),
        )
        return True

    def context(self) -> ssl.SSLContext:
        """The context of the newest loaded pair; raises :class:`CertificateNotReady` before the first."""
        self.read_certificate()
        with self._lock:
            if self._context is None:
                raise CertificateNotReady(f"certificates are not ready: {self._error}")
            return self._context

    def ready(self) -> bool:
        """Whether a pair has loaded (reading the files if they changed)."""
        return self.read_certificate()

    def __repr__(self) -> str:
        with self._lock:
            state = "loaded" if self._context is not None else "not ready"
        return f"CertWatcher({str(self.cert_path)!r}, {state})"
