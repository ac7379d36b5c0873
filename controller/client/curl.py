"""Whole-answer API requests over libcurl (``pycurl``): the path of every read and write the controller makes
outside its watches.

Why a second HTTP stack beside urllib3: the client CPU of one request. Measured against the Tier 1
kube-apiserver over TLS on loopback (a server-side apply of a ConfigMap, one thread, 2 cores): urllib3 over
``http.client`` costs 400 to 900 µs of the calling thread's CPU, most of it Python (header parsing through
the ``email`` package, urllib3's pool, retry and timeout objects); libcurl 125 to 250 µs. A TrainJob costs
the manager two applies, which were a third of its CPU. Watches stay on urllib3 (``Transport.stream``): a
watch is one request that lives for minutes, and its cost is in reading events, not in making requests.

What it does:

- **A pool of easy handles** (:class:`CurlPool`), last in first out, at most ``size`` idle: a request takes
  one, or makes one, and gives it back; each keeps its connection alive between requests, as a connection
  pool does. A handle is used by one thread at a time (libcurl's rule); ``NOSIGNAL`` makes that safe with
  threads.
- **TLS** from the loaded ``kubernetes.client.Configuration``: the CA as a file or in memory, the client
  certificate and key files, verification on or off. :func:`supports` says whether a configuration needs
  nothing more; one that sets a proxy, a TLS server name, a host-name override, socket options or its own
  retries is left to urllib3 (``Transport`` decides), so every configuration the official client accepts
  still works.
- **HTTP/1.1** (as the urllib3 path), TCP keepalive as client-go dials (30 s idle, 15 s probes),
  ``TCP_NODELAY``, no ``Expect: 100-continue``, no proxy from the environment (as the urllib3 path: a
  kubeconfig's ``proxy-url`` goes to urllib3).
- **Timeouts**: the connect timeout; the read timeout as "no byte for that long" (``LOW_SPEED_LIMIT`` of one
  byte a second over ``LOW_SPEED_TIME``; libcurl counts whole seconds, so it is rounded up).
- **Retries as urllib3's were**: a failed connect is tried twice more, a connection that broke before an
  answer twice more for idempotent methods only (libcurl itself re-sends once on a kept-alive connection it
  finds closed); never a timeout, never a status code.
- **Failures below HTTP** become :class:`~controller.client.errors.ConnectionFailed` or
  :class:`~controller.client.errors.RequestTimeout`, libcurl's message kept.

Deliberately missing: HTTP/2, cookies, redirects (none is followed), and compression (the API server
compresses only what a client asks for).
"""

from __future__ import annotations

import math
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import pycurl

from controller.client.errors import ConnectionFailed, RequestTimeout, TransportError

__all__ = ["CurlPool", "Headers", "supports"]

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS", "TRACE"})
"""The methods a broken connection may be retried for: sending them twice does what sending them once does."""

RETRIES = 2
"""Further tries after a failed connect (any method) or a broken connection (idempotent methods)."""

_CONNECT_FAILURES = frozenset(
    {pycurl.E_COULDNT_CONNECT, pycurl.E_COULDNT_RESOLVE_HOST, pycurl.E_COULDNT_RESOLVE_PROXY}
)
_BROKEN = frozenset({pycurl.E_GOT_NOTHING, pycurl.E_RECV_ERROR, pycurl.E_SEND_ERROR, pycurl.E_PARTIAL_FILE})
_KEEPALIVE_IDLE_S = 30
_KEEPALIVE_INTERVAL_S = 15


def supports(configuration: Any) -> bool:
    """Whether a ``kubernetes.client.Configuration`` needs nothing this path lacks (see the module
    docstring); ``Transport`` sends a configuration that does over urllib3 instead."""
    return not (
        configuration.proxy
        or configuration.tls_server_name
        or configuration.assert_hostname is not None
        or configuration.socket_options is not None
        or configuration.retries is not None
        or (configuration.key_file and not configuration.cert_file)
    )


