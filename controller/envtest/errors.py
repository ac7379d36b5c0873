"""The exceptions of ``controller.envtest``, named by what went wrong for the caller.

Go origin: none as such (envtest returns wrapped ``error`` values); these are the Python boundary. Every
exception raised by the package is an :class:`EnvtestError`; causes are chained with ``raise ... from``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol


class LoggedProcess(Protocol):
    """What a :class:`StartError` reads of a process (``envtest.process.ManagedProcess`` has it)."""

    @property
    def log_path(self) -> Path: ...

    def log_tail(self) -> str: ...


class EnvtestError(Exception):
    """Base class of every error this package raises."""


class StartError(EnvtestError):
    """A control-plane process exited or did not become ready; the message ends with its log's tail.

    ``address_in_use`` is True when the log says a port was taken, i.e. the caller may retry on new ports.
    """

    def __init__(self, message: str, *, address_in_use: bool = False) -> None:
        super().__init__(message)
        self.address_in_use = address_in_use

    @classmethod
    def for_process(cls, process: LoggedProcess, what: str) -> StartError:
        tail = process.log_tail()
        return cls(
            f"{what}; last lines of {process.log_path}:\n{tail}",
            address_in_use="address already in use" in tail,
        )


class RequestError(EnvtestError):
    """The API server answered a request the control plane itself made with an unexpected status."""

    def __init__(self, method: str, path: str, status: int, body: bytes) -> None:
        text = body.decode("utf-8", "replace")
        super().__init__(f"{method} {path}: HTTP {status}: {text[:2000]}")
        self.method = method
        self.path = path
        self.status = status
        self.body = body
