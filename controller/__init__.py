"""controller: a level-triggered port of client-go and controller-runtime, and the loop that runs Trainer.

Read top-down, as controller-runtime's ``doc.go``:

Managers (:mod:`controller.manager.manager`)
    own every long-running piece. Start order: metrics and health servers → caches → wait for cache sync
    (2 min) → leader election (:mod:`controller.manager.leaderelection`, Lease, monotonic clock) →
    controllers. Stop runs in reverse; losing the lease stops reconciling at once and ends :meth:`Manager.run`
    with ``LeaderElectionLost`` so the process exits non-zero.

Controllers (:mod:`controller.controller.controller`, wired by :mod:`controller.controller.builder`)
    turn informer events into :class:`controller.controller.reconcile.Request` keys on a work queue and run
    ``max_concurrent_reconciles`` workers. Never two workers on one key; an exception requeues with per-key
    exponential backoff; :class:`controller.controller.reconcile.TerminalError` is counted and not retried;
    ``Result(requeue_after=...)`` requeues later; success forgets the backoff.

Reconcilers (:mod:`controller.controller.reconcile`)
    are level-based: a request carries only namespace/name, and the reconciler reads the current state from
    the cache. Sources (:mod:`controller.controller.source`) feed events (:mod:`controller.controller.event`)
    through predicates (:mod:`controller.controller.predicate`) to event handlers
    (:mod:`controller.controller.handler`), which decide which keys to enqueue.

Caches (:mod:`controller.cache.informer_cache`, :mod:`controller.informers`, :mod:`controller.indexers`)
    hold one shared informer per kind: a reflector lists and watches with client-go's resourceVersion
    rules, a thread-safe indexed store keeps read-only objects with managedFields stripped, and field
    indexes answer ``list(kind, index=(name, value))`` per namespace or cluster-wide.

Work queues (:mod:`controller.workqueue`)
    are client-go's fair, stingy queues with delaying and rate-limiting layers, and controller-runtime's
    priority queue, where initial-list events yield to real changes.

Clients (:mod:`controller.client.client`, :mod:`controller.client.transport`, :mod:`controller.client.errors`,
:mod:`controller.client.flowcontrol`)
    speak raw JSON to the API server: get, list, watch, create, update, patch, server-side apply, status,
    delete; a token bucket (50 QPS, burst 100) and one mapping of API failures to exceptions. Kinds and
    resources are :mod:`controller.client.gvk`, discovery :mod:`controller.client.restmapper`, the watch
    decoder :mod:`controller.client.watch`, an informer's list/watch pair
    :mod:`controller.client.listerwatcher`, and the wire object type and its deep copy
    :mod:`controller.client.object`. Only :mod:`controller.client.transport` touches the official
    ``kubernetes`` package.

Webhooks (:mod:`controller.serving.webhook`, :mod:`controller.serving.certwatcher`,
:mod:`controller.serving.tlsconfig`, :mod:`controller.serving.certs`)
    an HTTPS admission webhook server that runs on every replica: AdmissionReview v1 in and out, handlers
    that allow, deny (403) or patch, certificates reloaded from a directory without a restart, TLS >= 1.2;
    the certificate rotator that keeps a self-managed CA and serving certificate in a Secret, the
    directory and the webhook configurations' caBundle.

Authentication (:mod:`controller.serving.authentication`, :mod:`controller.serving.filters`)
    bearer tokens checked with TokenReviews; the metrics filter adds SubjectAccessReviews and caches.

Logging and metrics (:mod:`controller.logging`, :mod:`controller.metrics`, :mod:`controller.manager.recorder`,
:mod:`controller.serving.healthz`)
    structlog configured by the entry point only; controller-runtime's Prometheus names, labels and
    buckets; core/v1 Events; ``/healthz`` and ``/readyz``.

HTTP serving (:mod:`controller.serving.httpserver`)
    the one HTTP(S) server under the webhook, status, probe and metrics servers: connections capped,
    header and body deadlines, size caps, TLS >= 1.2, named threads joined on stop.

Testing (:mod:`controller.clock`, :mod:`controller.envtest`, :mod:`controller.informers.testing`)
    an injectable clock with a fake for tests, an etcd + kube-apiserver control plane for integration
    tests, and a fake ListerWatcher.

The generic machinery never imports :mod:`runtime`; import-linter enforces it (``pyproject.toml``).
See ``docs/architecture.md`` for the contracts between these modules.
"""
