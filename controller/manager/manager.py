"""The manager: owns everything a controller process runs, starts it in order and stops it in reverse.

Go origin: controller-runtime ``pkg/manager`` (``Manager``, ``internal.go``'s ``controllerManager``: start
order, ``runnables``, leader election wiring, graceful shutdown, health probes and the metrics endpoint) and
``pkg/manager/signals``.

Start order (:meth:`Manager.run`), each step finishing before the next:

1. the metrics server (``/metrics`` from ``controller.metrics.REGISTRY``) and the health probe server
   (``/healthz``, ``/readyz`` with the checks added so far; no check can be added after this point);
2. the event broadcaster;
3. the cache: its informers start and the manager waits until they have synced (``cache_sync_timeout``,
   2 minutes; a timeout fails :meth:`Manager.run`; :meth:`Manager.stop` ends the wait, and then ``run``
   stops what it started and returns);
4. runnables that do not need leader election;
5. leader election, if enabled: a ``coordination.k8s.io/v1`` Lease named ``leader_election_id``;
6. once leading (at once without leader election), the runnables that need it: the controllers.

Stop runs in reverse (controllers, then the lease is released, then the other runnables, the cache, the
broadcaster, the servers), sharing ``graceful_shutdown_timeout`` (30 s); what has not stopped by then is
abandoned (worker threads are daemons) and logged.

Guarantees:

- **Leader election gates the controllers.** No controller starts before the lease is ours.
- **Losing the lease stops reconciling at once:** the moment renewal fails (``renew_deadline``, 10 s), every
  controller takes no new request, the graceful timeout drops to zero, and :meth:`Manager.run` raises
  :class:`LeaderElectionLost`. **The process must then exit** (non-zero): the entry point lets the exception
  end ``main``; nothing here calls ``sys.exit``. A reconcile already running when the lease is lost finishes
  its current call (a thread cannot be interrupted); keep reconciles short and idempotent.
- **Graceful stop releases the lease** after the controllers have stopped, so a standby takes over within a
  retry period instead of a lease duration. The process should exit right after (upstream's condition for
  ``LeaderElectionReleaseOnCancel``).
- :meth:`Manager.run_until_signal` turns the first SIGTERM/SIGINT into a graceful stop; a second one exits
  the process at once with status 1. Signal handlers only set a flag; the manager runs on its own thread.
- The leader-election client's requests time out after ``max(renew_deadline / 2, 1 s)``, so one hung
  request cannot cost the lease (:meth:`Manager.from_kubeconfig` builds that client on the main client's
  configuration, :meth:`~controller.client.transport.Transport.with_options`; pass ``leader_election_client``
  yourself otherwise).
- :attr:`Manager.api_reader` reads from the API server, never from the cache (controller-runtime's
  ``GetAPIReader``). :meth:`Manager.from_kubeconfig` builds it on the main client's transport and
  RESTMapper with token buckets of its own, as controller-runtime's API reader is a client of its own (its
  own REST client, so its own rate limiter, per resource type): live reads do not queue behind the writes
  of the same resource type, and the other way round.
- Controller names are unique within a manager.

The metrics endpoint is plain HTTP unless ``metrics_tls_context`` is given (HTTPS with the context it
returns per connection, :class:`controller.serving.certwatcher.CertWatcher`), and open to whoever reaches it
unless ``metrics_filter_provider`` wraps it (controller-runtime's ``FilterProvider``:
:func:`controller.serving.filters.authentication_and_authorization`, built on the manager's client). Either
way it binds loopback (the default) or an explicit address such as the Pod IP, never every interface
unless ``allow_all_interfaces``.

Deliberately missing: warm-up of controllers on standby replicas, ``Add`` after start (runnables must be
added before :meth:`Manager.run`), pprof, and compression of metrics responses.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import socket
import ssl
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol

import structlog
from prometheus_client.exposition import choose_encoder

from controller import metrics
from controller.cache.informer_cache import DEFAULT_SYNC_PERIOD, ByObject, Cache, InformerCache
from controller.client.client import DEFAULT_BURST, DEFAULT_QPS, Client
from controller.client.gvk import GVK
from controller.clock import REAL_CLOCK, Clock
from controller.manager.leaderelection import LeaderElector, LeaseClient, LeaseLock, new_identity
from controller.manager.recorder import EventBroadcaster, EventRecorder
from controller.serving.app import App, Server, parse_bind_address
from controller.serving.healthz import Checker, Handler
from controller.serving.httpserver import Response

__all__ = [
    "LeaderElectionLost",
    "Manager",
    "ManagerError",
    "ManagerOptions",
    "Runnable",
]

_log = structlog.get_logger("controller.manager.manager")

LEASE_GVK = GVK("coordination.k8s.io", "v1", "Lease")
_SERVICE_ACCOUNT_NAMESPACE = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"


class ManagerError(RuntimeError):
    """The manager could not start or run (a server could not bind, caches did not sync...)."""


class LeaderElectionLost(ManagerError):
    """The lease was lost while leading. Exit the process: another replica is, or soon will be, leading."""


class Runnable(Protocol):
    """Something the manager starts and stops: a controller, or any component with a lifecycle.

    ``start`` returns once the component runs (it may block while it prepares, and must give up when
    ``stop`` is set); ``stop`` stops it and joins its threads within ``timeout`` seconds (None: no limit),
    returning whether it fully stopped.
    """

    def start(self, stop: threading.Event) -> None: ...

    def stop(self, timeout: float | None = None) -> bool: ...

    def need_leader_election(self) -> bool: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class ManagerOptions:
    """How a :class:`Manager` runs (controller-runtime ``manager.Options``); the defaults are upstream's.

    Servers: ``health_probe_bind_address`` and ``metrics_bind_address`` are ``host:port`` (``"0"`` or
    ``""`` disables the server); the host is loopback (the default) or an explicit address such as the Pod
    IP. Every-interface addresses (``0.0.0.0``, ``::``, ``":8080"``) are refused unless
    ``allow_all_interfaces``.

    Leader election: ``leader_election_id`` names the Lease, in ``leader_election_namespace`` (empty: the
    Pod's namespace from its service account); ``identity`` defaults to ``<hostname>_<uuid>``.

    Metrics: ``metrics_tls_context`` serves HTTPS with the context it returns for each connection;
    ``metrics_filter_provider`` is called with the manager's client and wraps the metrics app (an
    authentication and authorization filter).

    ``qps``/``burst`` configure the client :meth:`Manager.from_kubeconfig` builds (each resource type gets
    its own token bucket); a client passed to :class:`Manager` keeps its own. ``by_object``,
    ``sync_period``, ``gc_tuning`` and ``use_watch_list`` configure the default cache (not one passed to
    :class:`Manager`); ``use_watch_list`` None means on (streaming lists, as client-go 1.35) unless the
    environment has ``KUBE_FEATURE_WatchListClient=false``.
    """

    health_probe_bind_address: str = "127.0.0.1:8081"
    metrics_bind_address: str = "127.0.0.1:8080"
    metrics_tls_context: Callable[[], ssl.SSLContext] | None = None
    metrics_filter_provider: Callable[[Client], Callable[[App], App]] | None = None
    allow_all_interfaces: bool = False
    leader_election: bool = False
    leader_election_id: str = ""
    leader_election_namespace: str = ""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0
    identity: str | None = None
    graceful_shutdown_timeout: float = 30.0
    cache_sync_timeout: float = 120.0
    qps: float = DEFAULT_QPS
    burst: int = DEFAULT_BURST
    by_object: Mapping[GVK, ByObject] = field(default_factory=dict)
    sync_period: float = DEFAULT_SYNC_PERIOD
    gc_tuning: bool = False
    use_watch_list: bool | None = None
    clock: Clock = REAL_CLOCK

    def __post_init__(self) -> None:
        if self.leader_election and not self.leader_election_id:
            raise ValueError("leader_election_id is required when leader election is enabled")
        if self.leader_election and not (self.lease_duration > self.renew_deadline > self.retry_period > 0):
            raise ValueError("leader election needs lease_duration > renew_deadline > retry_period > 0")
        for address in (self.health_probe_bind_address, self.metrics_bind_address):
            parse_bind_address(address, allow_all_interfaces=self.allow_all_interfaces)


class _Waker:
    """A socket pair: wakes a thread blocked in :meth:`wait` from any thread, or from a signal (wakeup fd).

    Writing to a socket takes no Python lock, so it is safe where a signal interrupts arbitrary code; after
    :meth:`close`, :meth:`notify` is a no-op (a closed socket object never writes to a reused fd).
    """

    def __init__(self) -> None:
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)

    @property
    def write_fd(self) -> int:
        return self._writer.fileno()

    def notify(self) -> None:
        with contextlib.suppress(OSError):  # full (the reader will wake anyway) or closed
            self._writer.send(b"!")

    def wait(self, timeout: float | None = None) -> None:
        select.select([self._reader], [], [], timeout)
        with contextlib.suppress(OSError):
            self._reader.recv(4096)

    def close(self) -> None:
        self._reader.close()
        self._writer.close()


class Manager:
    """Runs a cache, controllers and their support (servers, events, leader election); see the module doc."""

    def __init__(
        self,
        client: Client,
        options: ManagerOptions | None = None,
        *,
        cache: Cache | None = None,
        leader_election_client: LeaseClient | None = None,
        api_reader: Client | None = None,
    ) -> None:
        """``cache`` defaults to an :class:`~controller.cache.informer_cache.InformerCache` over ``client``
        configured by ``options``; ``leader_election_client`` (default ``client``) writes the Lease;
        ``api_reader`` (default ``client``) is :attr:`api_reader`."""
        opts = options if options is not None else ManagerOptions()
        self.options = opts
        self.client = client
        self.api_reader = api_reader if api_reader is not None else client
        """For reads that must reach the API server (the cache cannot answer them); see the module doc."""
        self.clock = opts.clock
        self.cache: Cache = cache if cache is not None else _default_cache(client, opts)
        self._health_address = parse_bind_address(
            opts.health_probe_bind_address, allow_all_interfaces=opts.allow_all_interfaces
        )
        self._metrics_address = parse_bind_address(
            opts.metrics_bind_address, allow_all_interfaces=opts.allow_all_interfaces
        )
        self._graceful_shutdown_timeout = opts.graceful_shutdown_timeout
        self._cache_sync_timeout = opts.cache_sync_timeout
        self._leader_election = opts.leader_election
        self._leader_election_id = opts.leader_election_id
        self._leader_election_namespace = opts.leader_election_namespace
        self._leader_election_client = leader_election_client
        self._lease_duration = opts.lease_duration
        self._renew_deadline = opts.renew_deadline
        self._retry_period = opts.retry_period
        self.identity = opts.identity or new_identity()

        self._lock = threading.Lock()
        # Guarded by _lock.
        self._runnables: list[Runnable] = []
        self._names: set[str] = set()
        self._healthz: dict[str, Checker] = {}
        self._readyz: dict[str, Checker] = {}
        self._started = False
        self._leaders_started: list[Runnable] = []
        self._leaders_launched = False
        self._leading = False
        self._lost = False
        self._stop_requested = False
        self._broadcaster: EventBroadcaster | None = None

        self._abort_start = threading.Event()  # ends runnables' start-up waits (sync) on stop or loss
        self._waker = _Waker()
        self._elector: LeaderElector | None = None
        self._servers: dict[str, Server] = {}

    @classmethod
    def from_kubeconfig(
        cls,
        kubeconfig: str | None = None,
        context: str | None = None,
        options: ManagerOptions | None = None,
        *,
        user_agent: str | None = None,
    ) -> Manager:
        """Loads the config (``kubeconfig``, ``$KUBECONFIG``, in-cluster, ``~/.kube/config``) once, builds the
        client with ``options.qps``/``burst``, the API reader (the same transport and RESTMapper, token
        buckets of its own) and, with leader election, a second client on the same configuration whose
        requests time out after ``max(renew_deadline / 2, 1 s)``."""
        opts = options if options is not None else ManagerOptions()
        client = Client.load(kubeconfig, context, qps=opts.qps, burst=opts.burst, user_agent=user_agent)
        api_reader = Client(client.transport, qps=opts.qps, burst=opts.burst, mapper=client.mapper)
        lease_client: Client | None = None
        if opts.leader_election:
            timeout = max(opts.renew_deadline / 2, 1.0)
            transport = client.transport.with_options(read_timeout=timeout, connect_timeout=timeout)
            # No Retry-After retries inside a request: client-go's RenewDeadline context ends such waits,
            # and the elector tries again every retry period anyway, checking its deadline between tries.
            lease_client = Client(transport, qps=opts.qps, burst=opts.burst, clock=opts.clock, max_retries=0)
        return cls(client, opts, leader_election_client=lease_client, api_reader=api_reader)

    # --- configuration (before run) -------------------------------------------------------------------

    def add(self, runnable: Runnable) -> None:
        """Adds a runnable (a controller); it starts with the manager. Names must be unique."""
        name = getattr(runnable, "name", None)
        with self._lock:
            if self._started:
                raise ManagerError("runnables must be added before the manager starts")
            if isinstance(name, str):
                if name in self._names:
                    raise ValueError(f"a controller named {name!r} was already added")
                self._names.add(name)
            self._runnables.append(runnable)

    def add_healthz_check(self, name: str, check: Checker) -> None:
        """Adds a liveness check (served under ``/healthz`` and ``/healthz/<name>``)."""
        self._add_check(self._healthz, name, check)

    def add_readyz_check(self, name: str, check: Checker) -> None:
        """Adds a readiness check (served under ``/readyz`` and ``/readyz/<name>``)."""
        self._add_check(self._readyz, name, check)

    def _add_check(self, checks: dict[str, Checker], name: str, check: Checker) -> None:
        with self._lock:
            if self._started:
                raise ManagerError("checks must be added before the manager starts")
            if name in checks:
                raise ValueError(f"a check named {name!r} was already added")
            checks[name] = check

    def get_event_recorder(self, name: str) -> EventRecorder:
        """A recorder whose events name ``name`` as their source; events are written once running."""
        with self._lock:
            if self._broadcaster is None:
                self._broadcaster = EventBroadcaster(self.client, clock=self.clock)
            return self._broadcaster.new_recorder(name)

    @property
    def elected(self) -> bool:
        """Whether the leader runnables may run: leading, or leader election is off."""
        with self._lock:
            return self._leading or not self._leader_election

    @property
    def health_probe_address(self) -> tuple[str, int] | None:
        """The bound (host, port) of the health probe server once running (port 0 is resolved)."""
        return self._server_address("health-probe")

    @property
    def metrics_address(self) -> tuple[str, int] | None:
        """The bound (host, port) of the metrics server once running."""
        return self._server_address("metrics")

    def _server_address(self, name: str) -> tuple[str, int] | None:
        server = self._servers.get(name)
        return server.address if server is not None else None

    # --- running --------------------------------------------------------------------------------------

    def stop(self) -> None:
        """Asks :meth:`run` to stop gracefully. Safe from any thread (not from a signal handler)."""
        with self._lock:
            self._stop_requested = True
        self._abort_start.set()
        self._waker.notify()

    def run(self) -> None:
        """Starts everything in order, blocks until :meth:`stop` or the lease is lost, stops in reverse.

        Raises :class:`LeaderElectionLost` when the lease was lost (exit the process), and
        :class:`ManagerError` (or the component's own error) when start-up fails; everything started is
        stopped before it returns or raises.
        """
        with self._lock:
            if self._started:
                raise ManagerError("the manager was started more than once")
            self._started = True
        _log.info("manager.starting", identity=self.identity, leader_election=self._leader_election)
        failure: BaseException | None = None
        try:
            self._start_servers()
            if self._broadcaster is not None:
                self._broadcaster.start()
            if not self._start_cache():
                return  # stopped while the caches were syncing; the finally below stops what runs
            for runnable in self._runnables:
                if not runnable.need_leader_election():
                    runnable.start(self._abort_start)
            if self._leader_election:
                self._start_leader_election()
            else:
                with self._lock:
                    self._leading = True
            self._wait()
        except BaseException as exc:
            failure = exc
            raise
        finally:
            self._shutdown(failure)

    def _wait(self) -> None:
        while True:
            with self._lock:
                stop, lost, leading = self._stop_requested, self._lost, self._leading
                launched = self._leaders_launched
            if stop or lost:
                return
            if leading and not launched:
                self._start_leader_runnables()
                continue
            self._waker.wait()

    def _start_servers(self) -> None:
        with self._lock:
            healthz = Handler(self._healthz, kind="healthz")
            readyz = Handler(self._readyz, kind="readyz")
        if self._metrics_address is not None:
            app: App = _serve_metrics
            if self.options.metrics_filter_provider is not None:
                app = self.options.metrics_filter_provider(self.client)(app)
            self._servers["metrics"] = Server(
                "metrics", self._metrics_address, app, tls_context=self.options.metrics_tls_context
            )
        if self._health_address is not None:
            self._servers["health-probe"] = Server(
                "health-probe", self._health_address, _probe_app(healthz, readyz)
            )
        for server in self._servers.values():
            try:
                server.start()
            except OSError as exc:
                raise ManagerError(f"cannot serve {server!r}: {exc}") from exc

    def _start_cache(self) -> bool:
        """Starts the cache and waits for it to sync; False if :meth:`stop` ended the wait."""
        self.cache.start()
        if not self.cache.wait_for_cache_sync(self._cache_sync_timeout, stop=self._abort_start):
            if self._abort_start.is_set():
                _log.info("manager.stopped_before_caches_synced")
                return False
            raise ManagerError(f"caches did not sync within {self._cache_sync_timeout}s")
        _log.info("manager.caches_synced")
        return True

    def _start_leader_election(self) -> None:
        namespace = self._leader_election_namespace or _pod_namespace()
        lock = LeaseLock(
            self._leader_election_client or self.client,
            namespace=namespace,
            name=self._leader_election_id,
            identity=self.identity,
            gvk=LEASE_GVK,
        )
        self._elector = LeaderElector(
            lock,
            name=self._leader_election_id,
            on_started_leading=self._on_started_leading,
            on_stopped_leading=self._on_stopped_leading,
            lease_duration=self._lease_duration,
            renew_deadline=self._renew_deadline,
            retry_period=self._retry_period,
            release_on_cancel=True,
            clock=self.clock,
        )
        self._elector.start()

    def _on_started_leading(self) -> None:
        with self._lock:
            self._leading = True
        _log.info("leader.elected", identity=self.identity, lease=self._leader_election_id)
        self._waker.notify()

    def _on_stopped_leading(self) -> None:
        with self._lock:
            was_leading, self._leading = self._leading, False
            if self._stop_requested or not was_leading:
                return
            self._lost = True
            leaders = list(self._leaders_started)
        # Not asked to stop: the lease is lost. Stop taking work now, from this thread, before anything else.
        self._abort_start.set()
        for runnable in leaders:
            runnable.stop(0)
        _log.error("manager.leader_election_lost", identity=self.identity, lease=self._leader_election_id)
        self._waker.notify()

    def _start_leader_runnables(self) -> None:
        with self._lock:
            self._leaders_launched = True
        for runnable in self._runnables:
            if not runnable.need_leader_election():
                continue
            with self._lock:
                if self._lost or self._stop_requested:
                    return
                self._leaders_started.append(runnable)
            runnable.start(self._abort_start)
        _log.info("manager.controllers_started", count=len(self._leaders_started))

    def _shutdown(self, failure: BaseException | None) -> None:
        with self._lock:
            lost = self._lost
            self._stop_requested = True
            leaders = list(reversed(self._leaders_started))
        self._abort_start.set()
        budget = 0.0 if lost else self._graceful_shutdown_timeout
        deadline = self.clock.monotonic() + budget

        def remaining() -> float:
            return max(0.0, deadline - self.clock.monotonic())

        _log.info("manager.stopping", graceful_timeout_s=budget)
        stuck = [r for r in leaders if not r.stop(remaining())]
        if self._elector is not None:
            self._elector.stop(remaining() if not lost else 0.0)
        others = [r for r in reversed(self._runnables) if not r.need_leader_election()]
        stuck += [r for r in others if not r.stop(remaining())]
        try:
            self.cache.stop()  # may raise CacheMutationError (tests): the rest still stops
        finally:
            if self._broadcaster is not None:
                self._broadcaster.stop()
            for server in reversed(self._servers.values()):
                server.stop()
            self._waker.close()
        if stuck:
            _log.error("manager.graceful_shutdown_timed_out", runnables=[repr(r) for r in stuck])
        _log.info("manager.stopped", lost_leadership=lost)
        if lost and failure is None:
            raise LeaderElectionLost(f"leader election lost (lease {self._leader_election_id})")

    def run_until_signal(self) -> None:
        """:meth:`run` until SIGTERM or SIGINT (then a graceful stop); call from the main thread.

        A second signal exits the process at once with status 1. Raises what :meth:`run` raises, notably
        :class:`LeaderElectionLost`: let it end the process with a non-zero status.
        """
        if threading.current_thread() is not threading.main_thread():
            raise ManagerError("run_until_signal must be called from the main thread")
        waker = _Waker()
        signals: list[int] = []

        def on_signal(signum: int, frame: FrameType | None) -> None:
            if signals:
                os._exit(1)  # the second signal: no more waiting
            signals.append(signum)  # the wakeup fd has already woken the main thread

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        previous_fd = signal.set_wakeup_fd(waker.write_fd, warn_on_full_buffer=False)
        outcome: list[BaseException] = []
        finished = threading.Event()

        def target() -> None:
            try:
                self.run()
            except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which re-raises it
                outcome.append(exc)
            finally:
                finished.set()
                waker.notify()

        runner = threading.Thread(target=target, name="manager", daemon=True)
        runner.start()
        try:
            stop_sent = False
            while not finished.is_set():
                waker.wait()
                if signals and not stop_sent:
                    _log.info("manager.signal_received", signal=signal.Signals(signals[0]).name)
                    self.stop()
                    stop_sent = True
            runner.join()
        finally:
            signal.set_wakeup_fd(previous_fd)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
            waker.close()
        if outcome:
            raise outcome[0]

    def __repr__(self) -> str:
        with self._lock:
            state = (
                "lost"
                if self._lost
                else "stopping"
                if self._stop_requested
                else "leading"
                if self._leading
                else "started"
                if self._started
                else "new"
            )
            return f"Manager(identity={self.identity!r}, runnables={len(self._runnables)}, {state})"


def _pod_namespace() -> str:
    try:
        with open(_SERVICE_ACCOUNT_NAMESPACE, encoding="utf-8") as f:
            return f.read().strip()
    except OSError as exc:
        raise ManagerError("leader_election_namespace is required when not running in a cluster") from exc


def _serve_metrics(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
    if path != "/metrics":
        return Response(status=404, body=b"404 page not found\n")
    encoder, content_type = choose_encoder(headers.get("accept", ""))
    return Response(status=200, body=encoder(metrics.REGISTRY), content_type=content_type)


def _probe_app(healthz: Handler, readyz: Handler) -> Callable[..., Response]:
    def app(path: str, query: Mapping[str, list[str]], headers: Mapping[str, str]) -> Response:
        for prefix, handler in (("/healthz", healthz), ("/readyz", readyz)):
            if path == prefix or path.startswith(prefix + "/"):
                return handler.serve(path[len(prefix) :], query)
        return Response(status=404, body=b"404 page not found\n")

    return app


def _default_cache(client: Client, options: ManagerOptions) -> Cache:
    return InformerCache(
        client.lister_watcher,
        by_object=options.by_object,
        sync_period=options.sync_period,
        is_namespaced=lambda gvk: client.resource_for(gvk).namespaced,
        clock=options.clock,
        gc_tuning=options.gc_tuning,
        use_watch_list=options.use_watch_list,
    )
