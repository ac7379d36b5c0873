"""Leader election over a ``coordination.k8s.io/v1`` Lease, so one replica of a controller acts at a time.

Go origin: client-go ``tools/leaderelection`` (``leaderelection.go``: ``LeaderElector``, ``acquire``,
``renew``, ``tryAcquireOrRenew``, ``release``; ``resourcelock/leaselock.go``) and controller-runtime
``pkg/leaderelection`` (identity, per-request timeout) and ``pkg/metrics/leaderelection.go``.

The algorithm, as client-go's:

- **Validation:** ``lease_duration > renew_deadline > 1.2 * retry_period``, all positive.
- **Acquire:** try every ``retry_period`` with jitter (``retry_period * (1 + 1.2 * random())``, waiting after
  each attempt) until the lease is ours or the elector is stopped.
- **Renew:** while leading, every ``retry_period``, try again until success or until ``renew_deadline`` has
  passed since the round began; a round that fails means the lease is lost.
- **One attempt** (:meth:`LeaderElector.try_acquire_or_renew`): *fast path*, if we lead and our last
  observation is still valid, update the lease straight away; if that fails, or otherwise, *slow path*: get
  the lease (create it if missing); when its record differs from the last one we saw, note the **local
  monotonic time** of that observation; if another holder's lease is still valid by our own clock, give up;
  else write our record with a PUT carrying the resourceVersion we read (optimistic concurrency: of two
  candidates, one gets a 409). ``leaseTransitions`` goes up only when the holder changes. Slow-path
  renewals by the leader are counted in ``leader_election_slowpath_total``.
- **Expiry is judged on our clock only:** a lease is valid while ``observed_at + leaseDurationSeconds`` is in
  the future of *our* monotonic clock, where ``observed_at`` is when we last saw the record change. Clock skew
  between hosts does not matter; a difference in clock *rate* does.
- **Release** on a graceful stop (``release_on_cancel``): write holder ``""`` and ``leaseDurationSeconds: 1``
  so a standby takes over within a retry period instead of a lease duration; retried on conflict.

Guarantees and their limits:

- While :meth:`LeaderElector.is_leader` is true, the last successful write named us and was made less than a
  lease duration ago. It is **not** fencing (client-go says so too): a leader that stalls for longer than
  ``lease_duration - renew_deadline`` (5 s by default) may still act while a standby has taken over. The
  manager therefore stops its controllers the moment renewal fails and the process exits.
- ``on_stopped_leading`` is called exactly once when :meth:`LeaderElector.run` ends, whether the lease was
  lost, the elector was stopped, or it never led (as client-go). ``on_started_leading`` and
  ``on_new_leader`` run on the elector's thread and must return quickly (client-go runs them as goroutines).
- ``leader_election_master_status{name}`` is 1 exactly while leading.

Deliberate deviations: release writes only if the lease it just read still names us (client-go checks only
its own last observation, and could clear a lease another candidate took meanwhile). A renewal that succeeds
after the round's deadline still counts (the PUT with resourceVersion proves no one else holds the lease).

Deliberately missing: the ConfigMap/Endpoints locks and multi-lock, coordinated leader election
(``preferredHolder``/``strategy`` are kept as read but not acted on), and the healthz watchdog adaptor
(:meth:`LeaderElector.check` is its logic).
"""

from __future__ import annotations

import random
import socket
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

import orjson
import structlog

from controller import metrics
from controller.client.errors import Conflict, NotFound
from controller.clock import REAL_CLOCK, Clock

__all__ = [
    "JITTER_FACTOR",
    "LeaderElectionRecord",
    "LeaderElector",
    "LeaseClient",
    "LeaseLock",
    "ResourceLock",
    "new_identity",
]

_log = structlog.get_logger("controller.manager.leaderelection")

JITTER_FACTOR = 1.2
"""client-go's ``JitterFactor``: acquisition retries wait up to 2.2 retry periods."""

_MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"


