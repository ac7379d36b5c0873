"""controller.serving: the HTTP(S) servers of a manager and what guards them, as controller-runtime's
``pkg/webhook``, ``pkg/certwatcher``, ``pkg/healthz`` and ``pkg/metrics/filters``.

The bounded HTTP server (:mod:`.httpserver`) and the GET-only one the probe, metrics and status endpoints use
(:mod:`.app`), health checks (:mod:`.healthz`), TLS settings (:mod:`.tlsconfig`), certificates reloaded from
disk (:mod:`.certwatcher`) or rotated in a Secret (:mod:`.certs`), bearer-token authentication
(:mod:`.authentication`), the authentication-and-authorization filter of scrapes (:mod:`.filters`), and the
admission webhook server (:mod:`.webhook`).
"""
