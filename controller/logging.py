"""The one place structlog is configured: called by the entry point (``cmd/``), never by the library.

Go origin: controller-runtime's ``pkg/log`` + ``pkg/log/zap`` (``ctrl.SetLogger(zap.New(...))`` in ``main``;
libraries only ask for a logger). Every module in ``controller/`` does
``structlog.get_logger("controller.<module>")`` and writes stable dotted event names with values in keys
(``reconcile.failed controller=trainjob namespace=ns name=n reconcile_id=…``); until :func:`configure` runs,
structlog's defaults apply (console output), which is what tests see.

Guarantees once configured:

- One line per event on ``stream``: JSON (orjson, one object per line: ``event``, ``level``, ``timestamp``
  in UTC ISO 8601, ``logger``, then the event's keys) in production, or structlog's console renderer in
  development.
- Keys bound with ``structlog.contextvars`` (the controller binds ``controller``, ``namespace``, ``name`` and
  ``reconcile_id`` for the length of each reconcile) appear in every line written in that context.
- Exceptions are rendered as structured tracebacks (JSON) or pretty ones (console), never with frame
  locals (they may hold tokens or Secret data).
- Lines below ``level`` are dropped before any processing (a filtering bound logger).
- Records from the standard ``logging`` module (the ``kubernetes`` package, urllib3) go through the same
  renderer at ``stdlib_level`` and above.

Deliberately missing: verbosity levels (``V(5)``): debug is the lowest level; sampling; log files.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import orjson
import structlog

__all__ = ["configure"]

_LEVELS = {"debug": 10, "info": 20, "warning": 30, "error": 40, "critical": 50}


def _orjson_dumps(obj: Any, **_: Any) -> str:
    return orjson.dumps(obj, default=str).decode()


class _NamedPrintLogger(structlog.PrintLogger):
    """A print logger that remembers the name it was asked for (``get_logger("controller.x")``)."""

    def __init__(self, file: TextIO, name: str) -> None:
        super().__init__(file)
        self.name = name


class _LoggerFactory:
    def __init__(self, file: TextIO) -> None:
        self._file = file

    def __call__(self, *args: Any) -> _NamedPrintLogger:
        return _NamedPrintLogger(self._file, str(args[0]) if args else "")


def configure(
    *,
    json: bool = True,
    level: str = "info",
    stdlib_level: str = "warning",
    stream: TextIO | None = None,
) -> None:
    """Configures structlog, and routes standard ``logging``, for the whole process. Call once, in main."""
    if level not in _LEVELS or stdlib_level not in _LEVELS:
        raise ValueError(f"log levels must be one of {sorted(_LEVELS)}")
    out = stream if stream is not None else sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    renderer: Any
    if json:
        # Tracebacks as data, without frame locals: locals may hold tokens or Secret contents.
        shared.append(
            structlog.processors.ExceptionRenderer(
                structlog.tracebacks.ExceptionDictTransformer(show_locals=False)
            )
        )
        renderer = structlog.processors.JSONRenderer(serializer=_orjson_dumps)
    else:
        renderer = structlog.dev.ConsoleRenderer(exception_formatter=structlog.dev.plain_traceback)

    structlog.configure(
        processors=[*shared, structlog.processors.StackInfoRenderer(), renderer],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS[level]),
        logger_factory=_LoggerFactory(out),
        cache_logger_on_first_use=True,
    )

    handler = logging.StreamHandler(out)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(_LEVELS[stdlib_level])
