"""The manager's ``Configuration`` (``config.trainer.kubeflow.org/v1alpha1``): types, defaults, strict load.

Go origin: kubeflow/trainer ``pkg/apis/config/v1alpha1`` (types and ``SetDefaults_Configuration``),
``pkg/config`` (``Load``: strict decoding, then ``validate``), and component-base's
``LeaderElectionConfiguration`` for the ``leaderElection`` section.

Guarantees:

- **Strict decoding.** The file must be one YAML (or JSON) document with ``apiVersion:
  config.trainer.kubeflow.org/v1alpha1`` and ``kind: Configuration``. An unknown field, a duplicate key or a
  value of the wrong type is a :class:`ConfigurationError` naming the field path as written in the file
  (``webhook.unknownWebhookField``, ``controller.groupKindConcurrency[TrainJob.trainer.kubeflow.org]``). A
  ``null`` value means "unset", as in Go's JSON decoding.
- **Upstream's defaults** fill every unset field, whether or not a file is given (table in
  ``docs/configuration.md``). ``leaderElection`` absent means leader election is **off**
  (:attr:`Configuration.leader_election` is None), as upstream.
- **Validation** collects every problem before raising (upstream's ``validate``, plus the checks listed
  below), so one run shows them all.
- The values are frozen dataclasses; maps are read-only. :meth:`Configuration.as_wire` gives the defaulted
  configuration back in its wire form (camelCase keys, Go durations), e.g. to log or hand to code that reads
  the file's shape; decoding it gives the same value back.

Deliberate differences from upstream, each making a mistake visible at start-up instead of later:

- A ``leaderElection`` section that leaves out ``resourceName`` or a lease timing gets
  ``trainer.kubeflow.org`` and 15 s / 10 s / 2 s (upstream passes the zero values on and the manager fails
  to start); the timings must satisfy client-go's rules (lease duration > renew deadline > 1.2 x retry
  period > 0); ``resourceLock`` may only be ``leases`` (the one lock this port implements). ``leaderElect``
  absent means false, as upstream.
- ``tls.minVersion`` must be ``1.2`` or ``1.3``: ``1.0`` and ``1.1`` (insecure, RFC 8996; upstream applies
  them) and unknown values (upstream logs a warning and uses Go's default) are errors, and the list lengths
  of ``tls`` are checked against the API's limits.
- ``metrics.bindAddress`` and ``health.healthProbeBindAddress`` must be ``host:port`` (or ``"0"``, off).
- Feature gates in ``featureGates`` must exist (upstream fails the same way, a step later).

``metrics.auth.enabled`` is upstream's field from after v2.3.0 (default false): a v2.3.0 file has no
``auth`` and decodes unchanged. ``plugins.enabled`` is this port's own (upstream compiles its plugins in):
the third-party plugins to load from the ``kubeflow_trainer.plugins`` entry points; absent means none, so
an upstream file decodes unchanged. Decoding checks its shape (a list of non-empty strings); whether each
name is installed is checked when the manager builds its plugins.

Deliberately missing: serving anything; this module only decodes and validates (the entry point and
``controller.trainer`` wire the servers).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, TypeVar

import yaml

from controller.serving import tlsconfig
from runtime.features import FeatureGateError, FeatureGates
from runtime.framework.validation import ErrorType, FieldError

__all__ = [
    "API_VERSION",
    "KIND",
    "CertManagement",
    "ClientConnection",
    "Configuration",
    "ConfigurationError",
    "ControllerConfigurationSpec",
    "ControllerHealth",
    "ControllerMetrics",
    "ControllerWebhook",
    "LeaderElectionConfiguration",
    "Plugins",
    "StatusServer",
    "TLSOptions",
    "load_configuration",
    "parse_configuration",
    "parse_duration",
]

API_VERSION = "config.trainer.kubeflow.org/v1alpha1"
KIND = "Configuration"

DEFAULT_LEADER_ELECTION_ID = "trainer.kubeflow.org"
TLS_VERSIONS = tuple(tlsconfig.TLS_VERSIONS)
"""The ``tls.minVersion`` values accepted (upstream's enum also has ``1.0`` and ``1.1``)."""
_INT32_MAX = 2**31 - 1
_JITTER_FACTOR = 1.2  # client-go leaderelection.JitterFactor: renewDeadline must exceed it x retryPeriod


# --- errors ------------------------------------------------------------------------------------------------


def _invalid(path: str, message: str) -> FieldError:
    """An invalid value at ``path``, the field as written in the file (``webhook.port``; ``""`` for the
    whole file)."""
    return FieldError(path=path, type=ErrorType.INVALID, message=message)


def _line(error: FieldError) -> str:
    return f"{error.path}: {error.message}" if error.path else error.message


class ConfigurationError(ValueError):
    """The configuration cannot be used. ``field`` names the first bad field (``""`` for the whole file),
    ``errors`` lists every problem found (field errors, each reported as ``path: message``), ``source`` is
    the file (None for the built-in defaults)."""

    def __init__(self, errors: list[FieldError] | FieldError, *, source: Path | None = None) -> None:
        self.errors: tuple[FieldError, ...] = tuple(errors) if isinstance(errors, list) else (errors,)
        self.source = source
        where = f" {source}" if source is not None else ""
        super().__init__(f"invalid configuration{where}: " + "; ".join(map(_line, self.errors)))

    @property
    def field(self) -> str:
        return self.errors[0].path if self.errors else ""


# --- the types ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerWebhook:
    """``webhook``: where the admission webhook server listens (docs/webhooks.md)."""

    port: int = 9443
    host: str = ""
    """``""``: all interfaces upstream; here the entry point binds the Pod IP, else loopback."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerMetrics:
    """``metrics``: the Prometheus endpoint."""

    bind_address: str = ":8443"
    """``host:port``; ``"0"`` turns the endpoint off; an empty host is resolved by the entry point."""
    secure_serving: bool = True
    """HTTPS with the certificates of the webhook certificate directory."""
    auth_enabled: bool = False
    """``auth.enabled`` (upstream after v2.3.0): TokenReview and SubjectAccessReview on every scrape."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerHealth:
    """``health``: the ``/healthz`` and ``/readyz`` endpoints."""

    health_probe_bind_address: str = ":8081"
    """``host:port``; ``"0"`` turns the endpoint off; an empty host is resolved by the entry point."""
    readiness_endpoint_name: str = "readyz"
    """Defaulted and kept, but not wired upstream either: the checks are served at ``/readyz``."""
    liveness_endpoint_name: str = "healthz"
    """Defaulted and kept, but not wired upstream either: the checks are served at ``/healthz``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class LeaderElectionConfiguration:
    """``leaderElection`` (component-base ``LeaderElectionConfiguration``); durations in seconds."""

    leader_elect: bool = False
    resource_lock: str = "leases"
    resource_name: str = DEFAULT_LEADER_ELECTION_ID
    resource_namespace: str = ""
    """``""``: the namespace the manager runs in (resolved by the entry point)."""
    lease_duration: float = 15.0
    renew_deadline: float = 10.0
    retry_period: float = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class ControllerConfigurationSpec:
    """``controller``: per-kind worker counts, keyed by ``Kind.group`` (``TrainJob.trainer.kubeflow.org``)."""

    group_kind_concurrency: Mapping[str, int] = field(default_factory=lambda: MappingProxyType({}))

    def concurrency(self, group_kind: str, default: int = 1) -> int:
        """The workers configured for ``group_kind``, else ``default``."""
        return self.group_kind_concurrency.get(group_kind, default)


@dataclass(frozen=True, slots=True, kw_only=True)
class CertManagement:
    """``certManagement``: the webhook certificate rotator (a later release)."""

    enable: bool = True
    webhook_service_name: str = "kubeflow-trainer-controller-manager"
    webhook_secret_name: str = "kubeflow-trainer-webhook-cert"


@dataclass(frozen=True, slots=True, kw_only=True)
class ClientConnection:
    """``clientConnection``: the client-side rate limit of the manager's API client."""

    qps: float = 50.0
    burst: int = 100


@dataclass(frozen=True, slots=True, kw_only=True)
class StatusServer:
    """``statusServer``: the runtime status server (feature gate ``TrainJobStatus``; a later release)."""

    port: int = 10443
    qps: float = 5.0
    burst: int = 10


@dataclass(frozen=True, slots=True, kw_only=True)
class TLSOptions:
    """``tls``: options of the HTTPS servers (``controller.serving.tlsconfig.TLSOptions`` applies them). Empty
    means
    unset (upstream's defaults)."""

    min_version: str = ""
    cipher_suites: tuple[str, ...] = ()
    next_protos: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Plugins:
    """``plugins`` (this port's extension; upstream has no such section): the third-party plugins to run."""

    enabled: tuple[str, ...] = ()
    """Entry-point names in the ``kubeflow_trainer.plugins`` group, run after the built-ins in this order.
    Decoding checks only the shape; the manager loads them at start-up
    (``controller.trainer.setup.new_registry``), where an unknown name stops it."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Configuration:
    """The whole ``Configuration``, defaulted and validated."""

    webhook: ControllerWebhook = field(default_factory=ControllerWebhook)
    leader_election: LeaderElectionConfiguration | None = None
    """None when the file has no ``leaderElection`` section; leader election runs only when this is set
    *and* ``leader_elect`` is true (see :attr:`leader_election_enabled`)."""
    metrics: ControllerMetrics = field(default_factory=ControllerMetrics)
    health: ControllerHealth = field(default_factory=ControllerHealth)
    controller: ControllerConfigurationSpec = field(default_factory=ControllerConfigurationSpec)
    cert_management: CertManagement = field(default_factory=CertManagement)
    client_connection: ClientConnection = field(default_factory=ClientConnection)
    status_server: StatusServer = field(default_factory=StatusServer)
    feature_gates: FeatureGates = field(default_factory=FeatureGates)
    tls: TLSOptions = field(default_factory=TLSOptions)
    plugins: Plugins = field(default_factory=Plugins)

    @property
    def leader_election_enabled(self) -> bool:
        return self.leader_election is not None and self.leader_election.leader_elect

    def with_feature_gates(self, overrides: Mapping[str, bool]) -> Configuration:
        """This configuration with ``overrides`` (``--feature-gates``) applied over ``featureGates``."""
        return _replace(self, feature_gates=self.feature_gates.with_overrides(overrides))

    def as_wire(self) -> dict[str, Any]:
        """The defaulted configuration in its file form (camelCase keys); it decodes to this value."""
        wire: dict[str, Any] = {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "webhook": {"port": self.webhook.port, "host": self.webhook.host},
            "metrics": {
                "bindAddress": self.metrics.bind_address,
                "secureServing": self.metrics.secure_serving,
                "auth": {"enabled": self.metrics.auth_enabled},
            },
            "health": {
                "healthProbeBindAddress": self.health.health_probe_bind_address,
                "readinessEndpointName": self.health.readiness_endpoint_name,
                "livenessEndpointName": self.health.liveness_endpoint_name,
            },
            "controller": {"groupKindConcurrency": dict(self.controller.group_kind_concurrency)},
            "certManagement": {
                "enable": self.cert_management.enable,
                "webhookServiceName": self.cert_management.webhook_service_name,
                "webhookSecretName": self.cert_management.webhook_secret_name,
            },
            "clientConnection": {"qps": self.client_connection.qps, "burst": self.client_connection.burst},
            "statusServer": {
                "port": self.status_server.port,
                "qps": self.status_server.qps,
                "burst": self.status_server.burst,
            },
            "featureGates": dict(self.feature_gates.overrides),
            "tls": {
                "minVersion": self.tls.min_version,
                "cipherSuites": list(self.tls.cipher_suites),
                "nextProtos": list(self.tls.next_protos),
            },
            "plugins": {"enabled": list(self.plugins.enabled)},
        }
        if self.leader_election is not None:
            le = self.leader_election
            wire["leaderElection"] = {
                "leaderElect": le.leader_elect,
                "resourceLock": le.resource_lock,
                "resourceName": le.resource_name,
                "resourceNamespace": le.resource_namespace,
                "leaseDuration": f"{le.lease_duration:g}s",
                "renewDeadline": f"{le.renew_deadline:g}s",
                "retryPeriod": f"{le.retry_period:g}s",
            }
        return wire


def _replace(config: Configuration, **changes: Any) -> Configuration:
    values = {name: getattr(config, name) for name in Configuration.__dataclass_fields__}
    values.update(changes)
    return Configuration(**values)


# --- Go durations ------------------------------------------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,
    "μs": 1e-6,
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_PART = re.compile(r"(\d+\.?\d*|\.\d+)(ns|us|µs|μs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    """A Go duration (``time.ParseDuration``: ``"15s"``, ``"1m30s"``, ``"500ms"``, ``"0"``) in seconds.

    Raises ValueError for anything else (a bare number other than 0, an unknown unit).
    """
    body = text.strip()
    sign = -1.0 if body.startswith("-") else 1.0
    body = body.lstrip("+-")
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total, pos = 0.0, 0
    while pos < len(body):
        match = _DURATION_PART.match(body, pos)
        if match is None:
            raise ValueError(f"invalid duration {text!r}: expected a number and a unit (ns, us, ms, s, m, h)")
        total += float(match.group(1)) * _DURATION_UNITS[match.group(2)]
        pos = match.end()
    return sign * total


# --- strict decoding ---------------------------------------------------------------------------------------


class _StrictLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys (apimachinery's strict decoding does)."""


def _construct_mapping(loader: _StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate field {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)

T = TypeVar("T")


class _Section:
    """Reads one mapping of the file: typed getters that record the path, then :meth:`done` refuses the keys
    nobody asked for. Errors of the wrong-type kind abort decoding at once (the value cannot be used)."""

    def __init__(self, path: str, value: Any) -> None:
        self.path = path
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            raise ConfigurationError(_invalid(path or "<root>", f"must be an object, got {_show(value)}"))
        self._data: Mapping[Any, Any] = value
        self._read: set[str] = set()

    def _child(self, key: str) -> str:
        return f"{self.path}.{key}" if self.path else key

    def raw(self, key: str) -> Any:
        self._read.add(key)
        return self._data.get(key)

    def section(self, key: str) -> _Section:
        return _Section(self._child(key), self.raw(key))

    def has(self, key: str) -> bool:
        return self._data.get(key) is not None

    def get(self, key: str, kind: Callable[[str, Any], T], default: T) -> T:
        value = self.raw(key)
        return default if value is None else kind(self._child(key), value)

    def done(self) -> None:
        for key in self._data:
            if key not in self._read:
                raise ConfigurationError(_invalid(self._child(str(key)), "unknown field"))


def _show(value: Any) -> str:
    return f"{type(value).__name__} {value!r}"


def _wrong(path: str, expected: str, value: Any) -> ConfigurationError:
    return ConfigurationError(_invalid(path, f"must be {expected}, got {_show(value)}"))


def _int32(path: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise _wrong(path, "an integer", value)
    if not -(2**31) <= value <= _INT32_MAX:
        raise ConfigurationError(_invalid(path, f"{value} does not fit in a 32-bit integer"))
    return value


def _float32(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _wrong(path, "a number", value)
    return float(value)


def _bool(path: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _wrong(path, "true or false", value)
    return value


def _string(path: str, value: Any) -> str:
    if not isinstance(value, str):
        raise _wrong(path, "a string", value)
    return value


def _duration(path: str, value: Any) -> float:
    if not isinstance(value, str):
        raise _wrong(path, 'a duration string such as "15s"', value)
    try:
        return parse_duration(value)
    except ValueError as exc:
        raise ConfigurationError(_invalid(path, str(exc))) from exc


def _strings(path: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _wrong(path, "a list of strings", value)
    return tuple(_string(f"{path}[{i}]", item) for i, item in enumerate(value))


def _map_of(kind: Callable[[str, Any], T]) -> Callable[[str, Any], dict[str, T]]:
    def read(path: str, value: Any) -> dict[str, T]:
        if not isinstance(value, Mapping):
            raise _wrong(path, "an object", value)
        out: dict[str, T] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise _wrong(f"{path}[{key}]", "a string key", key)
            if item is None:
                raise ConfigurationError(_invalid(f"{path}[{key}]", "must have a value"))
            out[key] = kind(f"{path}[{key}]", item)
        return out

    return read


def _decode(document: Any) -> Configuration:
    root = _Section("", document)
    api_version, kind = root.raw("apiVersion"), root.raw("kind")
    if api_version != API_VERSION:
        raise ConfigurationError(_invalid("apiVersion", f"must be {API_VERSION!r}, got {api_version!r}"))
    if kind != KIND:
        raise ConfigurationError(_invalid("kind", f"must be {KIND!r}, got {kind!r}"))

    s = root.section("webhook")
    webhook = ControllerWebhook(port=s.get("port", _int32, 9443), host=s.get("host", _string, ""))
    s.done()

    s = root.section("metrics")
    auth = s.section("auth")
    metrics = ControllerMetrics(
        bind_address=s.get("bindAddress", _string, "") or ":8443",
        secure_serving=s.get("secureServing", _bool, True),
        auth_enabled=auth.get("enabled", _bool, False),
    )
    auth.done()
    s.done()

    s = root.section("health")
    health = ControllerHealth(
        health_probe_bind_address=s.get("healthProbeBindAddress", _string, "") or ":8081",
        readiness_endpoint_name=s.get("readinessEndpointName", _string, "") or "readyz",
        liveness_endpoint_name=s.get("livenessEndpointName", _string, "") or "healthz",
    )
    s.done()

    leader_election = None
    if root.has("leaderElection"):
        s = root.section("leaderElection")
        leader_election = LeaderElectionConfiguration(
            leader_elect=s.get("leaderElect", _bool, False),
            resource_lock=s.get("resourceLock", _string, "") or "leases",
            resource_name=s.get("resourceName", _string, "") or DEFAULT_LEADER_ELECTION_ID,
            resource_namespace=s.get("resourceNamespace", _string, ""),
            lease_duration=s.get("leaseDuration", _duration, 0.0) or 15.0,
            renew_deadline=s.get("renewDeadline", _duration, 0.0) or 10.0,
            retry_period=s.get("retryPeriod", _duration, 0.0) or 2.0,
        )
        s.done()
    else:
        root.raw("leaderElection")

    s = root.section("controller")
    concurrency: dict[str, int] = s.get("groupKindConcurrency", _map_of(_int32), {})
    s.done()

    s = root.section("certManagement")
    cert_management = CertManagement(
        enable=s.get("enable", _bool, True),
        webhook_service_name=s.get("webhookServiceName", _string, "")
        or "kubeflow-trainer-controller-manager",
        webhook_secret_name=s.get("webhookSecretName", _string, "") or "kubeflow-trainer-webhook-cert",
    )
    s.done()

    s = root.section("clientConnection")
    client_connection = ClientConnection(qps=s.get("qps", _float32, 50.0), burst=s.get("burst", _int32, 100))
    s.done()

    s = root.section("statusServer")
    status_server = StatusServer(
        port=s.get("port", _int32, 10443), qps=s.get("qps", _float32, 5.0), burst=s.get("burst", _int32, 10)
    )
    s.done()

    gates: dict[str, bool] = root.get("featureGates", _map_of(_bool), {})

    s = root.section("tls")
    tls = TLSOptions(
        min_version=s.get("minVersion", _string, ""),
        cipher_suites=s.get("cipherSuites", _strings, ()),
        next_protos=s.get("nextProtos", _strings, ()),
    )
    s.done()

    s = root.section("plugins")
    plugins = Plugins(enabled=s.get("enabled", _strings, ()))
    s.done()
    root.done()

    errors: list[FieldError] = []
    try:
        feature_gates = FeatureGates(gates)
    except FeatureGateError as exc:
        errors.append(_invalid("featureGates", str(exc)))
        feature_gates = FeatureGates()
    config = Configuration(
        webhook=webhook,
        leader_election=leader_election,
        metrics=metrics,
        health=health,
        controller=ControllerConfigurationSpec(group_kind_concurrency=MappingProxyType(concurrency)),
        cert_management=cert_management,
        client_connection=client_connection,
        status_server=status_server,
        feature_gates=feature_gates,
        tls=tls,
        plugins=plugins,
    )
    errors += _validate(config)
    if errors:
        raise ConfigurationError(errors)
    return config


# --- validation --------------------------------------------------------------------------------------------


def _check_port(errors: list[FieldError], path: str, port: int) -> None:
    if not 1 <= port <= 65535:
        errors.append(_invalid(path, f"must be between 1 and 65535, got {port}"))


def _check_not_negative(errors: list[FieldError], path: str, value: float) -> None:
    if value < 0:
        errors.append(_invalid(path, f"must be greater than or equal to 0, got {value:g}"))


def _check_bind_address(errors: list[FieldError], path: str, address: str) -> None:
    if address == "0":
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535 or (":" in host and not host.startswith("[")):
        errors.append(_invalid(path, f'must be "host:port", ":port" or "0" (off), got {address!r}'))


def _check_length(errors: list[FieldError], path: str, value: str, limit: int) -> None:
    if len(value) > limit:
        errors.append(_invalid(path, f"must be at most {limit} characters, got {len(value)}"))


def _validate(config: Configuration) -> list[FieldError]:
    """Upstream's ``validate`` plus this port's start-up checks (see the module docstring)."""
    errors: list[FieldError] = []
    _check_port(errors, "webhook.port", config.webhook.port)
    _check_length(errors, "webhook.host", config.webhook.host, 253)
    _check_bind_address(errors, "metrics.bindAddress", config.metrics.bind_address)
    _check_bind_address(errors, "health.healthProbeBindAddress", config.health.health_probe_bind_address)
    _check_not_negative(errors, "clientConnection.qps", config.client_connection.qps)
    _check_not_negative(errors, "clientConnection.burst", config.client_connection.burst)
    for group_kind, workers in config.controller.group_kind_concurrency.items():
        if workers < 1:
            errors.append(
                _invalid(
                    f"controller.groupKindConcurrency[{group_kind}]", f"must be greater than 0, got {workers}"
                )
            )
    _check_port(errors, "statusServer.port", config.status_server.port)
    _check_not_negative(errors, "statusServer.qps", config.status_server.qps)
    _check_not_negative(errors, "statusServer.burst", config.status_server.burst)
    le = config.leader_election
    if le is not None:
        if le.resource_lock != "leases":
            errors.append(
                _invalid("leaderElection.resourceLock", f'must be "leases", got {le.resource_lock!r}')
            )
        if le.lease_duration <= le.renew_deadline:
            errors.append(
                _invalid("leaderElection.leaseDuration", "must be greater than leaderElection.renewDeadline")
            )
        if le.renew_deadline <= _JITTER_FACTOR * le.retry_period:
            errors.append(
                _invalid(
                    "leaderElection.renewDeadline",
                    f"must be greater than {_JITTER_FACTOR} x leaderElection.retryPeriod",
                )
            )
        if le.retry_period <= 0:
            errors.append(_invalid("leaderElection.retryPeriod", "must be greater than 0"))
    problem = tlsconfig.min_version_problem(config.tls.min_version)
    if problem:
        errors.append(_invalid("tls.minVersion", problem))
    for path, items, max_items, max_len in (
        ("tls.cipherSuites", config.tls.cipher_suites, 100, 100),
        ("tls.nextProtos", config.tls.next_protos, 10, 32),
    ):
        if len(items) > max_items:
            errors.append(_invalid(path, f"must have at most {max_items} items, got {len(items)}"))
        for i, item in enumerate(items):
            _check_length(errors, f"{path}[{i}]", item, max_len)
    for i, name in enumerate(config.plugins.enabled):
        if not name:
            errors.append(_invalid(f"plugins.enabled[{i}]", "must be a plugin's name, got an empty string"))
    return errors


# --- entry points ------------------------------------------------------------------------------------------


def parse_configuration(text: str, *, source: Path | None = None) -> Configuration:
    """Decodes, defaults and validates one Configuration document; raises :class:`ConfigurationError`."""
    try:
        documents = [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
    except yaml.YAMLError as exc:
        raise ConfigurationError(_invalid("", f"not valid YAML: {exc}"), source=source) from exc
    if len(documents) != 1:
        raise ConfigurationError(
            _invalid("", f"must hold exactly one document, found {len(documents)}"), source=source
        )
    try:
        return _decode(documents[0])
    except ConfigurationError as exc:
        raise ConfigurationError(list(exc.errors), source=source) from None


def load_configuration(path: Path | None) -> Configuration:
    """The configuration in ``path``, or upstream's defaults when ``path`` is None (no ``--config``)."""
    if path is None:
        return Configuration()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigurationError(_invalid("", f"cannot read the file: {exc}"), source=path) from exc
    return parse_configuration(text, source=path)
