"""``python -m trainer_controller_manager``: the same as the ``trainer-controller-manager`` console script."""

from __future__ import annotations

from trainer_controller_manager.entrypoint import main

raise SystemExit(main())
