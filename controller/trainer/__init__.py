"""The Kubeflow Trainer glue: the only package that imports both `controller/` and `runtime/`.

Read top-down:

- `setup`: wires a manager: the runtime registry, the cache's label selectors, the field indexes, the
  three controllers and their watches (upstream `pkg/controller/setup.go`).
- `trainjob_controller`: the TrainJob reconciler (build through the runtime pipeline, apply in order,
  status by merge patch; upstream `pkg/controller/trainjob_controller.go`).
- `runtime_controller`: the TrainingRuntime and ClusterTrainingRuntime reconcilers (strip the legacy
  finalizer).
- `reader`: the runtime pipeline's `Reader` over the informer cache, with live reads where a
  label-narrowed cache cannot prove absence.
- `apply`: the `Applier` (skip the applies that would change nothing, apply, record what was applied, and
  the overlay of objects applied in this reconcile) and merge patches.
- `indexers`: TrainJobs by the runtime they reference.
- `kinds`: the `GVK`s the controllers use.
- `config`, `features`: the manager's `Configuration` file and feature gates (upstream
  `pkg/apis/config/v1alpha1`, `pkg/features`).
- `metrics`: the Trainer's own Prometheus metrics, next to controller-runtime's.

The entry point `trainer-controller-manager` (under `cmd/`) loads the configuration, builds the manager
and calls `setup`.
"""
