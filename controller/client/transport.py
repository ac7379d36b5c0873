"""Raw HTTP to the API server over the official client's connection machinery (the only ``kubernetes`` user,
through ``controller.client.kubernetes_package``).

Go origin: client-go ``rest.Config`` + ``transport`` (TLS, bearer-token rotation, user agent, dialer
keepalive) and ``tools/clientcmd`` (kubeconfig and in-cluster loading, in controller-runtime's
``config.GetConfig`` order).

What it does:

- **Config loading** through ``kubernetes.config`` (``kubernetes`` 37.x): a kubeconfig path and context, or
  the in-cluster service account. :meth:`Transport.load` tries, like controller-runtime: an explicit path,
  then ``$KUBECONFIG``, then in-cluster, then ``~/.kube/config``.
- **Credentials stay fresh.** Every request reads its ``Authorization`` header from
  ``Configuration.auth_settings()``, which runs the ``refresh_api_key_hook`` the loaders install: exec
  plugins and auth providers are re-run when their token expires, and the in-cluster token file (a projected,
  rotating token) is re-read every minute. The hook runs under a lock, so concurrent workers refresh once.
- **Derived transports.** :meth:`Transport.with_options` gives a transport with other timeouts or another
  pool size on the same loaded configuration (and refresh lock): nothing is loaded twice, and one refresh
  serves both (the manager's leader-election client).
- **Two connection pools, one per kind of request**, each sized by the caller's ``pool_size`` (open
  watches + workers + slack; each open watch holds a connection for its whole life): watches over urllib3's
  pool; whole-answer requests over libcurl's handles (``controller.client.curl``: a third of the client CPU
  per request) whenever the loaded configuration needs nothing that path lacks, else over urllib3 too. TCP
  keepalive as client-go dials (30 s idle, 15 s probes) and ``TCP_NODELAY`` on both. A loopback server never
  goes through an environment proxy, as Go's ``ProxyFromEnvironment`` never proxies loopback.
- **Raw requests**: method, path, query, body bytes, content type, (connect, read) timeout. The answer is
  status, headers and body bytes, or for a watch an open :class:`Stream` of raw chunks. No generated models,
  no JSON here: bodies are bytes both ways.
- **Failures below HTTP** become :class:`~controller.client.errors.ConnectionFailed`,
  :class:`~controller.client.errors.RequestTimeout` or :class:`~controller.client.errors.WatchTimeout`, the
  urllib3 exception chained. HTTP failure statuses are *not* raised here: the caller maps them once
  (``controller.client.errors.from_response``).

Why not ``ApiClient.param_serialize`` + ``call_api``: in v37 ``RESTClientObject.request`` re-encodes any
JSON-typed body with the stdlib ``json.dumps`` (so bytes cannot pass through, and every object would be
serialised twice), and it adds client-go-style retries we implement, with metrics, one layer up. We use the
same two pieces it is built on instead: the auth settings of the ``Configuration`` and the urllib3 pool
manager of its ``RESTClientObject`` (so proxy, SNI, CA data and client certificates are configured by the
official code). Those pieces are imported without the package's generated API classes and models, nor the
OIDC refresh's requests and oauthlib until a kubeconfig uses it (``controller.client.kubernetes_package``:
16 MiB of resident memory the manager never uses).

Retries here (both paths alike): a failed connect is retried up to twice, and a broken read (a stale
keep-alive connection) only for idempotent methods (GET, PUT, DELETE, HEAD); never a read timeout, never a
status code. Retry-After handling lives in ``controller.client.client``.

Deliberately missing: HTTP/2 and its health pings (both paths speak HTTP/1.1; a read timeout on every watch
stands in for the pings), rotating *client certificates* from exec plugins (the TLS context is built once),
protobuf, and sharing a transport across ``fork()``.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import metadata
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self, cast
from urllib.parse import urlencode, urlsplit

import urllib3
import urllib3.connectionpool

from controller.client import kubernetes_package
from controller.client.curl import CurlPool, supports
from controller.client.errors import (
    ConfigError,
    ConnectionFailed,
    RequestTimeout,
    TransportError,
    WatchTimeout,
)

if TYPE_CHECKING:
    from controller.client.kubernetes_package import Configuration

# Loaded without the package's generated API and models (controller.client.kubernetes_package).
_kubernetes = kubernetes_package.load()

Query = Mapping[str, str | int | bool] | Sequence[tuple[str, str | int | bool]]

DEFAULT_POOL_SIZE = 32
# client-go dials with a 30 s timeout; the API server's own request timeout is 60 s, so a read timeout a
# little above it tells a slow answer from a dead connection.
DEFAULT_CONNECT_TIMEOUT = 30.0
DEFAULT_READ_TIMEOUT = 70.0

_READ_CHUNK = 64 * 1024


def default_user_agent() -> str:
    """``kubeflow-trainer-py/<version> (python)``, the distribution's installed version."""
    try:
        version = metadata.version("kubeflow-trainer-py")
    except metadata.PackageNotFoundError:
        version = "0.0.0"
    return f"kubeflow-trainer-py/{version} (python)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """A complete HTTP answer. ``headers`` is case-insensitive."""

    status: int
    headers: Mapping[str, str]
    body: bytes

    def read_body(self) -> bytes:
        """The body (already read), as :meth:`Stream.read_body` gives a stream's."""
        return self.body


