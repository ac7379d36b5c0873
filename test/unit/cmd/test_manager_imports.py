"""What the manager process imports, checked in a fresh interpreter:

- the `cel` package (and the command-line front end it pulls in, prompt_toolkit and rich: about 28 MiB
  resident) only when a CRD rule is evaluated, which the manager never does (`trainer-render` does);
- from `kubernetes`, only the configuration loaders and the REST pool, not the generated API classes and
  pydantic models, nor requests and oauthlib for an OIDC refresh that never runs
  (`controller.client.kubernetes_package`: 16 MiB);
- no `rich` (nor `pygments`) once the console script has prepared the interpreter (`entrypoint`: 4 MiB);
- no `cryptography` until the certificate rotator is set up (`certManagement.enable`; 8 MiB).
"""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "cel",
    "prompt_toolkit",
    "rich",
    "pygments",
    "pydantic",
    "kubernetes.client.models",
    "requests",
    "cryptography",
)


def _imported(prologue: str) -> tuple[list[str], list[str]]:
    """The heavy modules imported, and the generated API modules of ``kubernetes`` imported."""
    code = (
        "import sys\n"
        f"{prologue}\n"
        "import trainer_controller_manager.main\n"
        "from controller.trainer import setup, statusserver, webhooks\n"
        "import runtime.core, runtime.schema\n"
        "from controller.client.transport import Transport\n"
        "Transport.for_url('https://127.0.0.1:6443', token='t').close()\n"
        f"heavy = {HEAVY!r}\n"
        "import json\n"
        "print(json.dumps([sorted(m for m in heavy if sys.modules.get(m) is not None), sorted(\n"
        "    m for m in sys.modules if m.startswith('kubernetes.client.api.'))]))\n"
    )
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, api = json.loads(answer.stdout)
    return heavy, api


def test_the_manager_imports_nothing_heavy_it_never_uses() -> None:
    prologue = "from trainer_controller_manager.entrypoint import prepare_interpreter; prepare_interpreter()"
    assert _imported(prologue) == ([], [])


def test_without_the_entrypoint_only_rich_comes_back() -> None:
    # structlog imports rich (and pygments) when it can; the rest stays out however the modules are imported.
    assert _imported("") == (["pygments", "rich"], [])


def test_cryptography_comes_with_the_certificate_rotator() -> None:
    code = (
        "import sys\n"
        "from controller.trainer import certificates\n"
        "from controller.trainer.config import load_configuration\n"
        "before = 'cryptography' in sys.modules\n"
        "options = certificates.rotator_options(load_configuration(None), namespace='kubeflow-system')\n"
        "print(before, 'cryptography' in sys.modules, type(options).__name__)\n"
    )
    answer = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert answer.stdout.split() == ["False", "True", "RotatorOptions"]
