"""The Reconciler contract: what a controller asks for, and what it gets back.

Go origin: controller-runtime ``pkg/reconcile`` (``Request``, ``Result``, ``Reconciler``, ``TerminalError``)
and the reconcile ID that ``pkg/internal/controller`` puts into every reconcile's context.

Guarantees a :class:`Reconciler` can rely on, and owes in return:

- **Level-based.** A :class:`Request` names an object (namespace and name) and nothing else: not which event
  caused it, not the object's content. The reconciler reads the current state (from the cache) and drives the
  world towards it. Several events may collapse into one request; a deleted object shows up as "not found".
- **Never concurrent per key.** The controller's queue never hands one request to two workers at once.
- **Outcomes** (the table in ``controller.controller.controller``):

  - returning a :class:`Result` with nothing set means success: the key's backoff is forgotten;
  - ``Result(requeue_after=s)`` reconciles again after ``s`` seconds, without backoff;
  - ``Result(requeue=True)`` requeues with the key's backoff (deprecated upstream; prefer ``requeue_after``);
  - raising any exception means "try again later": it is logged once and requeued with per-key exponential
    backoff; a result is meaningless together with an exception;
  - raising :class:`TerminalError` means "retrying will not help": it is logged and counted, never requeued.
    The next event for the object reconciles it again.

- ``Result.priority`` (priority queue only) sets the priority of the re-enqueued request; by default a
  requeue keeps the priority the request was taken with.
- :data:`reconcile_id` holds the ID of the reconcile running on the current thread (a UUID4 string, ``""``
  outside a reconcile); the same ID is bound into every structlog line the reconcile writes.

Deliberately missing: the ``context.Context`` argument (cancellation is the controller's stop; there is no
per-reconcile deadline, see ``controller.controller.controller``), ``ObjectReconciler``/``AsReconciler`` (a
reconciler reads its object through the cache itself), and generic request types (requests are always
namespace/name).
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Protocol

__all__ = [
    "DONE",
    "Func",
    "Reconciler",
    "Request",
    "Result",
    "TerminalError",
    "is_terminal",
    "reconcile_id",
]


@dataclass(frozen=True, slots=True)
class Request:
    """The key of one object to reconcile; ``namespace`` is ``""`` for cluster-scoped objects."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True, slots=True, kw_only=True)
class Result:
    """What a successful reconcile asks of the controller; the default value means "done, forget backoff".

    ``requeue_after`` wins over ``requeue`` when both are set, as upstream.
    """

    requeue_after: float = 0.0
    requeue: bool = False
    priority: int | None = None

    def is_zero(self) -> bool:
        """True when the result asks for nothing (no requeue of any kind, no priority)."""
        return self.requeue_after <= 0 and not self.requeue and self.priority is None


DONE = Result()
"""The zero result, shared: returning it from a reconcile means success."""


class Reconciler(Protocol):
    """The one extension point of a controller. See the module docstring for the contract."""

    def reconcile(self, request: Request) -> Result:
        """Drive the object named by ``request`` towards its desired state; raise to retry with backoff."""
        ...


@dataclass(frozen=True, slots=True)
class Func:
    """Adapts a plain function to :class:`Reconciler` (``reconcile.Func`` upstream)."""

    fn: Callable[[Request], Result]

    def reconcile(self, request: Request) -> Result:
        return self.fn(request)


class TerminalError(Exception):
    """A reconcile failure that retrying cannot fix: logged and counted, never requeued.

    Wraps its cause, which is also set as ``__cause__`` so tracebacks show it::

        raise TerminalError(exc) from exc
        raise TerminalError("spec.runtimeRef names an unsupported kind")
    """

    def __init__(self, cause: BaseException | str) -> None:
        self.cause = cause
        super().__init__(f"terminal error: {cause}")
        if isinstance(cause, BaseException):
            self.__cause__ = cause


def is_terminal(exc: BaseException) -> bool:
    """True if ``exc`` is a :class:`TerminalError` or was raised ``from`` one (``errors.Is`` upstream)."""
    seen: BaseException | None = exc
    depth = 0
    while seen is not None and depth < 32:  # a bound, in case of a cycle in a hand-built chain
        if isinstance(seen, TerminalError):
            return True
        seen = seen.__cause__
        depth += 1
    return False


reconcile_id: ContextVar[str] = ContextVar("reconcile_id", default="")
"""The ID of the reconcile running in the current context; ``""`` outside one."""
