"""``Manager.api_reader``: live reads get token buckets of their own, as controller-runtime's API reader does.

controller-runtime's manager builds its API reader (``GetAPIReader``) with ``client.New``: a client of its
own, so a REST client, hence a client-go rate limiter, of its own per resource type. Reads that must reach the
API server (the Trainer's cache misses on label-narrowed ConfigMaps) therefore do not wait behind the writes
of the same resource type; ``make bench-scale`` showed a burst of TrainJobs taking twice as long when they
shared one bucket.
"""

from __future__ import annotations

from pathlib import Path

from controller.client.client import Client
from controller.client.gvk import GVK
from controller.client.transport import Transport
from controller.envtest.certs import CertificateAuthority
from controller.envtest.kubeconfig import build_kubeconfig, write_kubeconfig
from controller.manager.manager import Manager, ManagerOptions

CONFIGMAP = GVK("", "v1", "ConfigMap")


def test_from_kubeconfig_gives_the_api_reader_its_own_buckets_on_the_same_connection(tmp_path: Path) -> None:
    ca = CertificateAuthority.new("test-ca").cert_pem
    config = build_kubeconfig(server="https://127.0.0.1:1", ca_pem=ca, user="u", token="t")
    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", config)
    manager = Manager.from_kubeconfig(str(kubeconfig), options=ManagerOptions(qps=7.0, burst=9))
    try:
        reader, client = manager.api_reader, manager.client
        assert reader is not client
        assert reader.transport is client.transport  # one connection pool, one set of credentials
        assert reader.mapper is client.mapper  # one discovery cache
        configmaps = client.resource_for(CONFIGMAP)  # built in: no discovery request
        read_bucket, write_bucket = reader.rate_limiter_for(configmaps), client.rate_limiter_for(configmaps)
        assert read_bucket is not None
        assert write_bucket is not None
        assert read_bucket is not write_bucket
        assert (read_bucket.qps, read_bucket.burst) == (write_bucket.qps, write_bucket.burst) == (7.0, 9)
    finally:
        manager.client.close()


def test_a_manager_given_only_a_client_reads_live_through_it() -> None:
    client = Client(Transport.for_url("https://127.0.0.1:1"))
    try:
        assert Manager(client).api_reader is client
    finally:
        client.close()
