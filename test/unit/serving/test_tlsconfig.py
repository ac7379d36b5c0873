"""TLS options of the HTTPS servers (controller.serving.tlsconfig), as behaviour: kubeflow/trainer
pkg/util/tlsconfig/tlsconfig_test.go (minVersion, cipherSuites: secure, insecure, unknown; nextProtos)."""

from __future__ import annotations

import ssl

import pytest

from controller.serving.tlsconfig import (
    INSECURE_CIPHER_SUITES,
    SECURE_CIPHER_SUITES,
    TLSOptions,
    server_context,
)


def tls12_ciphers(context: ssl.SSLContext) -> set[str]:
    return {c["name"] for c in context.get_ciphers() if c["protocol"] != "TLSv1.3"}


def test_defaults_are_tls_1_2_and_up() -> None:
    assert server_context().minimum_version == ssl.TLSVersion.TLSv1_2


@pytest.mark.parametrize(
    ("text", "version"), [("1.2", ssl.TLSVersion.TLSv1_2), ("1.3", ssl.TLSVersion.TLSv1_3)]
)
def test_min_version(text: str, version: ssl.TLSVersion) -> None:
    assert server_context(TLSOptions(min_version=text)).minimum_version == version


def test_an_unknown_min_version_names_the_field() -> None:
    with pytest.raises(ValueError, match=r"tls.minVersion: must be one of 1.2, 1.3, got '1.4'"):
        TLSOptions(min_version="1.4")


@pytest.mark.parametrize("text", ["1.0", "1.1"])
def test_tls_1_0_and_1_1_are_refused_naming_the_field_and_why(text: str) -> None:
    # upstream applies them; RFC 8996 deprecates them, and no server here speaks them
    with pytest.raises(ValueError) as caught:
        TLSOptions(min_version=text)
    assert str(caught.value) == (
        f"tls.minVersion: TLS {text} is not allowed: TLS 1.0 and 1.1 are insecure (RFC 8996); use 1.2 or "
        f"1.3, got '{text}'"
    )


def test_cipher_suites_by_go_name_unknown_ones_ignored() -> None:
    context = server_context(
        TLSOptions.of(
            cipher_suites=["TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_AES_128_GCM_SHA256", "NOPE"]
        )
    )
    assert tls12_ciphers(context) == {"ECDHE-RSA-AES128-GCM-SHA256"}


def test_only_unknown_cipher_suites_keep_the_defaults() -> None:
    assert tls12_ciphers(server_context(TLSOptions.of(cipher_suites=["NOPE"]))) == tls12_ciphers(
        server_context()
    )


def test_every_go_suite_name_maps_to_an_openssl_name_or_tls_1_3() -> None:
    assert len(SECURE_CIPHER_SUITES) == 13
    assert len(INSECURE_CIPHER_SUITES) == 12
    tls13 = {name for name, openssl in SECURE_CIPHER_SUITES.items() if openssl is None}
    assert tls13 == {"TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"}


def test_an_insecure_suite_is_used() -> None:
    context = server_context(TLSOptions.of(cipher_suites=["TLS_RSA_WITH_AES_128_GCM_SHA256"]))
    assert tls12_ciphers(context) == {"AES128-GCM-SHA256"}
