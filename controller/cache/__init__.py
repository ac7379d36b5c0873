"""controller.cache: reads served from shared informers, as controller-runtime's ``pkg/cache``.

:mod:`~controller.cache.informer_cache` holds the informer cache (one shared informer per kind, created on
first use, with label selectors per kind and field indexes); the informers themselves are
:mod:`controller.informers`.
"""
