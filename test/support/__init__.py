"""The test-support package: code the tests, the demo and the benchmarks share, imported by name.

pytest puts ``test/`` on ``sys.path`` (``pythonpath`` in ``pyproject.toml``); each ``hack/`` command line does
the same for itself. One concept a module:

- Host processes and the Tier 2 cluster: ``process`` (run a command, stop pids, wait, write YAML),
  ``kwok`` (the cluster: kwokctl's binary runtime, nodes, stages, up/down/env), ``jobset`` (the JobSet
  controller on the host), ``install`` (the Trainer's CRDs, runtimes and RBAC installed into it, and a
  user's TrainJob), ``kueue`` (Kueue on the host, and its overlay and readiness in kind), ``demo``
  (``make demo``), ``e2e_paths`` (what differs between the kwok and kind e2e paths), ``thirdparty``
  (third-party CRDs in the Go module cache).
- Managers as host processes: ``launcher`` (the one launcher of our manager: configuration rewrite,
  throwaway serving certificate, process handle, webhook configurations derived from ``config/webhook/``),
  ``cluster_manager`` (our manager for the kwok cluster), ``upstream`` (upstream's Go manager),
  ``toy_manager`` (a toy controller process for the manager tests).
- Tier 1 and the reliability suite: ``tier1`` (the control-plane fixtures), ``install_manifests`` (the
  shipped kustomize build), ``rbac_probes`` (the manager's requests and their grants), ``reliability``,
  ``faultproxy``; ``crd_acceptance`` and ``trainer_webhooks`` (the fixtures and helpers that the split CRD
  acceptance and webhook integration modules load with ``pytest_plugins``).
- Peers' own Ginkgo e2e suites run against the controller on kind: ``upstream_e2e`` (upstream Trainer's;
  the report reader both use) and ``kueue_e2e`` (Kueue's TrainJob specs).
- Objects and inputs the tiers share: ``trainer_objects``, ``e2e_trainjobs``, ``allreduce_runtime``,
  ``golden``, ``fakes``, ``scaling``, ``upstream_render``, ``helm``.
- Generators whose output is committed and checked: ``crdgen`` (``hack/gen-crds.py``), ``plugin_docs``
  (``hack/gen-plugin-docs.py``).

Not shipped: nothing under ``controller/``, ``runtime/`` or ``cmd/`` imports this package.
"""
