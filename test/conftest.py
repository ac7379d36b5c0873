"""Fixtures shared by every tier.

- ``no_leaked_threads`` (autouse): fails a test that leaves a thread of ours running, the Python twin of
  client-go's goleak check. Threads are named by their owner (``informer/trainjobs``,
  ``controller/trainjob/worker-2``); interpreter and library threads are ignored.
- Hypothesis runs with the ``project`` profile: no per-example deadline (timing is never asserted).
- The Tier 1 control plane and per-test namespaces live in ``test/integration/conftest.py``;
  the Tier 2 cluster in ``test/e2e/conftest.py``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest
from hypothesis import settings

# No per-example deadline: CI shares 2 cores with a control plane, and a slow example is not a failure.
# Tests that want fewer or more examples still set max_examples themselves.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

# Threads started by libraries we do not own; everything else must be joined by the test that started it.
_FOREIGN_PREFIXES = ("pydevd", "ThreadPoolExecutor", "asyncio", "Dummy-", "hypothesis", "process-reaper")


def _ours(t: threading.Thread) -> bool:
    return t.is_alive() and t is not threading.main_thread() and not t.name.startswith(_FOREIGN_PREFIXES)


@pytest.fixture(autouse=True)
def no_leaked_threads(request: pytest.FixtureRequest) -> Iterator[None]:
    if request.node.get_closest_marker("allow_thread_leaks"):
        yield
        return
    before = {t.ident for t in threading.enumerate()}
    yield
    # A thread that was told to stop may need a moment to be joined by its owner's shut down path.
    deadline = time.monotonic() + 2.0
    while True:
        leaked = [t for t in threading.enumerate() if _ours(t) and t.ident not in before]
        if not leaked or time.monotonic() > deadline:
            break
        time.sleep(0.01)
    if leaked:
        pytest.fail(f"test leaked threads: {sorted(t.name for t in leaked)}", pytrace=False)
