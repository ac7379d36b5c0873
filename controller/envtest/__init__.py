"""controller.envtest: a real etcd + kube-apiserver on loopback for integration tests (Tier 1).

Go origin: controller-runtime ``pkg/envtest`` and ``pkg/internal/testing``. The package tests connect to
through a kubeconfig, exactly as they would to any cluster; what it guarantees is in each module:

- ``controlplane``: :class:`ControlPlane`: start/stop, admin kubeconfig, CRD installation, ServiceAccount
  kubeconfigs, apiserver restart and etcd compaction (the failure modes a controller must survive);
- ``apiserver`` and ``etcd``: the two processes and their flags;
- ``certs``: the throwaway CA (serving, client and signing keys), also used by the Tier 2 cluster;
- ``kubeconfig``: self-contained kubeconfig files;
- ``binaries``: where etcd and kube-apiserver are found (``TEST_ASSET_*``, ``TRAINER_TEST_ASSETS`` or
  ``KUBEBUILDER_ASSETS``, or the versioned cache for the versions the caller passes); the library never
  builds them and never looks at a checkout;
- ``process``: child processes in their own process groups, stopped at exit; on SIGTERM too once the
  caller opts in (:func:`controller.envtest.process.install_sigterm_handler`); :func:`free_port`;
- ``suite``: what the tests around a cluster share: :func:`eventually` and :func:`wait_until` (bounded
  waits), per-test namespace names, minimal CRDs for made-up kinds, loading ``hack/`` scripts.

It talks to kube-apiserver with the standard library (``http.client`` + ``ssl``), not the ``kubernetes``
package, which only ``controller.client.transport`` may import.
"""

from __future__ import annotations

from controller.envtest.apiserver import Response
from controller.envtest.binaries import Binaries, BinariesNotFound, cache_directory, find_binaries
from controller.envtest.certs import CertificateAuthority, KeyPair, SigningKeyPair, generate_rsa_keypair
from controller.envtest.controlplane import ControlPlane, ControlPlaneStatistics, load_crds
from controller.envtest.errors import EnvtestError, RequestError, StartError
from controller.envtest.suite import eventually, namespace_name, namespaced_crd, wait_until

__all__ = [
    "Binaries",
    "BinariesNotFound",
    "CertificateAuthority",
    "ControlPlane",
    "ControlPlaneStatistics",
    "EnvtestError",
    "KeyPair",
    "RequestError",
    "Response",
    "SigningKeyPair",
    "StartError",
    "cache_directory",
    "eventually",
    "find_binaries",
    "generate_rsa_keypair",
    "load_crds",
    "namespace_name",
    "namespaced_crd",
    "wait_until",
]
