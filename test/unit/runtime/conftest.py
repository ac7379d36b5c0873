"""The `make` fixture of the runtime tests: the plugin-author builders of `runtime.testing`.

Their defaults follow the core-runtime tables of upstream (`pkg/runtime/core`, `pkg/util/testing`): the
TrainJob `default/test-job` (UID `uid`, created 2026-01-02T03:00:00Z) on the TrainingRuntime `test-runtime`.
"""

from __future__ import annotations

import pytest

from runtime.testing import Make


@pytest.fixture
def make() -> Make:
    return Make()