class Headers(Mapping[str, str]):
    """Response headers, looked up without regard to case (as HTTP names are); a repeated header's values
    joined with ``", "`` (RFC 9110's rule for combining field lines)."""

    __slots__ = ("_fields",)

    def __init__(self, fields: Mapping[str, tuple[str, str]]) -> None:
        self._fields = fields
        """lower-cased name → (name as sent, value)."""

    @classmethod
    def parse(cls, lines: Sequence[bytes]) -> Headers:
        """The header block of the last response in ``lines`` (libcurl hands over an interim ``100
        Continue`` block too)."""
        fields: dict[str, tuple[str, str]] = {}
        for raw in lines:
            line = raw.decode("iso-8859-1").rstrip("\r\n")
            if line.startswith("HTTP/"):
                fields = {}  # a new status line: the previous block was interim
                continue
            name, colon, value = line.partition(":")
            if not colon or not name:
                continue
            value = value.strip()
            key = name.strip().lower()
            before = fields.get(key)
            fields[key] = (name.strip(), value) if before is None else (before[0], f"{before[1]}, {value}")
        return cls(fields)

    def __getitem__(self, name: str) -> str:
        return self._fields[name.lower()][1]

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.lower() in self._fields

    def __iter__(self) -> Iterator[str]:
        return (name for name, _ in self._fields.values())

    def __len__(self) -> int:
        return len(self._fields)

    def __repr__(self) -> str:
        return f"Headers({dict(self.items())!r})"


class CurlPool:
    """Easy handles for one server and one set of credentials, made on demand, at most ``size`` kept idle.

    Thread-safe. ``tls`` holds the options every handle gets once (made by :meth:`for_configuration`).
    """

    __slots__ = ("_closed", "_connect_timeout_ms", "_idle", "_lock", "_size", "_tls")

    def __init__(self, tls: Mapping[int, Any], *, size: int, connect_timeout: float) -> None:
        self._tls = dict(tls)
        self._size = size
        self._connect_timeout_ms = max(1, math.ceil(connect_timeout * 1000))
        self._lock = threading.Lock()
        self._idle: list[pycurl.Curl] = []
        self._closed = False

    @classmethod
    def for_configuration(cls, configuration: Any, *, size: int, connect_timeout: float) -> CurlPool:
        """A pool with the TLS settings of a ``kubernetes.client.Configuration`` :func:`supports`."""
        tls: dict[int, Any] = {}
        if configuration.verify_ssl:
            if configuration.ssl_ca_cert:
                tls[pycurl.CAINFO] = configuration.ssl_ca_cert
            if configuration.ca_cert_data:
                data = configuration.ca_cert_data
                tls[pycurl.CAINFO_BLOB] = data.encode() if isinstance(data, str) else data
        else:
            tls[pycurl.SSL_VERIFYPEER] = 0
            tls[pycurl.SSL_VERIFYHOST] = 0
        if configuration.cert_file:
            tls[pycurl.SSLCERT] = configuration.cert_file
            if configuration.key_file:
                tls[pycurl.SSLKEY] = configuration.key_file
        return cls(tls, size=size, connect_timeout=connect_timeout)

    def _new(self) -> pycurl.Curl:
        curl = pycurl.Curl()
        curl.setopt(pycurl.NOSIGNAL, 1)
        curl.setopt(pycurl.HTTP_VERSION, pycurl.CURL_HTTP_VERSION_1_1)
        curl.setopt(pycurl.PROXY, "")  # not from the environment
        curl.setopt(pycurl.FOLLOWLOCATION, 0)
        curl.setopt(pycurl.TCP_NODELAY, 1)
        curl.setopt(pycurl.TCP_KEEPALIVE, 1)
        curl.setopt(pycurl.TCP_KEEPIDLE, _KEEPALIVE_IDLE_S)
        curl.setopt(pycurl.TCP_KEEPINTVL, _KEEPALIVE_INTERVAL_S)
        curl.setopt(pycurl.CONNECTTIMEOUT_MS, self._connect_timeout_ms)
        curl.setopt(pycurl.LOW_SPEED_LIMIT, 1)
        for option, value in self._tls.items():
            curl.setopt(option, value)
        return curl

    def _take(self) -> pycurl.Curl:
        with self._lock:
            if self._closed:
                raise ConnectionFailed("the transport is closed")
            if self._idle:
                return self._idle.pop()
        return self._new()

    def _give_back(self, curl: pycurl.Curl) -> None:
        with self._lock:
            if not self._closed and len(self._idle) < self._size:
                self._idle.append(curl)
                return
        curl.close()

    def request(
        self,
        method: str,
        url: str,
        headers: Mapping[str, str],
        body: bytes | None,
        *,
        read_timeout: float | None,
        what: str,
    ) -> tuple[int, Headers, bytes]:
        """Send one request and read the whole answer: (status, headers, body). Raises
        :class:`TransportError` below HTTP (its message begins with ``what``); failure statuses are
        returned."""
        attempt = 0
        while True:
            curl = self._take()
            failed = True
            try:
                answer = _perform(
                    curl, method=method, url=url, headers=headers, body=body, read_timeout=read_timeout
                )
                failed = False
                return answer
            except pycurl.error as exc:
                code = exc.args[0] if exc.args else 0
                number = int(curl.getinfo(pycurl.OS_ERRNO))
                retry = code in _CONNECT_FAILURES or (code in _BROKEN and method in IDEMPOTENT)
                if retry and attempt < RETRIES:
                    attempt += 1
                    continue
                # The system's error (a ConnectionRefusedError for ECONNREFUSED, as the socket module makes
                # it) goes in the chain of causes, where callers look for it (utilnet IsConnectionRefused).
                cause: BaseException = exc
                if number:
                    cause = OSError(number, os.strerror(number))
                    cause.__cause__ = exc
                raise _error(what, exc) from cause
            finally:
                # A handle whose request failed is closed: its connection is in an unknown state.
                if failed:
                    curl.close()
                else:
                    self._give_back(curl)

    def close(self) -> None:
        """Close every idle handle (and its connection); handles in use close when given back."""
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for curl in idle:
            curl.close()

    def __repr__(self) -> str:
        with self._lock:
            return f"CurlPool(idle={len(self._idle)}, size={self._size})"


