"""controller.logging.configure: the entry point's one-time structlog set-up."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import orjson
import pytest
import structlog

from controller.logging import configure


@pytest.fixture
def restore_logging() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    structlog.reset_defaults()
    structlog.contextvars.clear_contextvars()
    root.handlers[:] = handlers
    root.setLevel(level)


def test_json_lines_carry_level_logger_time_context_and_keys(restore_logging: None) -> None:
    out = io.StringIO()
    configure(json=True, level="info", stream=out)
    structlog.get_logger("controller.test").debug("dropped.below.level")
    with structlog.contextvars.bound_contextvars(reconcile_id="r-1"):
        structlog.get_logger("controller.test").info("reconcile.done", name="a")
    logging.getLogger("urllib3.connectionpool").warning("retrying %s", "GET")
    lines = [orjson.loads(line) for line in out.getvalue().splitlines()]
    assert [line["event"] for line in lines] == ["reconcile.done", "retrying GET"]
    first = lines[0]
    assert first["level"] == "info" and first["logger"] == "controller.test"
    assert first["reconcile_id"] == "r-1" and first["name"] == "a"
    assert first["timestamp"].endswith("Z")
    assert lines[1]["logger"] == "urllib3.connectionpool" and lines[1]["level"] == "warning"


def test_exceptions_are_structured_without_frame_locals(restore_logging: None) -> None:
    out = io.StringIO()
    configure(json=True, stream=out)
    secret_token = "s3cr3t"  # a local that must never reach a log line
    try:
        raise ValueError(f"bad input of length {len(secret_token)}")
    except ValueError:
        structlog.get_logger("controller.test").exception("reconcile.failed")
    text = out.getvalue()
    assert "s3cr3t" not in text
    line = orjson.loads(text)
    assert line["exception"][0]["exc_type"] == "ValueError"


def test_unknown_levels_are_refused(restore_logging: None) -> None:
    with pytest.raises(ValueError):
        configure(level="verbose")
