"""controller: a level-triggered port of client-go and controller-runtime, and the loop that runs Trainer.

Read top-down, as controller-runtime's ``doc.go``; each package imports only the ones below it
(import-linter's ``layers`` contract in ``pyproject.toml``):

:mod:`controller.trainer` (the Kubeflow glue)
    the TrainJob and runtime reconcilers, admission webhooks, status server, certificates and
    configuration: the only package that imports both ``controller`` and ``runtime``.

:mod:`controller.controller` (``pkg/controller``, ``pkg/reconcile``, ``pkg/builder``, ``pkg/source``, ...)
    :mod:`.controller.controller` turns informer events into
    :class:`~controller.controller.reconcile.Request` keys on a work queue and runs
    ``max_concurrent_reconciles`` workers. Never two workers on one key; an exception requeues with per-key
    exponential backoff; a :class:`~controller.controller.reconcile.TerminalError` is counted and not retried;
    ``Result(requeue_after=...)`` requeues later; success forgets the backoff. Reconcilers are level-based:
    a request carries only namespace/name, and the reconciler reads the current state from the cache.
    Sources (:mod:`.controller.source`) feed events (:mod:`.controller.event`) through predicates
    (:mod:`.controller.predicate`) to event handlers (:mod:`.controller.handler`), which decide which keys
    to enqueue; :mod:`.controller.builder` wires a controller with a manager.

:mod:`controller.manager` (``pkg/manager``, client-go ``tools/leaderelection`` and ``tools/record``)
    owns every long-running piece. Start order: metrics and health servers → caches → wait for cache sync
    (2 min) → leader election (Lease, monotonic clock) → controllers. Stop runs in reverse; losing the
    lease stops reconciling at once and ends :meth:`~controller.manager.manager.Manager.run` with
    ``LeaderElectionLost`` so the process exits non-zero. The event recorder writes core/v1 Events.

:mod:`controller.serving` (``pkg/webhook``, ``pkg/certwatcher``, ``pkg/healthz``, ``pkg/metrics/filters``)
    the one bounded HTTP(S) server under the webhook, status, probe and metrics servers (connections
    capped, header and body deadlines, size caps, TLS >= 1.2, named threads joined on stop); ``/healthz``
    and ``/readyz``; certificates reloaded from a directory without a restart, or rotated in a Secret with
    the webhook configurations' caBundle; bearer tokens checked with TokenReviews, and the metrics filter
    that adds SubjectAccessReviews; the HTTPS admission webhook server on every replica.

:mod:`controller.cache` (``pkg/cache``), :mod:`controller.indexers`, :mod:`controller.informers`
    (client-go ``tools/cache``): one shared informer per kind: a reflector lists and watches with client-go's
    resourceVersion rules, a thread-safe indexed store keeps read-only objects with managedFields stripped,
    and field indexes answer ``by_index(kind, name, value)`` per namespace or cluster-wide.

:mod:`controller.workqueue` (client-go ``util/workqueue``)
    fair, stingy queues with delaying and rate-limiting layers, and controller-runtime's priority queue,
    where initial-list events yield to real changes.

:mod:`controller.client` (``pkg/client``, client-go ``rest``, apimachinery)
    raw JSON to the API server: get, list, watch, create, update, patch, server-side apply, status, delete;
    a token bucket (50 QPS, burst 100) and one mapping of API failures to exceptions; kinds, discovery, the
    watch decoder, an informer's list/watch pair, the wire object type, and the Reader / Writer /
    StatusWriter protocols. Only :mod:`controller.client.transport` touches the ``kubernetes`` package.

:mod:`controller.clock`, :mod:`controller.logging`, :mod:`controller.metrics` (the bottom)
    an injectable clock with a fake for tests; structlog configured by the entry point only; the
    Prometheus registry under controller-runtime's names, labels and buckets (every layer counts into it,
    so it sits below them all).

:mod:`controller.envtest` (``pkg/envtest``)
    an etcd + kube-apiserver control plane for integration tests; :mod:`controller.informers.testing`
    holds a fake ListerWatcher.

The generic machinery never imports :mod:`runtime`; import-linter enforces it (``pyproject.toml``).
See ``docs/architecture.md`` for the contracts between these modules.
"""