class Stream:
    """An open HTTP answer whose body is read as it arrives (a watch).

    The owner thread iterates :meth:`chunks`; any thread may call :meth:`shutdown`, which shuts the socket's
    read side so a reader blocked in ``recv`` wakes at once and :meth:`chunks` ends quietly. :meth:`close`
    releases the connection; :meth:`chunks` calls it when it finishes, and it is idempotent.
    """

    def __init__(self, response: urllib3.HTTPResponse, *, read_timeout: float | None) -> None:
        self._response = response
        self._read_timeout = read_timeout
        self._lock = threading.Lock()
        self._shut = False
        self._closed = False
        self.status: int = response.status
        self.headers: Mapping[str, str] = response.headers

    def read_body(self) -> bytes:
        """The rest of the body at once (for a failure status), then close."""
        try:
            return self._response.read(decode_content=True)
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise ConnectionFailed(f"reading the response body failed: {exc}") from exc
        finally:
            self.close()

    def chunks(self) -> Iterator[bytes]:
        """Yield the body as it arrives, one HTTP chunk (or up to 64 KiB) at a time.

        Raises :class:`WatchTimeout` when nothing arrives for the read timeout and :class:`ConnectionFailed`
        when the connection breaks; after :meth:`shutdown` it just ends.
        """
        response = self._response
        try:
            if response.chunked and response.supports_chunked_reads():
                yield from response.read_chunked(None, decode_content=True)
            else:
                while True:
                    data = response.read1(_READ_CHUNK)
                    if not data:
                        break
                    yield data
        except urllib3.exceptions.ReadTimeoutError as exc:
            if not self._shut:
                raise WatchTimeout(f"no data on the stream for {self._read_timeout} s") from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            if not self._shut:
                raise ConnectionFailed(f"the stream broke: {exc}") from exc
        finally:
            self.close()

    def shutdown(self) -> None:
        """Wake and end a reader blocked on this stream; safe from any thread, idempotent."""
        with self._lock:
            if self._shut or self._closed:
                self._shut = True
                return
            self._shut = True
            # OSError/RuntimeError/ValueError: the socket is already gone (released to the pool, or closed
            # by the peer), so nothing can be blocked on it.
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                self._response.shutdown()

    def close(self) -> None:
        """Release the connection (closed, since the body may be unread). Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._response.close()
        self._response.release_conn()

    def __repr__(self) -> str:
        state = "closed" if self._closed else ("shut down" if self._shut else "open")
        return f"Stream(status={self.status}, {state})"


class Transport:
    """Sends raw requests to one API server. Thread-safe; share one per process (never across ``fork()``)."""

    def __init__(
        self,
        configuration: Configuration,
        *,
        pool_size: int = DEFAULT_POOL_SIZE,
        user_agent: str | None = None,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        read_timeout: float = DEFAULT_READ_TIMEOUT,
    ) -> None:
        """Wrap a loaded ``kubernetes.client.Configuration``; prefer the ``from_*``/``load`` constructors."""
        if pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, got {pool_size}")
        # Read once, by the ApiClient below: a transport derived later (with_options) sets its own size.
        configuration.connection_pool_maxsize = pool_size
        configuration.keep_alive = True  # client-go's dialer keepalive (kubernetes.utils.keepalive)
        if _is_loopback(configuration.host):
            configuration.proxy = None
        self._configuration = configuration
        # The urllib3 pool an ApiClient would build from this configuration (proxy, SNI, CA data, client
        # certificates, keepalive socket options), without the ApiClient and its generated models.
        self._rest = _kubernetes.rest.RESTClientObject(configuration)
        self._pool: urllib3.PoolManager = self._rest.pool_manager
        # Whole-answer requests go over libcurl when the configuration needs nothing it lacks (much less
        # client CPU per request: controller.client.curl); watches, and any other configuration, urllib3.
        self._curl: CurlPool | None = (
            CurlPool.for_configuration(configuration, size=pool_size, connect_timeout=connect_timeout)
            if supports(configuration)
            else None
        )
        # Guards auth_settings(), whose refresh hook rewrites the configuration (shared by with_options).
        self._auth_lock = threading.Lock()
        self.server: str = configuration.host.rstrip("/")
        self.host: str = urlsplit(self.server).netloc
        self.pool_size = pool_size
        self.user_agent = user_agent or default_user_agent()
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._retries = _Retry(
            total=2, connect=2, read=2, status=0, other=0, redirect=0, raise_on_status=False
        )

    # --- construction ------------------------------------------------------------------------------------

    @classmethod
    def from_kubeconfig(
        cls, path: str | None = None, context: str | None = None, **options: Any
    ) -> Transport:
        """From a kubeconfig file (``$KUBECONFIG`` or ``~/.kube/config`` when ``path`` is None)."""
        configuration = _kubernetes.configuration()
        try:
            _kubernetes.config.load_kube_config(
                config_file=path,
                context=context,
                client_configuration=configuration,
                persist_config=False,
            )
        except (_kubernetes.config.ConfigException, OSError, KeyError, ValueError) as exc:
            raise ConfigError(f"cannot load kubeconfig {path or '(default)'}: {exc}") from exc
        return cls(configuration, **options)

    @classmethod
    def in_cluster(cls, **options: Any) -> Transport:
        """From the pod's service account (token and CA under ``/var/run/secrets/kubernetes.io``)."""
        configuration = _kubernetes.configuration()
        try:
            _kubernetes.config.load_incluster_config(client_configuration=configuration)
        except (_kubernetes.config.ConfigException, OSError) as exc:
            raise ConfigError(f"cannot load in-cluster config: {exc}") from exc
        return cls(configuration, **options)

    @classmethod
    def load(cls, kubeconfig: str | None = None, context: str | None = None, **options: Any) -> Transport:
        """controller-runtime's ``GetConfig`` order: ``kubeconfig``, ``$KUBECONFIG``, in-cluster,
        ``~/.kube/config``. ``context`` applies to the kubeconfig sources."""
        if kubeconfig:
            return cls.from_kubeconfig(kubeconfig, context, **options)
        if os.environ.get("KUBECONFIG"):
            return cls.from_kubeconfig(os.environ["KUBECONFIG"], context, **options)
        if os.environ.get("KUBERNETES_SERVICE_HOST") and os.environ.get("KUBERNETES_SERVICE_PORT"):
            return cls.in_cluster(**options)
        home = os.path.expanduser("~/.kube/config")
        if os.path.exists(home):
            return cls.from_kubeconfig(home, context, **options)
        raise ConfigError("no kubeconfig given, $KUBECONFIG unset, not in a cluster, and no ~/.kube/config")

    @classmethod
    def for_url(
        cls,
        url: str,
        *,
        token: str | None = None,
        ca_file: str | None = None,
        cert_file: str | None = None,
        key_file: str | None = None,
        **options: Any,
    ) -> Transport:
        """For a server given by URL, with optional bearer token and TLS files (tests, stubs, tools)."""
        configuration = _kubernetes.configuration(host=url.rstrip("/"))
        if token:
            configuration.api_key["BearerToken"] = token
            configuration.api_key_prefix["BearerToken"] = "Bearer"
        configuration.ssl_ca_cert = ca_file
        configuration.cert_file = cert_file
        configuration.key_file = key_file
        return cls(configuration, **options)

    def with_options(
        self,
        *,
        pool_size: int | None = None,
        user_agent: str | None = None,
        connect_timeout: float | None = None,
        read_timeout: float | None = None,
    ) -> Transport:
        """A transport to the same server with the same credentials, and the options given instead of ours.

        The loaded configuration is shared, not loaded again: one exec plugin, auth provider or token file
        keeps both transports' credentials fresh, refreshed once under one lock. The new transport has its
        own connection pool (``pool_size`` connections); closing either leaves the other open. This is how a
        client with short timeouts for leader election is made (client-go's ``rest.CopyConfig`` with
        ``Timeout`` set).
        """
        derived = Transport(
            self._configuration,
            pool_size=self.pool_size if pool_size is None else pool_size,
            user_agent=self.user_agent if user_agent is None else user_agent,
            connect_timeout=self.connect_timeout if connect_timeout is None else connect_timeout,
            read_timeout=self.read_timeout if read_timeout is None else read_timeout,
        )
        derived._auth_lock = self._auth_lock  # the shared configuration refreshes under one lock
        return derived

    # --- requests ----------------------------------------------------------------------------------------

    def _url(self, path: str, query: Query | None) -> str:
        if not query:
            return self.server + path
        pairs = query.items() if isinstance(query, Mapping) else query
        encoded = [(k, ("true" if v else "false") if isinstance(v, bool) else v) for k, v in pairs]
        return self.server + path + "?" + urlencode(encoded)

    def _headers(self, content_type: str | None) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": self.user_agent}
        if content_type:
            headers["Content-Type"] = content_type
        # auth_settings() runs the loaders' refresh hook (exec plugin, auth provider, token file).
        with self._auth_lock:
            auth = self._configuration.auth_settings()
        bearer = auth.get("BearerToken")
        if bearer is not None and bearer["value"]:
            headers[bearer["key"]] = bearer["value"]
        return headers

    def _send(
        self,
        method: str,
        path: str,
        *,
        query: Query | None,
        read_timeout: float | None,
        stream: bool,
        body: bytes | None = None,
        content_type: str | None = None,
    ) -> urllib3.HTTPResponse:
        try:
            response = self._pool.urlopen(
                method,
                self._url(path, query),
                body=body,
                headers=self._headers(content_type if body is not None else None),
                retries=self._retries,
                redirect=False,
                timeout=urllib3.Timeout(connect=self.connect_timeout, read=read_timeout),
                preload_content=not stream,
            )
        except urllib3.exceptions.MaxRetryError as exc:
            raise _transport_error(method, path, exc.reason or exc) from exc
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise _transport_error(method, path, exc) from exc
        # The pool manager builds urllib3.HTTPResponse; BaseHTTPResponse lacks the chunked-read API.
        return cast(urllib3.HTTPResponse, response)

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Query | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        read_timeout: float | None = None,
    ) -> Response:
        """Send one request and read the whole answer. Failure statuses are returned, not raised."""
        if read_timeout is None:
            read_timeout = self.read_timeout
        if self._curl is not None:
            status, headers, answer = self._curl.request(
                method,
                self._url(path, query),
                self._headers(content_type if body is not None else None),
                body,
                read_timeout=read_timeout,
                what=f"{method} {path}",
            )
            return Response(status=status, headers=headers, body=answer)
        response = self._send(
            method,
            path,
            query=query,
            body=body,
            content_type=content_type,
            read_timeout=read_timeout,
            stream=False,
        )
        return Response(status=response.status, headers=response.headers, body=response.data or b"")

    def stream(
        self, method: str, path: str, *, query: Query | None = None, read_timeout: float | None = None
    ) -> Stream:
        """Send one request and return as soon as the headers arrive; read the body from the
        :class:`Stream`. ``read_timeout`` bounds the silence between two reads (None waits forever)."""
        response = self._send(method, path, query=query, read_timeout=read_timeout, stream=True)
        return Stream(response, read_timeout=read_timeout)

    def close(self) -> None:
        """Close every pooled connection. Streams still open keep theirs until they are closed."""
        self._rest.close()
        if self._curl is not None:
            self._curl.close()

    def __repr__(self) -> str:
        return f"Transport(server={self.server!r}, pool_size={self.pool_size})"


