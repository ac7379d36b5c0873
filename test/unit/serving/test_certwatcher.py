"""The serving certificate watcher (controller.serving.certwatcher), as behaviour: controller-runtime
pkg/certwatcher/certwatcher_test.go (read on start, reload on change, keep the old pair on a bad one, the
read counters), with a Secret volume's symlink swap as the kubelet writes it."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
import structlog.testing

from controller import metrics
from controller.envtest.certs import CertificateAuthority, KeyPair
from controller.serving.certwatcher import CertificateNotReady, CertWatcher


def reads() -> tuple[float, float]:
    total = metrics.REGISTRY.get_sample_value("certwatcher_read_certificate_total") or 0.0
    errors = metrics.REGISTRY.get_sample_value("certwatcher_read_certificate_errors_total") or 0.0
    return total, errors


@pytest.fixture
def ca() -> CertificateAuthority:
    return CertificateAuthority.new("certwatcher-test-ca")


def pair(ca: CertificateAuthority) -> KeyPair:
    return ca.issue_serving(["127.0.0.1"])


def test_without_files_it_is_not_ready_and_says_which_is_missing(tmp_path: Path) -> None:
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    assert not watcher.ready()
    with pytest.raises(CertificateNotReady, match=r"certificates are not ready: .*tls.crt does not exist"):
        watcher.context()
    assert "not ready" in repr(watcher)


def test_unchanged_files_are_read_once(tmp_path: Path, ca: CertificateAuthority) -> None:
    pair(ca).write(tmp_path, "tls.crt", "tls.key")
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    before = reads()
    first = watcher.context()
    assert watcher.context() is first
    assert watcher.ready()
    assert reads() == (before[0] + 1, before[1])


def test_a_secret_volume_symlink_swap_is_a_change(tmp_path: Path, ca: CertificateAuthority) -> None:
    # The kubelet's atomic writer: tls.crt -> ..data/tls.crt, and ..data -> ..<timestamp> swapped by rename.
    def publish(version: str) -> None:
        pair(ca).write(tmp_path / version, "tls.crt", "tls.key")
        os.symlink(version, tmp_path / "..data_tmp")
        os.replace(tmp_path / "..data_tmp", tmp_path / "..data")

    publish("..v1")
    for name in ("tls.crt", "tls.key"):
        os.symlink(f"..data/{name}", tmp_path / name)
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    first = watcher.context()
    publish("..v2")
    second = watcher.context()
    assert second is not first
    assert watcher.context() is second


def test_a_bad_pair_keeps_the_previous_context_and_is_counted_once(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    pair(ca).write(tmp_path, "tls.crt", "tls.key")
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    good = watcher.context()
    before = reads()
    (tmp_path / "tls.key").write_bytes(pair(ca).key_pem)  # does not match the certificate
    assert watcher.context() is good
    assert watcher.context() is good  # the same bad files are not read again
    assert reads() == (before[0] + 1, before[1] + 1)
    pair(ca).write(tmp_path, "tls.crt", "tls.key")  # the rotation completes
    assert watcher.context() is not good


def test_an_in_place_rewrite_keeping_size_and_time_is_seen(tmp_path: Path, ca: CertificateAuthority) -> None:
    # Within one tick of the kernel's coarse file clock a rewrite keeps the size and the modification time;
    # forge exactly that: the contents alone tell the change.
    first, second = pair(ca), pair(ca)
    first.write(tmp_path, "tls.crt", "tls.key")
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    old = watcher.context()
    stamp = os.stat(tmp_path / "tls.key").st_mtime_ns
    before = reads()
    (tmp_path / "tls.key").write_bytes(second.key_pem[: len(first.key_pem)].ljust(len(first.key_pem), b"\n"))
    os.utime(tmp_path / "tls.key", ns=(stamp, stamp))
    assert os.stat(tmp_path / "tls.key").st_size == len(first.key_pem)
    assert watcher.context() is old  # the old pair stays: the new key does not load ...
    assert reads() == (before[0] + 1, before[1] + 1)  # ... but the files were read again
    watcher.context()
    assert reads() == (before[0] + 1, before[1] + 1)  # and those same contents are not read again


def test_a_half_written_rotation_is_logged_at_info_and_a_settled_bad_pair_at_error(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    pair(ca).write(tmp_path, "tls.crt", "tls.key")
    watcher = CertWatcher(tmp_path / "tls.crt", tmp_path / "tls.key")
    watcher.context()
    (tmp_path / "tls.key").write_bytes(pair(ca).key_pem)  # just written: the certificate comes next
    with structlog.testing.capture_logs() as fresh:
        watcher.context()
    settled = time.time_ns() - 60 * 10**9
    for name in ("tls.crt", "tls.key"):
        os.utime(tmp_path / name, ns=(settled, settled))
    (tmp_path / "tls.crt").write_bytes((tmp_path / "tls.crt").read_bytes())  # read again ...
    os.utime(tmp_path / "tls.crt", ns=(settled - 10**9, settled - 10**9))  # ... but settled long ago
    with structlog.testing.capture_logs() as old:
        watcher.context()
    assert [(e["event"], e["log_level"]) for e in fresh] == [("certwatcher.read_failed", "info")]
    assert [(e["event"], e["log_level"]) for e in old] == [("certwatcher.read_failed", "error")]
