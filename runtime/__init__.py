"""runtime: the pure pipeline that turns a TrainJob and its (Cluster)TrainingRuntime into objects and status.

Go origin: kubeflow/trainer `pkg/runtime` (framework, core runtimes, plugins), `pkg/apply`, and the status
half of `pkg/controller/trainjob_controller.go`; plus the Kubernetes libraries they lean on
(`strategicpatch`, `resource.Quantity`, `PodRequests`).

Guarantees: no network, no threads, no clock reads. Everything the pipeline must read comes through
`runtime.framework.Reader`; the time is an argument; the objects to apply and the status to write are return
values. `runtime/` never imports `controller/` (import-linter enforces it).

Map, read top-down (one reconcile of a TrainJob):

- `runtime.core`: the entry points the controller and the webhook call, on a `RuntimeRegistry` keyed by
  `<Kind>.<group>` (TrainingRuntime, ClusterTrainingRuntime):
  `new_objects(trainjob, reader)` → the objects to apply, in order (the runtime snapshot ConfigMap first
  when it must be created, then what the plugins build); `next_status(trainjob, reader, now)` → the status
  to write, a requeue delay, whether the deadline expired; `validate(old, new, reader)` → field errors and
  warnings for the admission webhook; `watches()` → the plugins' extra watches.
  `runtime.core.snapshot` freezes the runtime a TrainJob started on; `runtime.core.status` has the condition
  and deadline arithmetic; `runtime.core.errors` the typed errors (`UnsupportedRuntimeError`, ...).
- `runtime.info`: `build_info(trainjob, runtime_spec)` → `Info`, the one working model: the JobSet
  template after `runtimePatches` and `resourcesPerNode`, PodSets that are views of its replicated jobs,
  the policies, the trainer overrides. Plus the upsert helpers and env builders plugins use.
- `runtime.framework`: the extension points (one Protocol, one method each), `Phase` (the ordered enum the
  framework runs), `PluginRegistry` (ordered; entry-point loading for third-party plugins), `Framework`
  (dispatch, error wrapping), `Reader` and `MemoryReader`, `FieldError` and `Validation`.
- `runtime.plugins`: the built-in plugins in their fixed order (JobSet, PlainML, Torch, MPI, JAX, XGBoost,
  Flux, CoScheduling, Volcano, TrainJobStatus); `runtime.plugins.podgroup` is what CoScheduling and Volcano
  share.
- `runtime.strategicmerge`: Kubernetes strategic merge patch over dicts (runtime patches, resourcesPerNode).
- `runtime.resources`: exact quantities, pod requests, GPU and CPU counts.
- `runtime.buildable`: what can be built (env var names, container resources, counts within int32, in the
  API server's words), one rule for admission and build; `UnbuildableError` names the field.
- `runtime.api`: the Trainer API types (`trainer.kubeflow.org/v1alpha1`), constants and read-only views.
- `runtime.testing`: builders for plugin tests (TrainJobs, runtimes, jobs, containers as wire dicts).

Writing a plugin: docs/plugins.md.
"""