class _Retry(urllib3.Retry):
    """urllib3's retries, except that a read timeout is final: the request may have been carried out, and
    client-go does not retry it either. Broken reads (a stale keep-alive connection) stay retried for
    idempotent methods."""

    def increment(
        self,
        method: str | None = None,
        url: str | None = None,
        response: urllib3.BaseHTTPResponse | None = None,
        error: Exception | None = None,
        _pool: urllib3.connectionpool.ConnectionPool | None = None,
        _stacktrace: TracebackType | None = None,
    ) -> Self:
        if isinstance(error, urllib3.exceptions.ReadTimeoutError):
            raise error
        return super().increment(method, url, response, error, _pool, _stacktrace)


def _transport_error(method: str, path: str, exc: BaseException) -> TransportError:
    what = f"{method} {path}"
    if isinstance(exc, urllib3.exceptions.ReadTimeoutError):
        return RequestTimeout(f"{what}: no response within the read timeout")
    if isinstance(exc, urllib3.exceptions.NewConnectionError):  # a subclass of ConnectTimeoutError
        return ConnectionFailed(f"{what}: cannot connect: {exc}")
    if isinstance(exc, urllib3.exceptions.ConnectTimeoutError):
        return ConnectionFailed(f"{what}: timed out connecting")
    return ConnectionFailed(f"{what}: {exc}")


def _is_loopback(url: str) -> bool:
    hostname = urlsplit(url).hostname or ""
    if hostname == "localhost":
        return True
    try:
        return ipaddress.ip_address(hostname).is_loopback
    except ValueError:
        return False
