"""Health and readiness checks: named checks behind ``/healthz`` and ``/readyz``.

Go origin: controller-runtime ``pkg/healthz/healthz.go`` (the aggregated handler, ``?verbose``,
``?exclude=``, per-check sub-paths, ``Ping``).

Guarantees:

- ``GET /healthz`` (and ``/readyz``) runs every check, in name order, and answers 200 ``ok`` when all pass,
  500 when any fails. With ``?verbose`` (or on failure) the body lists each check as ``[+]name ok``,
  ``[+]name excluded: ok`` or ``[-]name failed: reason withheld``, then ``healthz check passed``/``failed``.
  ``?exclude=name`` (repeatable) skips a check; excludes that match nothing are reported in a ``warn:`` line.
  A handler with no checks answers as if it had one named ``ping``.
- ``GET /healthz/<name>`` runs one check: 200 ``ok``, or 500 ``internal server error: <reason>``; an unknown
  name is 404. The reason is only shown on the sub-path, as upstream.
- A check is a function that returns on success and raises on failure. Checks run on the request's thread
  with no lock held; a slow check delays only its own request.

The server the manager serves them on is :class:`controller.serving.app.Server`.

Deliberately missing: the ``livez`` family.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from posixpath import normpath
from types import MappingProxyType

import structlog

from controller.serving.httpserver import Response

__all__ = [
    "PING",
    "Checker",
    "Handler",
]

_log = structlog.get_logger("controller.serving.healthz")

Checker = Callable[[], None]
"""A health check: returns when healthy, raises (with a reason) when not."""


def _ping() -> None:
    """Always healthy: proves the process serves HTTP (``healthz.Ping``)."""


PING: Checker = _ping


class Handler:
    """The aggregated endpoint over a fixed set of named checks (``healthz.Handler``)."""

    __slots__ = ("_checks", "_kind")

    def __init__(self, checks: Mapping[str, Checker], *, kind: str = "healthz") -> None:
        self._checks = MappingProxyType(dict(checks))
        self._kind = kind

    def serve(self, sub_path: str, query: Mapping[str, list[str]]) -> Response:
        """Answers a request for ``sub_path`` (the part after ``/healthz``; ``""`` or ``/`` is aggregated)."""
        path = normpath("/" + sub_path.lstrip("/"))
        if path == "/":
            return self._aggregated(query)
        name = path[1:]
        if not self._checks and name == "ping":
            return Response(status=200, body=b"ok")
        check = self._checks.get(name)
        if check is None:
            return Response(status=404, body=b"404 page not found\n")
        try:
            check()
        except Exception as exc:  # noqa: BLE001 - a failing check is an answer, not our error
            _log.info("healthz.check_failed", endpoint=self._kind, check=name, error=str(exc))
            return Response(status=500, body=f"internal server error: {exc}\n".encode())
        return Response(status=200, body=b"ok")

    def _aggregated(self, query: Mapping[str, list[str]]) -> Response:
        excluded = set(query.get("exclude", ()))
        lines: list[tuple[str, str]] = []  # (name, line), sorted by name below
        failed = False
        for name, check in self._checks.items():
            if name in excluded:
                excluded.discard(name)
                lines.append((name, f"[+]{name} excluded: ok"))
                continue
            try:
                check()
            except Exception as exc:  # noqa: BLE001 - reported as "[-]name failed", reason withheld
                _log.info("healthz.check_failed", endpoint=self._kind, check=name, error=str(exc))
                lines.append((name, f"[-]{name} failed: reason withheld"))
                failed = True
            else:
                lines.append((name, f"[+]{name} ok"))
        if not self._checks:
            lines.append(("ping", "[+]ping ok"))
        status = 500 if failed else 200
        if not failed and "verbose" not in query:
            return Response(status=status, body=b"ok")
        lines.sort(key=lambda item: item[0])
        out = [line for _, line in lines]
        if excluded:
            quoted = ",".join(f'"{name}"' for name in sorted(excluded))
            out.append(f"warn: some health checks cannot be excluded: no matches for {quoted}")
        out.append(f"{self._kind} check failed" if failed else f"{self._kind} check passed")
        return Response(status=status, body=("\n".join(out) + "\n").encode())

    def __repr__(self) -> str:
        return f"Handler(kind={self._kind!r}, checks={sorted(self._checks)})"
