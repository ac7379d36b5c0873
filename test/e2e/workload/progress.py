"""A training step reporting its progress to the status server, as the Kubeflow SDK's in-pod helper does.

The e2e suite on kind runs this in the trainer node of a TrainJob (image ``WORKLOAD_IMAGE``) with the
``TrainJobStatus`` feature gate on, whose plugin gave the container three variables:
``KUBEFLOW_TRAINER_SERVER_URL`` (the status server's URL for this TrainJob), ``KUBEFLOW_TRAINER_SERVER_TOKEN``
(the path of a projected ServiceAccount token whose audience is this TrainJob's status) and
``KUBEFLOW_TRAINER_SERVER_CA_CERT`` (the path of the server's CA certificate).

:func:`update_trainjob_status` is a standard-library stand-in for ``kubeflow.trainer.update_trainjob_status``
of the ``kubeflow`` SDK 0.5.0 (``kubeflow/trainer/backends/kubernetes/utils.py``), which cannot be imported
here: the workload image has Debian's Python and nothing else, and the SDK needs ``requests``, pydantic and
the Kubernetes client. It sends what the SDK sends: ``POST`` to the URL, ``Authorization: Bearer <the token
file, stripped>``, ``Content-Type: application/json``, the body ``{"trainerStatus": {"lastUpdatedTime":
<now, UTC, isoformat>, "progressPercentage": <clamped to 0..100>, "estimatedRemainingSeconds": <at least
0>, "metrics": [{"name": str(k), "value": str(v)}, ...]}}``, verifying the server against the CA file
and its name. Unlike the SDK it returns the HTTP status rather than a bool, so that a refusal shows in the
log, and it retries a connection that fails before any answer for up to ``PROGRESS_CONNECT_TIMEOUT``
seconds (the SDK gives up at once; a retry here only absorbs a slow first name lookup). The SDK's 5 s
throttle and token cache are left out: each call here is one request.

Two modes, by environment:

- default: one report (progress 42, 120 s left, metrics ``loss`` 0.125 and ``accuracy`` 0.95); prints
  ``progress: report: <status>`` and exits 0 only on 200, so the TrainJob fails when the server refuses.
- ``PROGRESS_REFUSALS=<trainjob>`` (another TrainJob of the namespace): three requests, each printed as
  ``progress: <what>: <status>``: ``own`` (its own URL and token: 200 when the wiring is right, a control),
  ``other`` (the other TrainJob's URL, this pod's token: a pod of another TrainJob) and ``no-token`` (its own
  URL without ``Authorization``); exits 0 once all three were answered, whatever the status codes, which the
  test checks.

Any missing variable or unreadable file, or a request never answered, exits 1 with one line on stderr.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from datetime import UTC, datetime

ENV_SERVER_URL = "KUBEFLOW_TRAINER_SERVER_URL"
ENV_CA_CERT = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
ENV_TOKEN_PATH = "KUBEFLOW_TRAINER_SERVER_TOKEN"
MAX_METRICS_COUNT = 256
"""The SDK's limit on the metrics of one update (``_MAX_METRICS_COUNT``)."""

PROGRESS_PERCENT = 42
ESTIMATED_REMAINING_SECONDS = 120
METRICS: dict[str, float | int | str] = {"loss": 0.125, "accuracy": 0.95}
"""What the default mode reports; the test expects exactly this in ``status.trainerStatus``."""


class Failure(Exception):
    """The report cannot be sent; the message says why."""


def _environment() -> tuple[str, str, str]:
    values = []
    for name in (ENV_SERVER_URL, ENV_CA_CERT, ENV_TOKEN_PATH):
        value = os.environ.get(name, "")
        if not value:
            raise Failure(f"{name} is not set: is the TrainJobStatus feature gate on?")
        values.append(value)
    return values[0], values[1], values[2]


def _token(path: str) -> str:
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError as exc:
        raise Failure(f"cannot read the token {path}: {exc}") from exc


