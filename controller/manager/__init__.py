"""controller.manager: what runs a controller process, as controller-runtime's ``pkg/manager``.

The manager (:mod:`.manager`: start in order, stop in reverse), leader election over a Lease
(:mod:`.leaderelection`, client-go ``tools/leaderelection``) and the event recorder (:mod:`.recorder`,
client-go ``tools/record``). Health checks and servers are :mod:`controller.serving`'s, the metrics registry
is :mod:`controller.metrics`.
"""
