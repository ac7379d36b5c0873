"""The `make` fixture of the plugin tests: the plugin-author builders of `runtime.testing`.

Their defaults follow upstream's plugin test tables (`pkg/util/testing/wrapper.go`): a TrainJob called
`trainJob` with UID `trainJob` in `default`, referring to `test-runtime` by name only.
"""

from __future__ import annotations

import pytest

from runtime.testing import Make


@pytest.fixture
def make() -> Make:
    return Make(name="trainJob", uid="trainJob", runtime_kind=None, created=None)