def trainer_status(
    progress_percent: int | None = None,
    estimated_remaining_seconds: int | None = None,
    metrics: dict[str, float | int | str] | None = None,
) -> dict[str, object]:
    """The ``trainerStatus`` the SDK builds from these arguments."""
    status: dict[str, object] = {"lastUpdatedTime": datetime.now(UTC).isoformat()}
    if progress_percent is not None:
        status["progressPercentage"] = max(0, min(100, progress_percent))
    if estimated_remaining_seconds is not None:
        status["estimatedRemainingSeconds"] = max(0, estimated_remaining_seconds)
    if metrics:
        items = list(metrics.items())[:MAX_METRICS_COUNT]
        status["metrics"] = [{"name": str(k), "value": str(v)} for k, v in items]
    return status


def post(
    url: str, body: Mapping[str, object], *, ca_file: str, token: str | None, connect_timeout: float
) -> int:
    """POST ``body`` as JSON, as the SDK does; the HTTP status of the answer."""
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    context = ssl.create_default_context(cafile=ca_file)
    data = json.dumps(body).encode()
    deadline = time.monotonic() + connect_timeout
    while True:
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, context=context, timeout=5) as response:
                return int(response.status)
        except urllib.error.HTTPError as exc:  # an answer, not a failure
            return int(exc.code)
        except (urllib.error.URLError, OSError) as exc:
            if time.monotonic() >= deadline:
                raise Failure(f"no answer from {url} within {connect_timeout:.0f} s: {exc}") from exc
            time.sleep(1.0)


def update_trainjob_status(
    progress_percent: int | None = None,
    estimated_remaining_seconds: int | None = None,
    metrics: dict[str, float | int | str] | None = None,
    *,
    connect_timeout: float = 30.0,
) -> int:
    """The SDK's ``update_trainjob_status``, returning the HTTP status instead of whether it was 200."""
    url, ca_file, token_path = _environment()
    body = {"trainerStatus": trainer_status(progress_percent, estimated_remaining_seconds, metrics)}
    return post(url, body, ca_file=ca_file, token=_token(token_path), connect_timeout=connect_timeout)


_TRAINJOB_IN_PATH = re.compile(r"/trainjobs/[^/]+/status$")


def refusals(other: str, *, connect_timeout: float) -> dict[str, int]:
    """The answers to this pod's own report, to its token on ``other``'s URL, and to a report without a
    token."""
    url, ca_file, token_path = _environment()
    token = _token(token_path)
    other_url, replaced = _TRAINJOB_IN_PATH.subn(f"/trainjobs/{other}/status", url)
    if replaced != 1:
        raise Failure(f"{ENV_SERVER_URL}={url} does not end in /trainjobs/<name>/status")
    body = {"trainerStatus": trainer_status(PROGRESS_PERCENT, ESTIMATED_REMAINING_SECONDS, METRICS)}
    return {
        "own": post(url, body, ca_file=ca_file, token=token, connect_timeout=connect_timeout),
        "other": post(other_url, body, ca_file=ca_file, token=token, connect_timeout=connect_timeout),
        "no-token": post(url, body, ca_file=ca_file, token=None, connect_timeout=connect_timeout),
    }


def main() -> int:
    connect_timeout = float(os.environ.get("PROGRESS_CONNECT_TIMEOUT", "30"))
    other = os.environ.get("PROGRESS_REFUSALS", "")
    try:
        if other:
            for what, status in refusals(other, connect_timeout=connect_timeout).items():
                print(f"progress: {what}: {status}", flush=True)
            return 0
        status = update_trainjob_status(
            PROGRESS_PERCENT, ESTIMATED_REMAINING_SECONDS, METRICS, connect_timeout=connect_timeout
        )
    except Failure as exc:
        print(f"progress: {exc}", file=sys.stderr, flush=True)
        return 1
    print(f"progress: report: {status}", flush=True)
    return 0 if status == 200 else 1


if __name__ == "__main__":
    sys.exit(main())
