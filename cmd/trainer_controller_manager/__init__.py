"""The ``trainer-controller-manager`` binary: flags, configuration, logging, and the manager's life.

Go origin: kubeflow/trainer ``cmd/trainer-controller-manager/main.go``. The package is installed under this
distinct name from ``cmd/trainer_controller_manager/`` (``[tool.setuptools.package-dir]``), so no top-level
``cmd`` package ever shadows the standard library's ``cmd`` module; see ``cmd/README.md``.

- :mod:`.flags`: the command line (upstream's flags, with Go's spellings).
- :mod:`.serving`: where the servers bind and which namespace holds the lease, from the configuration and
  the Pod's environment (``POD_IP``, ``POD_NAMESPACE``).
- :mod:`.main`: :func:`~trainer_controller_manager.main.main`, the manager's life, and its exit codes.
- :mod:`.entrypoint`: the console script (and ``python -m``): the interpreter-wide choices made before any
  import, then :func:`~trainer_controller_manager.main.main`.
"""
