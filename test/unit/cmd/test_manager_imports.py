"""What the manager process imports: the `cel` package (and the command-line front end it pulls in,
prompt_toolkit and rich: about 28 MiB resident) only when a CRD rule is evaluated, which the manager never
does (`trainer-render` does)."""

from __future__ import annotations

import subprocess
import sys


def test_the_manager_does_not_import_cel() -> None:
    code = (
        "import sys\n"
        "import trainer_controller_manager.main\n"
        "from controller.trainer import setup, statusserver, webhooks\n"
        "import runtime.core, runtime.schema\n"
        "print(sorted(m for m in ('cel', 'prompt_toolkit') if m in sys.modules))\n"
    )
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert answer.stdout.strip() == "[]"
