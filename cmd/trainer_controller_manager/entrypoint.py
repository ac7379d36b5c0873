"""The ``trainer-controller-manager`` console script and ``python -m trainer_controller_manager``.

What must be chosen for the whole interpreter before anything is imported is chosen here, and then
:func:`trainer_controller_manager.main.main` runs. Tests call that function directly, so none of this
reaches a test process.

- **No ``rich``.** ``structlog`` imports ``rich`` (and with it ``pygments``) whenever it is installed, to
  offer pretty tracebacks; ``common-expression-language`` installs it for its command line. The manager
  renders tracebacks itself (JSON, or structlog's plain traceback on the console: ``controller.logging``),
  so those 70 modules would only cost it memory: 4 MiB resident, measured on CPython 3.11. An
  ``ImportError`` for ``rich`` in this process makes structlog fall back, as it does where rich is absent.
"""

from __future__ import annotations

import sys


def prepare_interpreter() -> None:
    """The interpreter-wide choices above; call before anything else is imported."""
    # None in sys.modules: "import rich" raises ImportError (typeshed types the values as modules only).
    sys.modules.setdefault("rich", None)  # type: ignore[arg-type]


def main() -> int:
    """Make the interpreter-wide choices, then run the manager; returns its exit status."""
    prepare_interpreter()
    from trainer_controller_manager.main import main as run  # noqa: PLC0415 - after the choices above

    return run()
