"""The ``kubernetes`` pieces imported with the package ``__init__`` files deferred: the rest of the process
still gets the complete package, the same objects an ordinary import gives. Each case runs in a fresh
interpreter, since what matters is the import order."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap


def _run(code: str) -> object:
    answer = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return json.loads(answer.stdout)


def test_the_pieces_load_without_the_generated_api() -> None:
    answer = _run(
        """
        import json, sys
        from controller.client import kubernetes_package
        pieces = kubernetes_package.load()
        configuration = pieces.configuration(host="https://127.0.0.1:6443")
        pool = pieces.rest.RESTClientObject(configuration).pool_manager
        print(json.dumps([
            type(pool).__name__,
            pieces.config.load_kube_config.__module__,
            sorted(m for m in ("pydantic", "kubernetes.client.models", "kubernetes.client.api_client",
                               "kubernetes.watch", "kubernetes.dynamic", "requests",
                               "oauthlib.oauth2.rfc6749") if m in sys.modules),
        ]))
        """
    )
    assert answer == ["PoolManager", "kubernetes.config.kube_config", []]


def test_the_rest_of_the_process_gets_the_complete_package() -> None:
    answer = _run(
        """
        import json
        from controller.client import kubernetes_package
        pieces = kubernetes_package.load()
        import kubernetes
        from kubernetes import client, config, watch
        from kubernetes.client import ApiClient, CoreV1Api
        from kubernetes.client.api_client import ApiClient as Real
        from kubernetes.config import kube_config
        api = kube_config.new_client_from_config_dict({
            "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:6443"}}],
            "users": [{"name": "u", "user": {"token": "t"}}],
            "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
            "current-context": "x",
        })
        print(json.dumps([
            kubernetes.__version__ == client.__version__,
            ApiClient is Real, client.ApiClient is Real, type(api) is Real,
            client.Configuration is pieces.configuration,
            CoreV1Api.__module__, watch.Watch.__module__, config is pieces.config,
            "load_kube_config" in dir(config), "V1Pod" in dir(client),
        ]))
        """
    )
    assert answer == [
        True,
        True,
        True,
        True,
        True,
        "kubernetes.client.api.core_v1_api",
        "kubernetes.watch.watch",
        True,
        True,
        True,
    ]


def test_a_package_imported_before_is_used_as_it_is() -> None:
    answer = _run(
        """
        import json
        import kubernetes, kubernetes.client
        from controller.client import kubernetes_package
        pieces = kubernetes_package.load()
        print(json.dumps([pieces.configuration is kubernetes.client.Configuration,
                          "__deferred_init__" in vars(kubernetes.client)]))
        """
    )
    assert answer == [True, False]


def test_the_oidc_refresh_gets_what_it_uses() -> None:
    # kube_config binds OAuth2Session and oauthlib.oauth2 at import and uses them only in an OIDC refresh.
    answer = _run(
        """
        import json
        from controller.client import kubernetes_package
        kubernetes_package.load()
        from kubernetes.config import kube_config
        session = kube_config.OAuth2Session(client_id="trainer", auto_refresh_url="https://127.0.0.1/t")
        from requests_oauthlib import OAuth2Session
        from requests_oauthlib.oauth2_session import OAuth2Session as Real
        import requests
        error = kube_config.oauthlib.oauth2.rfc6749.errors.InvalidClientIdError
        print(json.dumps([type(session) is Real, OAuth2Session is Real, error.__module__,
                          isinstance(session, requests.Session)]))
        """
    )
    assert answer == [True, True, "oauthlib.oauth2.rfc6749.errors", True]
