"""Fixtures shared by every tier.

- ``no_leaked_threads`` (autouse): fails a test that leaves a thread of ours running, the Python twin of
  client-go's goleak check. Threads are named by their owner (``informer/trainjobs``,
  ``controller/trainjob/worker-2``); interpreter and library threads are ignored.
- Hypothesis runs with the ``project`` profile: no per-example deadline (timing is never asserted).
- ``prerequisite`` (session): what a fixture calls when something the tier needs is missing (Go, the Go
  module proxy, the third-party CRDs). ``prerequisite.missing(reason)`` skips the test, unless
  prerequisites are *required*: ``TRAINER_REQUIRE_CLUSTER`` is true (``make test`` sets it), or it is
  unset and ``CI`` is set to anything but ``false``/``0``. Then it fails the test with the reason, so a
  run without Go cannot pass by skipping the integration and e2e tiers. ``TRAINER_REQUIRE_CLUSTER=0``
  turns it off explicitly.
- The terminal summary ends with the mode (``prerequisites: required|optional (why)``) and
  ``skipped: N (reasons: K x reason; ...)``. In required mode the session also fails if any skip was a
  prerequisite skip, i.e. a skip whose reason starts with ``prerequisite missing:`` (belt and braces:
  ``missing`` already fails the test).
- The Tier 1 control plane and per-test namespaces live in ``test/integration/conftest.py``;
  the Tier 2 cluster in ``test/e2e/conftest.py``.
"""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import NoReturn

import pytest
from hypothesis import settings

# No per-example deadline: CI shares 2 cores with a control plane, and a slow example is not a failure.
# Tests that want fewer or more examples still set max_examples themselves.
settings.register_profile("project", deadline=None)
settings.load_profile("project")

# The shared test parts (test/support) hold assertions too: rewrite them as pytest does a test module's.
pytest.register_assert_rewrite("support")

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


# ------------------------------------------------------------------------------- missing prerequisites

PREREQUISITE_PREFIX = "prerequisite missing: "
"""Every skip made by :meth:`Prerequisite.missing` starts with this, so the summary can tell them apart."""

_FALSE = ("", "0", "false", "no", "off")


def prerequisites_required(environ: Mapping[str, str] | None = None) -> tuple[bool, str]:
    """Whether a missing prerequisite fails the run, and which variable decided it."""
    env = os.environ if environ is None else environ
    explicit = env.get("TRAINER_REQUIRE_CLUSTER")
    if explicit is not None and explicit.strip() != "":
        return explicit.strip().lower() not in _FALSE, f"TRAINER_REQUIRE_CLUSTER={explicit}"
    ci = env.get("CI", "")
    if ci.strip().lower() not in _FALSE:
        return True, f"CI={ci}"
    return False, "neither TRAINER_REQUIRE_CLUSTER nor CI is set"


class Prerequisite:
    """Skip or fail when a tier's prerequisite is missing; see the module docstring."""

    def __init__(self, *, required: bool, why: str) -> None:
        self.required = required
        self.why = why

    def missing(self, reason: str) -> NoReturn:
        if self.required:
            pytest.fail(
                f"{PREREQUISITE_PREFIX}{reason}\n(a missing prerequisite fails this run because {self.why}; "
                "`make unit`, or TRAINER_REQUIRE_CLUSTER=0, skips instead)",
                pytrace=False,
            )
        pytest.skip(f"{PREREQUISITE_PREFIX}{reason}")

    def __repr__(self) -> str:
        return f"<Prerequisite required={self.required} ({self.why})>"


@pytest.fixture(scope="session")
def prerequisite() -> Prerequisite:
    required, why = prerequisites_required()
    return Prerequisite(required=required, why=why)


def _skip_reason(report: pytest.TestReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


def skip_summary(reports: list[pytest.TestReport]) -> tuple[int, Counter[str]]:
    """How many tests were skipped, and how many for each reason (``xfail`` is not a skip)."""
    reasons = Counter(_skip_reason(r) for r in reports if r.skipped and not hasattr(r, "wasxfail"))
    return sum(reasons.values()), reasons


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    required, why = prerequisites_required()
    count, reasons = skip_summary(terminalreporter.stats.get("skipped", []))
    mode = "required" if required else "optional"
    terminalreporter.write_line(f"prerequisites: {mode} ({why})")
    listed = "; ".join(f"{n} x {reason}" for reason, n in reasons.most_common())
    terminalreporter.write_line(f"skipped: {count}" + (f" (reasons: {listed})" if count else ""))
    if required and any(reason.startswith(PREREQUISITE_PREFIX) for reason in reasons):
        terminalreporter.write_line(
            "prerequisite skips are failures in this run (see `prerequisites:` above)", red=True, bold=True
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    required, _ = prerequisites_required()
    if not required or exitstatus != pytest.ExitCode.OK:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    _, reasons = skip_summary(reporter.stats.get("skipped", []))
    if any(reason.startswith(PREREQUISITE_PREFIX) for reason in reasons):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