def _perform(
    curl: pycurl.Curl,
    *,
    method: str,
    url: str,
    headers: Mapping[str, str],
    body: bytes | None,
    read_timeout: float | None,
) -> tuple[int, Headers, bytes]:
    chunks: list[bytes] = []
    lines: list[bytes] = []
    curl.setopt(pycurl.URL, url)
    if body is None:
        curl.setopt(pycurl.HTTPGET, 1)  # also forgets a previous request's body
    else:
        curl.setopt(pycurl.POSTFIELDS, body)
    curl.setopt(pycurl.CUSTOMREQUEST, method)
    curl.setopt(pycurl.NOBODY, 1 if method == "HEAD" else 0)
    curl.setopt(pycurl.HTTPHEADER, [*_header_lines(headers), "Expect:"])
    curl.setopt(pycurl.LOW_SPEED_TIME, 0 if read_timeout is None else max(1, math.ceil(read_timeout)))
    curl.setopt(pycurl.WRITEFUNCTION, chunks.append)
    curl.setopt(pycurl.HEADERFUNCTION, lines.append)
    try:
        curl.perform()
        status = int(curl.getinfo(pycurl.RESPONSE_CODE))
    finally:
        # The callbacks hold this request's lists: drop them with it.
        curl.setopt(pycurl.WRITEFUNCTION, _discard)
        curl.setopt(pycurl.HEADERFUNCTION, _discard)
    return status, Headers.parse(lines), b"".join(chunks)


def _discard(data: bytes) -> None:
    return None


def _header_lines(headers: Mapping[str, str]) -> Iterator[str]:
    for name, value in headers.items():
        if "\r" in value or "\n" in value:
            raise ValueError(f"header {name!r} has a line break in its value")
        yield f"{name}: {value}"


def _error(what: str, exc: pycurl.error) -> TransportError:
    code = exc.args[0] if exc.args else 0
    message = exc.args[1] if len(exc.args) > 1 else str(exc)
    if code == pycurl.E_OPERATION_TIMEDOUT:
        # libcurl says "Connection timed out after ..." or "Failed to connect ..." for the connect timeout,
        # "Operation too slow ..." for the read timeout (too few bytes for LOW_SPEED_TIME seconds).
        if "onnect" in message:
            return ConnectionFailed(f"{what}: timed out connecting")
        return RequestTimeout(f"{what}: no response within the read timeout")
    if code in _CONNECT_FAILURES:
        return ConnectionFailed(f"{what}: cannot connect: {message}")
    return ConnectionFailed(f"{what}: {message}")
