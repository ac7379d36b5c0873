"""TLS settings of the manager's HTTPS servers: the Configuration's ``tls`` options as an ``ssl`` context.

Go origin: kubeflow/trainer ``pkg/util/tlsconfig`` (``Apply``: ``minVersion``, ``cipherSuites``,
``nextProtos``) over Go's ``crypto/tls`` server defaults, as controller-runtime's webhook and metrics servers
use them.

Guarantees:

- :func:`server_context` returns a server-side :class:`ssl.SSLContext` that accepts **TLS 1.2 and later**
  (Go's server default since Go 1.22), or 1.3 and later with ``min_version: "1.3"``. A client that offers
  only older versions fails the handshake.
- ``cipher_suites`` are Go's names (``TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256``). Secure ones are used;
  insecure ones (Go's ``InsecureCipherSuites``) are used with a warning; unknown names are ignored with a
  warning; when no name is usable the defaults stay, as upstream. The TLS 1.3 suites are accepted and have
  no effect: TLS 1.3 suites are not configurable, in Go as in OpenSSL's cipher list.
- ALPN offers ``next_protos``, default ``["http/1.1"]`` (HTTP/2 off, as upstream after CVE-2023-44487).
  These servers speak HTTP/1.1 only, so other protocols (``h2``) are dropped with a warning rather than
  advertised and then not spoken.
- :class:`TLSOptions` is a frozen value, checked on construction: a ``min_version`` other than ``1.2`` or
  ``1.3`` is a ``ValueError`` naming the field, ``tls.minVersion`` (the Configuration refuses it before
  this point).

Deliberately different from upstream: ``minVersion`` ``1.0`` and ``1.1`` (deprecated by RFC 8996) are
refused, where upstream applies them. No server of this process speaks them: the HTTP server also raises
any context it is handed to TLS 1.2 (:mod:`controller.serving.httpserver`).

Deliberately missing: client certificate authentication (controller-runtime's ``ClientCAName``).
"""

from __future__ import annotations

import ssl
from collections.abc import Sequence
from dataclasses import dataclass

import structlog

__all__ = [
    "DEFAULT_NEXT_PROTOS",
    "INSECURE_CIPHER_SUITES",
    "INSECURE_TLS_VERSIONS",
    "SECURE_CIPHER_SUITES",
    "TLS_VERSIONS",
    "TLSOptions",
    "min_version_problem",
    "server_context",
]

_log = structlog.get_logger("controller.serving.tlsconfig")

TLS_VERSIONS: dict[str, ssl.TLSVersion] = {
    "1.2": ssl.TLSVersion.TLSv1_2,
    "1.3": ssl.TLSVersion.TLSv1_3,
}
"""The ``minVersion`` values served."""
INSECURE_TLS_VERSIONS = ("1.0", "1.1")
"""Upstream's other ``minVersion`` values, refused here (RFC 8996 deprecates them)."""
DEFAULT_MIN_VERSION = "1.2"
DEFAULT_NEXT_PROTOS = ("http/1.1",)
_SPOKEN_PROTOS = frozenset(DEFAULT_NEXT_PROTOS)

# Go's tls.CipherSuites() names → OpenSSL names (None: a TLS 1.3 suite, not configurable).
SECURE_CIPHER_SUITES: dict[str, str | None] = {
    "TLS_AES_128_GCM_SHA256": None,
    "TLS_AES_256_GCM_SHA384": None,
    "TLS_CHACHA20_POLY1305_SHA256": None,
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
# Go's tls.InsecureCipherSuites() names → OpenSSL names.
INSECURE_CIPHER_SUITES: dict[str, str] = {
    "TLS_RSA_WITH_RC4_128_SHA": "RC4-SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA": "DES-CBC3-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256": "AES128-SHA256",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA": "ECDHE-ECDSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA": "ECDHE-RSA-RC4-SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA": "ECDHE-RSA-DES-CBC3-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256": "ECDHE-ECDSA-AES128-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256": "ECDHE-RSA-AES128-SHA256",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TLSOptions:
    """The ``tls`` section: empty values mean upstream's defaults (TLS 1.2, Go's suites, ``http/1.1``)."""

    min_version: str = ""
    cipher_suites: tuple[str, ...] = ()
    next_protos: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        problem = min_version_problem(self.min_version)
        if problem:
            raise ValueError(f"tls.minVersion: {problem}")

    @classmethod
    def of(
        cls, min_version: str = "", cipher_suites: Sequence[str] = (), next_protos: Sequence[str] = ()
    ) -> TLSOptions:
        return cls(
            min_version=min_version, cipher_suites=tuple(cipher_suites), next_protos=tuple(next_protos)
        )


def min_version_problem(value: str) -> str:
    """What is wrong with a ``tls.minVersion`` value (``""``: nothing; empty means the default, 1.2)."""
    if not value or value in TLS_VERSIONS:
        return ""
    if value in INSECURE_TLS_VERSIONS:
        return (
            f"TLS {value} is not allowed: TLS 1.0 and 1.1 are insecure (RFC 8996); use "
            f"{' or '.join(TLS_VERSIONS)}, got {value!r}"
        )
    return f"must be one of {', '.join(TLS_VERSIONS)}, got {value!r}"


def _openssl_ciphers(names: Sequence[str]) -> list[str]:
    chosen: list[str] = []
    for name in names:
        if name in SECURE_CIPHER_SUITES:
            openssl = SECURE_CIPHER_SUITES[name]
            if openssl is not None:
                chosen.append(openssl)
        elif name in INSECURE_CIPHER_SUITES:
            _log.warning(
                "tls.insecure_cipher_suite", cipher_suite=name, note="should not be used in production"
            )
            chosen.append(INSECURE_CIPHER_SUITES[name])
        else:
            _log.warning("tls.unknown_cipher_suite", cipher_suite=name, note="ignored")
    return chosen


def server_context(options: TLSOptions | None = None) -> ssl.SSLContext:
    """A server context with ``options`` applied and no certificate loaded yet (see the module doc)."""
    options = options or TLSOptions()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = TLS_VERSIONS[options.min_version or DEFAULT_MIN_VERSION]
    context.options |= ssl.OP_NO_COMPRESSION | ssl.OP_CIPHER_SERVER_PREFERENCE
    if options.cipher_suites:
        ciphers = _openssl_ciphers(options.cipher_suites)
        if ciphers:
            try:
                context.set_ciphers(":".join(ciphers))
            except ssl.SSLError:
                _log.warning("tls.cipher_suites_unavailable", cipher_suites=list(options.cipher_suites))
    protos = list(options.next_protos) or list(DEFAULT_NEXT_PROTOS)
    dropped = [p for p in protos if p not in _SPOKEN_PROTOS]
    if dropped:
        _log.warning("tls.next_protos_dropped", protocols=dropped, note="only http/1.1 is served")
    spoken = [p for p in protos if p in _SPOKEN_PROTOS] or list(DEFAULT_NEXT_PROTOS)
    context.set_alpn_protocols(spoken)
    return context
