"""Secret contents (MPI SSH keys, the webhook CA and serving keys and certificates, the manager's token) never
appear in the manager's log or in Events.

``trainer-controller-manager`` runs as shipped but at ``--zap-log-level=debug`` (the most it ever logs),
with the certificate rotator on (it generates the CA and serving key into the Secret
``kubeflow-trainer-webhook-cert`` and onto disk) and leader election, through a fault proxy that refuses
the first MPI Secret writes with 500 (so the failure paths, their log lines and Warning events, run too). MPI
TrainJobs get their SSH-key Secrets. Then the process is stopped, and its whole log and every Event of the
cluster are searched for each Secret value: as stored (base64), decoded, and each line of a PEM body; and
for the bearer token and its signature.
"""

from __future__ import annotations

import base64
import binascii
from pathlib import Path
from typing import Any

import orjson
import yaml

from controller.client.client import Client
from support import reliability

Fault = reliability.faultproxy.Fault

WEBHOOK_SECRET = "kubeflow-trainer-webhook-cert"
MPI_JOBS = 3


def needles(value_b64: str) -> set[str]:
    """What a leak of one Secret value could look like in text: the stored base64, the decoded text, and,
    for PEM, each body line and the joined body (long enough not to match by chance)."""
    found = {value_b64}
    try:
        raw = base64.b64decode(value_b64)
    except (binascii.Error, ValueError):
        return found
    text = raw.decode("utf-8", errors="ignore")
    if len(text) >= 16:
        found.add(text.strip())
    body = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("-----")]
    if any(line.startswith("-----BEGIN") for line in text.splitlines()):
        found.update(line for line in body if len(line) >= 32)
        found.add("".join(body))
    else:  # an authorized_keys line: "<type> <base64 blob>"
        found.update(part for part in text.split() if len(part) >= 32)
    return found


def test_secret_contents_never_appear_in_logs_or_events(  # noqa: PLR0917 - fixtures
    admin: Client,
    service_account_kubeconfig: Path,
    namespace: str,
    tmp_path: Path,
    proxies: Any,
    clean_lease: None,
    figures: Any,
) -> None:
    admin.create(reliability.mpi_runtime(namespace), field_manager=reliability.USER)
    proxy = proxies.new("secrets")
    # Only the MPI Secrets (applied by name): the certificate rotator writes its Secret at start and would
    # otherwise be able to take both refusals, so that no MPI failure path ran.
    refused = proxy.inject(
        Fault(
            status=500,
            match=lambda i: (
                i.resource == "secrets"
                and i.is_write
                and i.namespace == namespace
                and i.name.endswith("-mpi-ssh-auth")
            ),
            limit=2,
        )
    )
    kubeconfig = proxies.kubeconfig(proxy, service_account_kubeconfig, "secrets")
    process = reliability.ManagerProcess(
        tmp_path / "manager", kubeconfig, name="secrets", cert_management=True, log_level="debug"
    ).start()
    try:
        names = [f"mpi-{i}" for i in range(MPI_JOBS)]
        reliability.create_all(
            admin, [reliability.trainjob(namespace, n, "mpi", suspend=i == 0) for i, n in enumerate(names)]
        )

        def written() -> list[dict[str, Any]]:
            assert process.running(), process.tail()
            secrets = [
                reliability.get(admin, reliability.SECRET, f"{n}-mpi-ssh-auth", namespace) for n in names
            ]
            rotated = reliability.get(
                admin, reliability.SECRET, WEBHOOK_SECRET, reliability.OPERATOR_NAMESPACE
            )
            assert (rotated.get("data") or {}).get("tls.key"), "the rotator has not written its Secret yet"
            return [*secrets, rotated]

        secrets = reliability.eventually(written, timeout=90, interval=0.5)
        reliability.eventually(
            lambda: reliability.converged(admin, namespace, names, expect_condition=None), timeout=60
        )
        assert refused.injected == 2
    finally:
        process.terminate()
        process.wait(45)
        process.stop()

    token = yaml.safe_load(service_account_kubeconfig.read_text())["users"][0]["user"]["token"]
    searched: dict[str, str] = {"token": token, "token signature": token.rsplit(".", 1)[-1]}
    for secret in secrets:
        for key, value in (secret.get("data") or {}).items():
            for i, needle in enumerate(sorted(needles(value))):
                searched[f"{secret['metadata']['name']}/{key}#{i}"] = needle
    # The search would find a leak: a value logged as a JSON string shows its PEM body lines.
    key_b64 = secrets[-1]["data"]["tls.key"]
    logged = orjson.dumps({"value": base64.b64decode(key_b64).decode()}).decode()
    assert any(needle in logged for needle in needles(key_b64) if needle != key_b64)
    log = process.log_path.read_text(errors="replace")
    events = admin.list(reliability.EVENT).items
    events_text = orjson.dumps(events).decode()
    leaks = [what for what, needle in searched.items() if needle in log or needle in events_text]
    assert leaks == [], f"Secret contents found in the log or in Events: {leaks}"
    assert '"level":"debug"' in log and '"level":"error"' in log, (
        "the log shows neither debug lines nor errors"
    )
    assert any(e["reason"] == "TrainJobResourcesCreationFailed" for e in events), "no failure path ran"
    figures.report(
        "Secret contents in logs and Events",
        runs=1,
        faults_injected=refused.injected,
        secrets=len(secrets),
        needles=len(searched),
        log_lines=len(log.splitlines()),
        events=len(events),
        found=0,
    )
