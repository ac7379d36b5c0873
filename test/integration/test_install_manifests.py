"""The shipped install (``config/default``, built by the pinned kubectl) against a real kube-apiserver.

- The whole build is accepted by ``kubectl apply --server-side`` and every object is then stored; the
  runtimes overlay installs while the webhook configurations point at a server that does not run (the
  runtimes are labelled for the webhook to skip), and an unlabelled runtime is refused by that same webhook
  (so the configuration is live). A second apply keeps what the certificate rotator wrote (the Secret's
  data, a webhook's ``caBundle``). The webhook configurations are deleted when the module ends, so later
  modules of the session are not refused.
- The manager's Pod template passes the API server's own PodSecurity admission at ``restricted`` (a
  server-side dry-run create of a Pod: Tier 1 runs no controllers, so nothing would run it anyway), and a
  Pod that breaks the standard is refused there (the check is live).
- RBAC, with tokens from the TokenRequest API: every request the manager makes (one probe per request
  kind, the exact method, path and body) is allowed for the shipped ServiceAccount; each rule of the shipped
  roles, removed alone from a copy bound to a probe ServiceAccount, makes its probes answer 403. A
  permission the shared plane cannot probe is listed in ``KEPT`` with the reason and has a test of its own:
  ``update`` on ``trainjobs/finalizers`` is shown needed on a second plane that runs the
  ``OwnerReferencesPermissionEnforcement`` admission plugin. That the roles are *sufficient* for a whole run
  is shown by the Trainer manager suite, which runs as the ServiceAccount
  (``test/integration/trainer/conftest.py``).
"""

from __future__ import annotations

import contextlib
import copy
import http.client
import json
import ssl
import subprocess
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from controller.client.client import Client
from controller.client.errors import NotFound
from controller.client.gvk import GVK
from controller.envtest import Binaries, ControlPlane
from support import install_manifests as install
from support.rbac_probes import (
    FINALIZERS,
    KEPT,
    MERGE,
    PROBES,
    TRAINER,
    TRAINJOB_LABEL,
    USER_NS,
    Grant,
    Probe,
    apply_probe,
    meta,
)

