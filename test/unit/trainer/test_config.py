"""The manager's Configuration: strict decoding, upstream's defaults, validation naming the field.

Upstream cases ported as behaviour: kubeflow/trainer ``pkg/config/config_test.go`` (TestLoad) and
``validation_test.go``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from controller.trainer.config import (
    API_VERSION,
    Configuration,
    ConfigurationError,
    LeaderElectionConfiguration,
    load_configuration,
    parse_configuration,
    parse_duration,
)

REPO = Path(__file__).resolve().parents[3]
SHIPPED = REPO / "config" / "manager" / "controller_manager_config.yaml"
HEADER = f"apiVersion: {API_VERSION}\nkind: Configuration\n"


def parse(body: str) -> Configuration:
    return parse_configuration(HEADER + body)


def error_of(body: str, *, header: str = HEADER) -> ConfigurationError:
    with pytest.raises(ConfigurationError) as info:
        parse_configuration(header + body)
    return info.value


# --- defaults ----------------------------------------------------------------------------------------------


def test_no_file_gives_upstreams_defaults() -> None:  # upstream: "default config"
    config = load_configuration(None)
    assert config.webhook.port == 9443
    assert config.webhook.host == ""
    assert config.metrics.bind_address == ":8443"
    assert config.metrics.secure_serving is True
    assert config.health.health_probe_bind_address == ":8081"
    assert config.health.readiness_endpoint_name == "readyz"
    assert config.health.liveness_endpoint_name == "healthz"
    assert config.leader_election is None
    assert config.leader_election_enabled is False
    assert dict(config.controller.group_kind_concurrency) == {}
    assert config.cert_management.enable is True
    assert config.cert_management.webhook_service_name == "kubeflow-trainer-controller-manager"
    assert config.cert_management.webhook_secret_name == "kubeflow-trainer-webhook-cert"
    assert (config.client_connection.qps, config.client_connection.burst) == (50.0, 100)
    assert (config.status_server.port, config.status_server.qps, config.status_server.burst) == (
        10443,
        5.0,
        10,
    )
    assert config.feature_gates.enabled("TrainJobStatus") is False
    assert config.tls.min_version == ""
    assert config.plugins.enabled == ()  # this port's extension: absent means no third-party plugin


def test_an_empty_configuration_file_gets_the_same_defaults(tmp_path: Path) -> None:  # "empty config file"
    path = tmp_path / "empty.yaml"
    path.write_text(HEADER)
    assert load_configuration(path) == load_configuration(None)


def test_custom_values_overwrite_the_defaults_and_leave_the_rest() -> None:  # "custom overwrite config"
    config = parse(
        "health: {healthProbeBindAddress: ':8082'}\nmetrics: {bindAddress: ':9443'}\nwebhook: {port: 9444}\n"
        "clientConnection: {qps: 100, burst: 200}\n"
    )
    assert config.health.health_probe_bind_address == ":8082"
    assert config.metrics.bind_address == ":9443"
    assert config.metrics.secure_serving is True
    assert config.webhook.port == 9444
    assert (config.client_connection.qps, config.client_connection.burst) == (100.0, 200)


def test_the_shipped_file_has_upstreams_values() -> None:
    config = load_configuration(SHIPPED)
    assert config.leader_election == LeaderElectionConfiguration(
        leader_elect=True,
        resource_name="trainer.kubeflow.org",
        resource_namespace="",
        lease_duration=15.0,
        renew_deadline=10.0,
        retry_period=2.0,
    )
    assert dict(config.controller.group_kind_concurrency) == {
        "TrainJob.trainer.kubeflow.org": 5,
        "TrainingRuntime.trainer.kubeflow.org": 1,
        "ClusterTrainingRuntime.trainer.kubeflow.org": 1,
    }
    assert config.controller.concurrency("TrainJob.trainer.kubeflow.org") == 5
    assert config.controller.concurrency("Unknown.example.com", default=3) == 3
    assert (config.client_connection.qps, config.client_connection.burst) == (50.0, 100)
    assert config.status_server.port == 10443


def test_leader_election_section_is_read_with_go_durations() -> None:  # "leader election config"
    config = parse(
        "leaderElection:\n  leaderElect: true\n  resourceName: trainer-leader\n"
        "  resourceNamespace: kubeflow\n"
        "  resourceLock: leases\n  leaseDuration: 1m\n  renewDeadline: 30s\n  retryPeriod: 1500ms\n"
    )
    assert config.leader_election == LeaderElectionConfiguration(
        leader_elect=True,
        resource_name="trainer-leader",
        resource_namespace="kubeflow",
        lease_duration=60.0,
        renew_deadline=30.0,
        retry_period=1.5,
    )
    assert config.leader_election_enabled


def test_a_leader_election_section_without_leader_elect_leaves_it_off_as_upstream() -> None:
    config = parse("leaderElection:\n  resourceName: x\n")
    assert config.leader_election is not None
    assert config.leader_election_enabled is False


def test_a_leader_election_section_without_timings_gets_15_10_2_and_the_trainer_id() -> None:
    le = parse("leaderElection: {leaderElect: true}\n").leader_election
    assert le is not None
    assert (le.resource_name, le.lease_duration, le.renew_deadline, le.retry_period) == (
        "trainer.kubeflow.org",
        15.0,
        10.0,
        2.0,
    )


def test_null_means_unset() -> None:
    config = parse("webhook:\n  port: null\nmetrics: null\nleaderElection: null\n")
    assert config.webhook.port == 9443
    assert config.metrics.bind_address == ":8443"
    assert config.leader_election is None


def test_cert_management_status_server_and_tls_are_parsed() -> None:
    config = parse(
        "certManagement: {enable: false, webhookServiceName: svc, webhookSecretName: sec}\n"
        "statusServer: {port: 12443, qps: 1, burst: 2}\n"
        "tls: {minVersion: '1.3', cipherSuites: [TLS_AES_128_GCM_SHA256], nextProtos: [h2, http/1.1]}\n"
    )
    assert (config.cert_management.enable, config.cert_management.webhook_service_name) == (False, "svc")
    assert config.cert_management.webhook_secret_name == "sec"
    assert (config.status_server.port, config.status_server.qps, config.status_server.burst) == (
        12443,
        1.0,
        2,
    )
    assert config.tls.min_version == "1.3"
    assert config.tls.cipher_suites == ("TLS_AES_128_GCM_SHA256",)
    assert config.tls.next_protos == ("h2", "http/1.1")


def test_feature_gates_from_the_file_and_then_overrides() -> None:
    config = parse("featureGates: {TrainJobStatus: true}\n")
    assert config.feature_gates.enabled("TrainJobStatus")
    assert config.feature_gates.enabled_set() == frozenset({"TrainJobStatus"})
    overridden = config.with_feature_gates({"TrainJobStatus": False})
    assert not overridden.feature_gates.enabled("TrainJobStatus")
    assert overridden.webhook == config.webhook
    assert config.feature_gates.enabled("TrainJobStatus")  # the original is unchanged


def test_third_party_plugins_are_named_in_order_under_plugins_enabled() -> None:
    assert parse("plugins:\n  enabled: [Acme, Other]\n").plugins.enabled == ("Acme", "Other")
    assert parse("plugins: {}\n").plugins.enabled == ()
    assert parse("plugins: {enabled: null}\n").plugins.enabled == ()


def test_the_shipped_file_enables_no_third_party_plugin() -> None:
    assert load_configuration(SHIPPED).plugins.enabled == ()


def test_the_configuration_is_frozen() -> None:
    config = load_configuration(None)
    with pytest.raises(AttributeError):
        config.webhook = None  # type: ignore[misc]
    with pytest.raises(TypeError):
        config.controller.group_kind_concurrency["X"] = 1  # type: ignore[index]


def test_as_wire_round_trips_through_the_decoder() -> None:
    import yaml

    config = load_configuration(SHIPPED).with_feature_gates({"TrainJobStatus": True})
    assert parse_configuration(yaml.safe_dump(config.as_wire())) == config
    with_plugins = parse("plugins: {enabled: [Acme]}\n")
    assert parse_configuration(yaml.safe_dump(with_plugins.as_wire())) == with_plugins


# --- strict decoding ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("unknownField: value\n", "unknownField"),  # upstream: "unknown fields"
        ("webhook:\n  port: 9443\n  unknownWebhookField: value\n", "webhook.unknownWebhookField"),
        (
            "leaderElection:\n  leaderElect: true\n  leaseDurationSeconds: 15\n",
            "leaderElection.leaseDurationSeconds",
        ),
        ("metrics:\n  BindAddress: ':1'\n", "metrics.BindAddress"),  # case-sensitive, as the strict decoder
        ("tls:\n  minversion: '1.2'\n", "tls.minversion"),
        ("plugins:\n  disabled: [Acme]\n", "plugins.disabled"),
    ],
    ids=["at the top", "in a section", "in leader election", "with the wrong case", "in tls", "in plugins"],
)
def test_an_unknown_field_is_an_error_naming_its_path(body: str, field: str) -> None:
    error = error_of(body)
    assert error.field == field
    assert f"{field}: unknown field" in str(error)


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("webhook: {port: '9443'}\n", "webhook.port"),
        ("webhook: {port: 9443.5}\n", "webhook.port"),
        ("webhook: {port: true}\n", "webhook.port"),
        ("metrics: {secureServing: 'yes please'}\n", "metrics.secureServing"),
        ("clientConnection: {qps: fast}\n", "clientConnection.qps"),
        ("clientConnection: {burst: 3000000000}\n", "clientConnection.burst"),
        (
            "controller: {groupKindConcurrency: {TrainJob.trainer.kubeflow.org: many}}\n",
            "controller.groupKindConcurrency[TrainJob.trainer.kubeflow.org]",
        ),
        ("controller: {groupKindConcurrency: [1]}\n", "controller.groupKindConcurrency"),
        ("leaderElection: {leaderElect: true, leaseDuration: 15}\n", "leaderElection.leaseDuration"),
        ("leaderElection: {leaderElect: true, leaseDuration: 15 s}\n", "leaderElection.leaseDuration"),
        ("featureGates: {TrainJobStatus: enabled}\n", "featureGates[TrainJobStatus]"),
        ("tls: {nextProtos: h2}\n", "tls.nextProtos"),
        ("webhook: 9443\n", "webhook"),
        ("plugins: {enabled: Acme}\n", "plugins.enabled"),
        ("plugins: {enabled: [Acme, 1]}\n", "plugins.enabled[1]"),
        ("plugins: [Acme]\n", "plugins"),
    ],
    ids=[
        "a port given as a string",
        "a port with a fraction",
        "a port given as a boolean",
        "a boolean given as a string",
        "a qps that is not a number",
        "a burst beyond 32 bits",
        "a concurrency that is not a number",
        "a concurrency map that is a list",
        "a duration given as a number",
        "a duration with a space",
        "a feature gate that is not a boolean",
        "a list given as a string",
        "a section given as a scalar",
        "plugins given as a string",
        "a plugin name that is a number",
        "plugins given as a bare list",
    ],
)
def test_a_value_of_the_wrong_type_is_an_error_naming_its_path(body: str, field: str) -> None:
    assert error_of(body).field == field


def test_a_duplicate_key_is_an_error() -> None:
    error = error_of("webhook:\n  port: 1\n  port: 2\n")
    assert "duplicate field 'port'" in str(error)


@pytest.mark.parametrize(
    ("header", "field"),
    [
        ("apiVersion: config.wrong.group/v1\nkind: Configuration\n", "apiVersion"),  # "wrong apiVersion"
        (f"apiVersion: {API_VERSION}\nkind: WrongKind\n", "kind"),  # "wrong kind"
        ("kind: Configuration\n", "apiVersion"),
        (f"apiVersion: {API_VERSION}\n", "kind"),
    ],
    ids=["a wrong apiVersion", "a wrong kind", "no apiVersion", "no kind"],
)
def test_the_file_must_be_a_configuration(header: str, field: str) -> None:
    assert error_of("", header=header).field == field


def test_malformed_yaml_is_an_error() -> None:  # upstream: "malformed YAML"
    with pytest.raises(ConfigurationError, match="not valid YAML"):
        parse_configuration("this is not: valid: yaml: content\n")


def test_two_documents_are_an_error() -> None:
    with pytest.raises(ConfigurationError, match="exactly one document, found 2"):
        parse_configuration(HEADER + "---\n" + HEADER)


def test_a_missing_file_is_an_error_naming_the_file(tmp_path: Path) -> None:  # "nonexistent file"
    path = tmp_path / "absent.yaml"
    with pytest.raises(ConfigurationError) as info:
        load_configuration(path)
    assert info.value.source == path
    assert str(path) in str(info.value)


# --- validation --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ("webhook: {port: 99999}\n", "webhook.port"),  # upstream: "invalid webhook port"
        ("webhook: {port: 0}\n", "webhook.port"),
        ("clientConnection: {qps: -10}\n", "clientConnection.qps"),  # upstream: "negative QPS"
        ("clientConnection: {burst: -1}\n", "clientConnection.burst"),
        (
            "controller: {groupKindConcurrency: {TrainJob.trainer.kubeflow.org: 0}}\n",
            "controller.groupKindConcurrency[TrainJob.trainer.kubeflow.org]",
        ),
        ("statusServer: {port: 70000}\n", "statusServer.port"),
        ("statusServer: {qps: -1}\n", "statusServer.qps"),
        ("statusServer: {burst: -1}\n", "statusServer.burst"),
        ("metrics: {bindAddress: 'localhost'}\n", "metrics.bindAddress"),
        ("health: {healthProbeBindAddress: ':http'}\n", "health.healthProbeBindAddress"),
        ("leaderElection: {leaderElect: true, resourceLock: configmaps}\n", "leaderElection.resourceLock"),
        (
            "leaderElection: {leaderElect: true, leaseDuration: 10s, renewDeadline: 10s}\n",
            "leaderElection.leaseDuration",
        ),
        (
            "leaderElection: {leaderElect: true, renewDeadline: 2s, retryPeriod: 2s}\n",
            "leaderElection.renewDeadline",
        ),
        ("featureGates: {NoSuchGate: true}\n", "featureGates"),
        ("tls: {minVersion: '1.4'}\n", "tls.minVersion"),
        ("tls: {minVersion: '1.0'}\n", "tls.minVersion"),
        ("tls: {minVersion: '1.1'}\n", "tls.minVersion"),
        ("tls: {nextProtos: [a, b, c, d, e, f, g, h, i, j, k]}\n", "tls.nextProtos"),
        ("plugins: {enabled: [Acme, '']}\n", "plugins.enabled[1]"),
    ],
    ids=[
        "a webhook port above 65535",
        "a webhook port of 0",
        "a negative qps",
        "a negative burst",
        "a concurrency below 1",
        "a status server port above 65535",
        "a negative status server qps",
        "a negative status server burst",
        "a metrics address without a port",
        "a health address with a named port",
        "a lock other than leases",
        "a lease no longer than the renew deadline",
        "a renew deadline within the jitter of the retry period",
        "an unknown feature gate",
        "an unknown TLS version",
        "TLS 1.0",
        "TLS 1.1",
        "too many next protocols",
        "an empty plugin name",
    ],
)
def test_an_invalid_value_is_an_error_naming_its_field(body: str, field: str) -> None:
    assert error_of(body).field == field


def test_tls_1_1_is_refused_saying_why() -> None:
    error = error_of("tls: {minVersion: '1.1'}\n")
    assert f"{error.errors[0].path}: {error.errors[0].message}" == (
        "tls.minVersion: TLS 1.1 is not allowed: TLS 1.0 and 1.1 are insecure (RFC 8996); use 1.2 or 1.3, "
        "got '1.1'"
    )


def test_every_invalid_value_is_reported_at_once() -> None:
    error = error_of("webhook: {port: 99999}\nclientConnection: {qps: -1, burst: -1}\n")
    assert [e.path for e in error.errors] == [
        "webhook.port",
        "clientConnection.qps",
        "clientConnection.burst",
    ]
    assert str(error).startswith("invalid configuration: webhook.port: must be between 1 and 65535")


@pytest.mark.parametrize(
    "address", ["0", ":8080", "127.0.0.1:8080", "[::1]:8080", "localhost:0"], ids=lambda a: f"address {a}"
)
def test_bind_addresses_of_every_usual_form_are_accepted(address: str) -> None:
    assert parse(f"metrics: {{bindAddress: '{address}'}}\n").metrics.bind_address == address


# --- Go durations ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("15s", 15.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("1h", 3600.0),
        ("0", 0.0),
        ("1.5s", 1.5),
        ("-2s", -2.0),
        ("250us", 0.00025),
        ("10ns", 1e-8),
    ],
)
def test_go_durations_are_parsed(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "15", "s", "15 s", "15d", "1m30"])
def test_malformed_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


# --- arbitrary input ---------------------------------------------------------------------------------------

_KEYS = st.sampled_from(
    ["webhook", "port", "host", "metrics", "bindAddress", "secureServing", "health", "leaderElection",
     "leaderElect", "leaseDuration", "controller", "groupKindConcurrency", "clientConnection", "qps", "burst",
     "statusServer", "featureGates", "TrainJobStatus", "tls", "minVersion", "nextProtos", "other"]
)  # fmt: skip
_SCALARS = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(max_size=8)
_VALUES = st.recursive(
    _SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=100)
@given(body=st.dictionaries(_KEYS, _VALUES, max_size=5))
def test_arbitrary_input_loads_or_fails_with_a_configuration_error(body: dict[str, object]) -> None:
    import yaml

    document = {"apiVersion": API_VERSION, "kind": "Configuration", **body}
    try:
        config = parse_configuration(yaml.safe_dump(document))
    except ConfigurationError as exc:
        assert exc.errors
        assert all(isinstance(e.path, str) and e.message for e in exc.errors)
    else:
        assert 1 <= config.webhook.port <= 65535
        assert config.client_connection.qps >= 0
        assert all(v >= 1 for v in config.controller.group_kind_concurrency.values())
