"""controller.client: talking to the API server, as controller-runtime's ``pkg/client`` over client-go's
``rest``.

The transport (the only user of the ``kubernetes`` package, whose pieces ``kubernetes_package`` imports),
the REST client, API errors, client-side throttling, kinds and the REST mapper, the watch decoder, the
lister-watcher an informer uses, the wire object type, and the :mod:`~controller.client.interfaces`
(``Reader``, ``Writer``, ``StatusWriter``) a reconciler depends on.
"""