NS = install.NAMESPACE
PROBE_ACCOUNT = "rbac-probe"
WEBHOOK_CONFIGURATIONS = (
    GVK("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
    GVK("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
)

Objects = list[dict[str, Any]]


def _gvk(obj: dict[str, Any]) -> GVK:
    group, _, version = obj["apiVersion"].rpartition("/")
    return GVK(group, version, obj["kind"])


@pytest.fixture(scope="module")
def kubectl(envtest_binaries: Binaries) -> Path:
    path = install.kubectl_beside(envtest_binaries.kube_apiserver)
    if not path.is_file():
        pytest.skip(f"no kubectl beside kube-apiserver ({path})")
    return Path(path)


@pytest.fixture(scope="module")
def built(kubectl: Path) -> Objects:
    return list(install.kustomize_build(kubectl, install.DEFAULT_OVERLAY))


@pytest.fixture(scope="module")
def admin(kubeconfig: Path) -> Iterator[Client]:
    client = Client.load(str(kubeconfig), user_agent="install-manifests-test")
    yield client
    client.close()


def _kubectl(kubectl: Path, kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    done = subprocess.run(
        [str(kubectl), f"--kubeconfig={kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, f"kubectl {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="module")
def installed(kubectl: Path, kubeconfig: Path, built: Objects, admin: Client) -> Iterator[Objects]:
    """``kubectl apply --server-side -k config/default``, as docs/install.md says; webhook configurations
    removed at the end (nothing serves them here)."""
    try:
        _kubectl(
            kubectl,
            kubeconfig,
            "apply",
            "--server-side",
            "--force-conflicts",  # the session's fixture installed the CRDs with another field manager
            "-k",
            str(install.DEFAULT_OVERLAY),
        )
        yield built
    finally:
        for gvk in WEBHOOK_CONFIGURATIONS:
            for name in ("validator.trainer.kubeflow.org", "defaulter.trainer.kubeflow.org"):
                with contextlib.suppress(NotFound):
                    admin.delete(gvk, name)


# Install ----------------------------------------------------------------------------------------------


def test_the_whole_build_is_accepted_and_stored(installed: Objects, admin: Client) -> None:
    assert len(installed) == 20
    for obj in installed:
        meta = obj["metadata"]
        stored = admin.get(_gvk(obj), meta["name"], meta.get("namespace"))
        assert stored["metadata"]["name"] == meta["name"]
    deployment = admin.get(GVK("apps", "v1", "Deployment"), "kubeflow-trainer-controller-manager", NS)
    assert deployment["spec"]["template"]["spec"]["serviceAccountName"] == install.SERVICE_ACCOUNT


def test_the_runtimes_install_while_the_webhook_is_down_and_unlabelled_runtimes_meet_it(
    installed: Objects, kubectl: Path, kubeconfig: Path, control_plane: ControlPlane
) -> None:
    _kubectl(
        kubectl,
        kubeconfig,
        "apply",
        "--server-side",
        "--force-conflicts",
        "-k",
        str(install.CONFIG / "runtimes"),
    )
    runtime = yaml.safe_load((install.CONFIG / "runtimes" / "torch-distributed.yaml").read_text())
    runtime["metadata"] = {"name": "install-test-unlabelled"}
    answer = control_plane.admin_request("POST", f"{TRAINER}/clustertrainingruntimes?dryRun=All", runtime)
    assert answer.status >= 500, answer.body  # the webhook is called, and nothing answers it
    assert b"validator.clustertrainingruntime.trainer.kubeflow.org" in answer.body


def test_a_reapply_keeps_what_the_certificate_rotator_wrote(
    installed: Objects, kubectl: Path, kubeconfig: Path, admin: Client
) -> None:
    secret_gvk = GVK("", "v1", "Secret")
    secret = admin.get(secret_gvk, "kubeflow-trainer-webhook-cert", NS)
    secret["data"] = {"ca.crt": "Y2E=", "tls.crt": "Y2VydA==", "tls.key": "a2V5"}
    admin.update(secret, field_manager="cert-rotator")
    validating = WEBHOOK_CONFIGURATIONS[0]
    admin.patch(
        validating,
        "validator.trainer.kubeflow.org",
        [{"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Y2E="}],
        patch_type="json",
        field_manager="cert-rotator",
    )

    _kubectl(
        kubectl, kubeconfig, "apply", "--server-side", "--force-conflicts", "-k", str(install.DEFAULT_OVERLAY)
    )

    assert admin.get(secret_gvk, "kubeflow-trainer-webhook-cert", NS)["data"] == secret["data"]
    webhooks = admin.get(validating, "validator.trainer.kubeflow.org")["webhooks"]
    assert webhooks[0]["clientConfig"]["caBundle"] == "Y2E="


# Pod Security -----------------------------------------------------------------------------------------------


def _pod(template: dict[str, Any], namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "manager-pss-check",
            "namespace": namespace,
            "labels": template["metadata"]["labels"],
        },
        "spec": copy.deepcopy(template["spec"]),
    }


def test_the_manager_pod_passes_the_restricted_pod_security_standard(
    built: Objects, control_plane: ControlPlane, namespace: str
) -> None:
    labelled = control_plane.admin_request(
        "PATCH",
        f"/api/v1/namespaces/{namespace}",
        {"metadata": {"labels": {"pod-security.kubernetes.io/enforce": "restricted"}}},
        content_type=MERGE,
    )
    assert labelled.status == 200, labelled.body
    (deployment,) = [o for o in built if o["kind"] == "Deployment"]
    template = deployment["spec"]["template"]
    pods = f"/api/v1/namespaces/{namespace}/pods?dryRun=All"

    accepted = control_plane.admin_request("POST", pods, _pod(template, namespace))
    assert accepted.status == 201, accepted.body

    escalating = _pod(template, namespace)
    escalating["spec"]["containers"][0]["securityContext"]["allowPrivilegeEscalation"] = True
    refused = control_plane.admin_request("POST", pods, escalating)
    assert refused.status == 403, refused.body
    assert b"violates PodSecurity" in refused.body and b"allowPrivilegeEscalation" in refused.body


# RBAC -------------------------------------------------------------------------------------------------------


MANAGER_ROLES = (
    ("ClusterRole", install.SERVICE_ACCOUNT),
    ("Role", "kubeflow-trainer-leader-election"),
    ("Role", "kubeflow-trainer-webhook-cert"),
)


def _role(objects: Objects, kind: str, name: str) -> dict[str, Any]:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    return found


def _grants(rule: dict[str, Any]) -> set[Grant]:
    return {(g, r, v) for g in rule["apiGroups"] for r in rule["resources"] for v in rule["verbs"]}


def _rule_cases() -> list[tuple[str, str, int]]:
    """(kind, role, rule index) of every rule of the manager's roles, from the source files (the build
    only adds the namespace), but the rules of ``KEPT`` permissions (each has a test of its own)."""
    sources = {
        install.SERVICE_ACCOUNT: "cluster_role.yaml",
        "kubeflow-trainer-leader-election": "leader_election_role.yaml",
        "kubeflow-trainer-webhook-cert": "webhook_cert_role.yaml",
    }
    cases = []
    for kind, name in MANAGER_ROLES:
        role = yaml.safe_load((install.CONFIG / "rbac" / sources[name]).read_text())
        cases += [
            (kind, name, index)
            for index, rule in enumerate(role["rules"])
            if not _grants(rule) <= set(KEPT)  # those have a test of their own, below
        ]
    return cases


def test_every_permission_of_the_manager_has_a_probe_or_a_reason(built: Objects) -> None:
    probed = {grant for probe in PROBES for grant in probe.grants}
    granted: set[Grant] = set()
    for kind, name in MANAGER_ROLES:
        for rule in _role(built, kind, name)["rules"]:
            granted |= _grants(rule)
    assert granted - probed == set(KEPT), "a permission nobody showed to be needed"
    assert probed <= granted, "a probe of a request the roles do not allow"


class _Caller:
    """Raw requests to kube-apiserver with a bearer token (one connection per request)."""

    def __init__(self, server: str, ca_pem: bytes, token: str) -> None:
        parts = urlsplit(server)
        self._host, self._port = parts.hostname or "127.0.0.1", parts.port or 443
        self._context = ssl.create_default_context(cadata=ca_pem.decode())
        self._token = token

    def status(self, probe: Probe) -> tuple[int, str]:
        connection = http.client.HTTPSConnection(self._host, self._port, context=self._context, timeout=10)
        try:
            body = None if probe.body is None else json.dumps(probe.body).encode()
            headers = {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}
            if body is not None:
                headers["Content-Type"] = probe.content_type
            connection.request(probe.method, probe.path, body=body, headers=headers)
            response = connection.getresponse()
            # A watch that was allowed streams: its status line is the answer; do not wait for the body.
            detail = (
                "" if "watch=true" in probe.path and response.status == 200 else response.read(600).decode()
            )
            return response.status, detail
        finally:
            connection.close()


def _token(kubeconfig: Path) -> str:
    config = yaml.safe_load(kubeconfig.read_text())
    return str(config["users"][0]["user"]["token"])


@pytest.fixture(scope="module")
def manager_caller(installed: Objects, control_plane: ControlPlane, admin: Client) -> _Caller:
    path = install.service_account_kubeconfig(control_plane, admin, installed)
    return _Caller(control_plane.server, control_plane.ca_pem, _token(path))


@dataclass
class _ProbeAccount:
    """A ServiceAccount bound to copies of the manager's roles, whose rules a test changes."""

    admin: Client
    roles: dict[tuple[str, str], dict[str, Any]]
    caller: _Caller
    copies: dict[tuple[str, str], str] = field(default_factory=dict)

    def grant(self, without: tuple[str, str, int] | None = None) -> None:
        for (kind, name), role in self.roles.items():
            rules = [r for i, r in enumerate(role["rules"]) if without != (kind, name, i)]
            body = {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": kind,
                "metadata": {
                    "name": self.copies[(kind, name)],
                    **({"namespace": NS} if kind == "Role" else {}),
                },
                "rules": rules,
            }
            self.admin.apply(body, install.FIELD_MANAGER, force=True)


@pytest.fixture(scope="module")
def probe_account(installed: Objects, control_plane: ControlPlane, admin: Client) -> _ProbeAccount:
    roles = {(kind, name): _role(installed, kind, name) for kind, name in MANAGER_ROLES}
    copies = {key: f"{PROBE_ACCOUNT}-{key[1]}" for key in roles}
    account = _ProbeAccount(admin=admin, roles=roles, caller=None, copies=copies)  # type: ignore[arg-type]
    account.grant()
    for (kind, _name), copy_name in copies.items():
        binding_kind = "ClusterRoleBinding" if kind == "ClusterRole" else "RoleBinding"
        admin.apply(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": binding_kind,
                "metadata": {"name": copy_name, **({"namespace": NS} if kind == "Role" else {})},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": copy_name},
                "subjects": [{"kind": "ServiceAccount", "name": PROBE_ACCOUNT, "namespace": NS}],
            },
            install.FIELD_MANAGER,
            force=True,
        )
    path = control_plane.kubeconfig_for_service_account(NS, PROBE_ACCOUNT)
    account.caller = _Caller(control_plane.server, control_plane.ca_pem, _token(path))
    return account


def test_the_shipped_service_account_may_make_every_request_the_manager_makes(
    manager_caller: _Caller, eventually: Callable[..., Any]
) -> None:
    def all_allowed() -> None:
        refused = []
        for probe in PROBES:
            status, detail = manager_caller.status(probe)
            if status not in probe.ok:
                refused.append(f"{probe.what}: {probe.method} {probe.path} -> {status} {detail}")
        assert not refused, "\n".join(refused)

    eventually(all_allowed, timeout=15.0)


@pytest.mark.parametrize(("kind", "role", "index"), _rule_cases(), ids=str)
def test_each_rule_is_needed(
    probe_account: _ProbeAccount, kind: str, role: str, index: int, eventually: Callable[..., Any]
) -> None:
    rule = probe_account.roles[(kind, role)]["rules"][index]
    needed = _grants(rule)
    probes = [p for p in PROBES if needed & set(p.grants)]
    assert probes, f"{kind}/{role} rule {index} has neither a probe nor a reason"

    def statuses(expect_refused: bool) -> None:
        wrong = []
        for probe in probes:
            status, detail = probe_account.caller.status(probe)
            if (status == 403) != expect_refused or (not expect_refused and status not in probe.ok):
                wrong.append(f"{probe.what}: {probe.method} {probe.path} -> {status} {detail}")
        assert not wrong, "\n".join(wrong)

    probe_account.grant()  # every rule: the probes pass (also after the previous case's removal)
    eventually(lambda: statuses(expect_refused=False), timeout=15.0)
    probe_account.grant(without=(kind, role, index))
    eventually(lambda: statuses(expect_refused=True), timeout=15.0)


# trainjobs/finalizers, on a plane of its own -------------------------------------------------------------


def test_trainjob_finalizers_update_is_needed_where_owner_references_are_enforced(
    envtest_binaries: Binaries, built: Objects, eventually: Callable[..., Any]
) -> None:
    """With ``OwnerReferencesPermissionEnforcement`` on (OpenShift enables it), the manager's apply of an
    object owned by a TrainJob (``blockOwnerDeletion: true``) is refused without ``update`` on
    ``trainjobs/finalizers``, and allowed with the shipped ClusterRole. A plane of its own: the session's
    does not run that admission plugin."""
    flags = {"enable-admission-plugins": "OwnerReferencesPermissionEnforcement"}
    with ControlPlane(envtest_binaries, apiserver_flags=flags) as plane:
        plane.install_crds([install.CONFIG / "crd" / "trainer.kubeflow.org_trainjobs.yaml"])
        client = Client.load(str(plane.kubeconfig), user_agent="install-manifests-test")
        try:
            trainjob = client.create(
                {
                    "apiVersion": "trainer.kubeflow.org/v1alpha1",
                    "kind": "TrainJob",
                    "metadata": {"name": "owner", "namespace": USER_NS},
                    "spec": {"runtimeRef": {"name": "torch-distributed"}},
                }
            )
            shipped = _role(built, "ClusterRole", install.SERVICE_ACCOUNT)
            account = _ProbeAccount(
                admin=client,
                roles={("ClusterRole", install.SERVICE_ACCOUNT): shipped},
                caller=None,  # type: ignore[arg-type]
                copies={("ClusterRole", install.SERVICE_ACCOUNT): PROBE_ACCOUNT},
            )
            account.grant()
            client.apply(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": PROBE_ACCOUNT},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": PROBE_ACCOUNT,
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": PROBE_ACCOUNT, "namespace": USER_NS}],
                },
                install.FIELD_MANAGER,
                force=True,
            )
            path = plane.kubeconfig_for_service_account(USER_NS, PROBE_ACCOUNT)
            account.caller = _Caller(plane.server, plane.ca_pem, _token(path))
            owned = {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {
                    **meta("owner-runtime-snapshot"),
                    "labels": {TRAINJOB_LABEL: "owner"},
                    "ownerReferences": [
                        {
                            "apiVersion": "trainer.kubeflow.org/v1alpha1",
                            "kind": "TrainJob",
                            "name": "owner",
                            "uid": trainjob["metadata"]["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "data": {"a": "b"},
            }
            probe = apply_probe(
                "apply an object the TrainJob owns",
                "",
                "configmaps",
                f"/api/v1/namespaces/{USER_NS}/configmaps",
                owned,
            )
            (index,) = [i for i, rule in enumerate(shipped["rules"]) if FINALIZERS in _grants(rule)]

            def answers(expected: int) -> None:
                status, detail = account.caller.status(probe)
                assert status == expected, f"{status} {detail}"

            eventually(lambda: answers(201), timeout=15.0)
            account.grant(without=("ClusterRole", install.SERVICE_ACCOUNT, index))
            eventually(lambda: answers(403), timeout=15.0)
            _, detail = account.caller.status(probe)
            assert "cannot set blockOwnerDeletion" in detail, detail
        finally:
            client.close()
