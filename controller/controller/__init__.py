"""controller.controller: controllers and what feeds them, as controller-runtime's ``pkg/controller``,
``pkg/reconcile``, ``pkg/event``, ``pkg/predicate``, ``pkg/handler``, ``pkg/source`` and ``pkg/builder``.

Sources (:mod:`.source`) deliver events (:mod:`.event`) through predicates (:mod:`.predicate`) to handlers
(:mod:`.handler`), which enqueue requests that the worker loop (:mod:`.controller`) hands to a reconciler
(:mod:`.reconcile`); :mod:`.builder` wires one with a manager.
"""