def new_identity() -> str:
    """``<hostname>_<uuid4>``, controller-runtime's default identity: unique per process start."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionRecord:
    """The lease's spec as the algorithm sees it (``resourcelock.LeaderElectionRecord``).

    Times are MicroTime strings as written to the API (``""`` when unset): they are informational for
    humans; the algorithm never compares them, only whether the record changed.
    """

    holder_identity: str = ""
    lease_duration_seconds: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    leader_transitions: int = 0
    preferred_holder: str = ""
    strategy: str = ""

    @classmethod
    def from_lease_spec(cls, spec: Mapping[str, Any]) -> LeaderElectionRecord:
        return cls(
            holder_identity=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime") or "",
            renew_time=spec.get("renewTime") or "",
            leader_transitions=int(spec.get("leaseTransitions") or 0),
            preferred_holder=spec.get("preferredHolder") or "",
            strategy=spec.get("strategy") or "",
        )

    def to_lease_spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "holderIdentity": self.holder_identity,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time or None,
            "renewTime": self.renew_time or None,
            "leaseTransitions": self.leader_transitions,
        }
        if self.preferred_holder:
            spec["preferredHolder"] = self.preferred_holder
        if self.strategy:
            spec["strategy"] = self.strategy
        return spec

    def raw(self) -> bytes:
        """A canonical encoding, compared to detect that the record changed (``observedRawRecord``)."""
        return orjson.dumps(self.to_lease_spec(), option=orjson.OPT_SORT_KEYS)


class ResourceLock(Protocol):
    """Where the record lives (``resourcelock.Interface``). ``update`` must follow a ``get`` or ``create``."""

    @property
    def identity(self) -> str: ...

    def describe(self) -> str: ...

    def get(self) -> LeaderElectionRecord:
        """The current record; raises ``controller.client.errors.NotFound`` if the lock object does not
        exist."""
        ...

    def create(self, record: LeaderElectionRecord) -> None: ...

    def update(self, record: LeaderElectionRecord) -> None:
        """Writes ``record`` over the last object read; raises ``Conflict`` if it changed since."""
        ...


class LeaseClient(Protocol):
    """The slice of ``controller.client.client.Client`` a :class:`LeaseLock` uses."""

    def get(self, gvk: Any, name: str, namespace: str | None = None) -> dict[str, Any]: ...

    def create(self, obj: dict[str, Any]) -> dict[str, Any]: ...

    def update(self, obj: dict[str, Any]) -> dict[str, Any]: ...


class LeaseLock:
    """A :class:`ResourceLock` on a ``coordination.k8s.io/v1`` Lease (``resourcelock.LeaseLock``).

    Updates are PUTs of the whole Lease as last read, so they carry its ``resourceVersion``. Give it a client
    whose requests time out after ``max(renew_deadline / 2, 1 s)`` so one hung request cannot cost the lease
    (the manager does).
    """

    def __init__(
        self,
        client: LeaseClient,
        *,
        namespace: str,
        name: str,
        identity: str,
        gvk: Any,
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if not identity:
            raise ValueError("lock identity is empty")
        self._client = client
        self._namespace = namespace
        self._name = name
        self._identity = identity
        self._gvk = gvk
        self._labels = dict(labels or {})
        self._lease: dict[str, Any] | None = None

    @property
    def identity(self) -> str:
        return self._identity

    def describe(self) -> str:
        return f"{self._namespace}/{self._name}"

    def get(self) -> LeaderElectionRecord:
        self._lease = self._client.get(self._gvk, self._name, self._namespace)
        return LeaderElectionRecord.from_lease_spec(self._lease.get("spec") or {})

    def create(self, record: LeaderElectionRecord) -> None:
        metadata: dict[str, Any] = {"name": self._name, "namespace": self._namespace}
        if self._labels:
            metadata["labels"] = dict(self._labels)
        self._lease = self._client.create(
            {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": metadata,
                "spec": record.to_lease_spec(),
            }
        )

    def update(self, record: LeaderElectionRecord) -> None:
        if self._lease is None:
            raise RuntimeError("lease not initialized, call get or create first")
        metadata = dict(self._lease.get("metadata") or {})
        if self._labels:
            metadata["labels"] = {**(metadata.get("labels") or {}), **self._labels}
        # A new top-level dict: the object last read is never mutated (it may be shared with a cache).
        lease = {**self._lease, "metadata": metadata, "spec": record.to_lease_spec()}
        self._lease = self._client.update(lease)

    def __repr__(self) -> str:
        return f"LeaseLock({self.describe()!r}, identity={self._identity!r})"


class LeaderElector:
    """Runs the election for one lock; see the module docstring for the algorithm and its guarantees."""

    def __init__(
        self,
        lock: ResourceLock,
        *,
        name: str,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        on_new_leader: Callable[[str], None] | None = None,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        release_on_cancel: bool = True,
        clock: Clock = REAL_CLOCK,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renew_deadline must be greater than retry_period * 1.2")
        if lease_duration < 1 or renew_deadline <= 0 or retry_period <= 0:
            raise ValueError("lease_duration must be at least 1 s; renew_deadline and retry_period positive")
        if not lock.identity:
            raise ValueError("lock identity is empty")
        self._lock = lock
        self._name = name
        self._on_started_leading = on_started_leading
        self._on_stopped_leading = on_stopped_leading
        self._on_new_leader = on_new_leader
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        self._release_on_cancel = release_on_cancel
        self._clock = clock
        self._jitter = jitter
        # Guarded by _observed_lock: the last record seen or written, and when (our monotonic clock).
        self._observed_lock = threading.Lock()
        self._observed = LeaderElectionRecord()
        self._observed_raw = b""
        self._observed_at = float("-inf")
        self._reported_leader = ""  # only touched by the thread running the election
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        metrics.leader_election_master_status.labels(name).set(0)

    # --- observation ----------------------------------------------------------------------------------

    @property
    def identity(self) -> str:
        return self._lock.identity

    def get_leader(self) -> str:
        """The holder we last observed (``""`` if none)."""
        with self._observed_lock:
            return self._observed.holder_identity

    def is_leader(self) -> bool:
        """Whether the last record we observed or wrote names us."""
        with self._observed_lock:
            return self._observed.holder_identity == self._lock.identity

    def observed_record(self) -> LeaderElectionRecord:
        with self._observed_lock:
            return self._observed

    def check(self, max_tolerable_expired_lease: float) -> None:
        """Raises if we believe we lead but have not renewed for longer than a lease duration plus the slack.

        The logic of client-go's ``HealthzAdaptor``: wire it into ``/healthz`` to have a stuck leader
        restarted.
        """
        with self._observed_lock:
            leading = self._observed.holder_identity == self._lock.identity
            since = self._clock.monotonic() - self._observed_at
        if leading and since > self._lease_duration + max_tolerable_expired_lease:
            raise RuntimeError(f"failed election to renew leadership on lease {self._name}")

    def _set_observed(self, record: LeaderElectionRecord, raw: bytes | None = None) -> None:
        with self._observed_lock:
            self._observed = record
            if raw is not None:
                self._observed_raw = raw
            self._observed_at = self._clock.monotonic()

    def _lease_valid(self, now: float) -> bool:
        with self._observed_lock:
            return self._observed_at + self._observed.lease_duration_seconds > now

    # --- one attempt ----------------------------------------------------------------------------------

    def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the lease; True if we hold it afterwards (``tryAcquireOrRenew``)."""
        now_wall = self._clock.now().strftime(_MICRO_TIME_FORMAT)
        desired = LeaderElectionRecord(
            holder_identity=self._lock.identity,
            lease_duration_seconds=int(self._lease_duration),
            acquire_time=now_wall,
            renew_time=now_wall,
        )

        # 1. Fast path: we lead and our observation is still valid, so update without reading first.
        if self.is_leader() and self._lease_valid(self._clock.monotonic()):
            previous = self.observed_record()
            record = replace(
                desired,
                acquire_time=previous.acquire_time,
                leader_transitions=previous.leader_transitions,
            )
            try:
                self._lock.update(record)
            except Exception as exc:  # noqa: BLE001 - any failure falls back to the slow path
                _log.info("leader.fast_path_failed", lock=self._lock.describe(), error=str(exc))
            else:
                self._set_observed(record)
                return True

        # 2. Slow path: read the lease, or create it.
        try:
            current = self._lock.get()
        except NotFound:
            try:
                self._lock.create(desired)
            except Exception as exc:  # noqa: BLE001 - a failed attempt is retried by the caller's loop
                _log.warning("leader.create_failed", lock=self._lock.describe(), error=str(exc))
                return False
            self._set_observed(desired, desired.raw())
            return True
        except Exception as exc:  # noqa: BLE001 - a failed attempt is retried by the caller's loop
            _log.warning("leader.get_failed", lock=self._lock.describe(), error=str(exc))
            return False

        # 3. Record the local time at which we saw the record change.
        raw = current.raw()
        with self._observed_lock:
            changed = raw != self._observed_raw
        if changed:
            self._set_observed(current, raw)

        # 4. Someone else holds a lease that is still valid by our clock.
        if current.holder_identity and self._lease_valid(self._clock.monotonic()) and not self.is_leader():
            return False

        # 5. Take or renew it, with the resourceVersion we read.
        if self.is_leader():
            record = replace(
                desired, acquire_time=current.acquire_time, leader_transitions=current.leader_transitions
            )
            metrics.leader_election_slowpath_total.labels(self._name).inc()
        else:
            record = replace(desired, leader_transitions=current.leader_transitions + 1)
        try:
            self._lock.update(record)
        except Exception as exc:  # noqa: BLE001 - a lost race (409) or a failed write; retried by the loop
            _log.info("leader.update_failed", lock=self._lock.describe(), error=str(exc))
            return False
        self._set_observed(record)
        return True

    def _maybe_report_transition(self) -> None:
        leader = self.get_leader()
        if leader == self._reported_leader:
            return
        self._reported_leader = leader
        _log.info("leader.observed", lock=self._lock.describe(), leader=leader)
        if self._on_new_leader is not None:
            self._on_new_leader(leader)

    # --- the loops ------------------------------------------------------------------------------------

    def _acquire(self, stop: threading.Event) -> bool:
        _log.info("leader.acquiring", lock=self._lock.describe(), identity=self._lock.identity)
        while not stop.is_set():
            succeeded = self.try_acquire_or_renew()
            self._maybe_report_transition()
            if succeeded:
                metrics.leader_election_master_status.labels(self._name).set(1)
                _log.info("leader.acquired", lock=self._lock.describe(), identity=self._lock.identity)
                return True
            delay = self._retry_period * (1.0 + JITTER_FACTOR * self._jitter())
            self._clock.wait(stop, delay)
        return False

    def _renew_round(self, stop: threading.Event) -> bool | None:
        """One renew-deadline round: True renewed, False lost, None stopped."""
        deadline = self._clock.monotonic() + self._renew_deadline
        while not stop.is_set():
            renewed = self.try_acquire_or_renew()
            self._maybe_report_transition()
            if renewed:
                return True
            remaining = deadline - self._clock.monotonic()
            if remaining <= 0:
                return False
            if self._clock.wait(stop, min(self._retry_period, remaining)):
                return None
            if self._clock.monotonic() >= deadline:
                return False
        return None

    def _renew(self, stop: threading.Event) -> bool:
        """Keeps the lease until stopped (returns False) or it cannot be renewed in time (returns True)."""
        while not stop.is_set():
            outcome = self._renew_round(stop)
            if outcome is None:
                return False
            if not outcome:
                return True
            if self._clock.wait(stop, self._retry_period):
                return False
        return False

    def run(self, stop: threading.Event) -> None:
        """Acquires, then renews until ``stop`` is set or the lease is lost; blocks until then.

        Calls ``on_stopped_leading`` exactly once before returning, then releases the lease if configured.
        """
        led = lost = False
        try:
            if not self._acquire(stop):
                return
            led = True
            self._on_started_leading()
            lost = self._renew(stop)
        finally:
            metrics.leader_election_master_status.labels(self._name).set(0)
            if lost:
                _log.error("leader.lost", lock=self._lock.describe(), identity=self._lock.identity)
            elif led:
                _log.info("leader.stopping", lock=self._lock.describe(), identity=self._lock.identity)
            self._on_stopped_leading()
        if self._release_on_cancel:
            self.release()

    def release(self) -> bool:
        """Gives the lease up if it still names us: holder ``""``, duration 1 s. Retries on conflict."""
        if not self.is_leader():
            return True
        for _ in range(5):
            try:
                current = self._lock.get()
            except Exception as exc:  # noqa: BLE001 - best effort; the lease then simply expires
                _log.warning("leader.release_failed", lock=self._lock.describe(), error=str(exc))
                return False
            if current.holder_identity != self._lock.identity:
                return True  # someone else holds it now; nothing of ours to release
            now_wall = self._clock.now().strftime(_MICRO_TIME_FORMAT)
            record = LeaderElectionRecord(
                holder_identity="",
                lease_duration_seconds=1,
                acquire_time=now_wall,
                renew_time=now_wall,
                leader_transitions=current.leader_transitions,
            )
            try:
                self._lock.update(record)
            except Conflict:
                continue
            except Exception as exc:  # noqa: BLE001 - best effort; the lease then simply expires
                _log.warning("leader.release_failed", lock=self._lock.describe(), error=str(exc))
                return False
            self._set_observed(record)
            _log.info("leader.released", lock=self._lock.describe(), identity=self._lock.identity)
            return True
        return False

    # --- an owned thread ------------------------------------------------------------------------------

    def start(self) -> None:
        """Runs the election on an owned thread named ``leader-election/<name>``."""
        if self._thread is not None:
            raise RuntimeError("leader elector already started")
        self._thread = threading.Thread(
            target=self.run, args=(self._stop,), name=f"leader-election/{self._name}", daemon=True
        )
        self._thread.start()

    def stop(self, timeout: float | None = None) -> None:
        """Stops the election (releasing the lease if configured) and joins the thread."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def __repr__(self) -> str:
        state = "leading" if self.is_leader() else f"following {self.get_leader()!r}"
        return f"LeaderElector({self._name!r}, identity={self._lock.identity!r}, {state})"
