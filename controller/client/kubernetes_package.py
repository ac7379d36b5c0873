"""The pieces of the official ``kubernetes`` package the transport uses, without its generated API.

The transport needs four modules of ``kubernetes`` (37.x): ``config`` (kubeconfig and in-cluster loading,
exec plugins and auth providers), ``client.configuration`` (the loaded ``Configuration``), ``client.rest``
(the urllib3 pool built from it) and ``client.exceptions``. Importing any of them the ordinary way first runs
the package's ``__init__`` files, and ``kubernetes/client/__init__.py`` imports every generated API class
and every pydantic model: about 500 modules and 11 MiB of resident memory in a manager that never calls one
of them (measured on CPython 3.11: 19 MiB for ``import kubernetes``, 8 MiB for the pieces alone, most of it
``requests`` and ``oauthlib``, which the kubeconfig loader imports for its OIDC provider).

:func:`load` imports the pieces with the two package ``__init__`` files **deferred**, not skipped: the
packages ``kubernetes`` and ``kubernetes.client`` go into ``sys.modules`` as real, not-yet-executed modules
(their own spec, ``__path__`` and ``__file__``), and the first lookup of a name they do not yet hold runs
their ``__init__`` in place. Any other code in the process (the Kubeflow SDK in a test, a debugger) that
asks ``kubernetes.client.CoreV1Api`` or ``kubernetes.watch`` gets the complete package, the same objects
an ordinary import gives; only the memory is spent later, or never.

One name needs care: ``kubernetes.config.kube_config`` binds ``kubernetes.client.ApiClient`` when it is
imported, for its ``new_client_from_config`` helpers (the transport never calls them). During that import
the deferred package holds a small stand-in whose construction returns the real ``ApiClient``; the
stand-in is removed right after, so a later lookup of ``ApiClient`` completes the package and gets the
real class.

When ``kubernetes`` is already imported (ordinarily, before this module), :func:`load` uses it as it is.
Bound: the deferred ``__init__`` runs at most once per package, under one lock.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import threading
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kubernetes.client.configuration import Configuration

__all__ = ["Configuration", "Pieces", "load"]

_LOCK = threading.RLock()  # reentrant: a deferred __init__ looks names up in its own package


@dataclass(frozen=True, slots=True)
class Pieces:
    """The modules of ``kubernetes`` the transport uses."""

    configuration: type[Configuration]
    rest: ModuleType  # kubernetes.client.rest: RESTClientObject, the urllib3 pool from a Configuration
    config: ModuleType  # kubernetes.config: load_kube_config, load_incluster_config, ConfigException


@functools.cache
def load() -> Pieces:
    """Import (once) and return the pieces; the packages' ``__init__`` files stay deferred."""
    with _LOCK:
        return _import_pieces()


def _import_pieces() -> Pieces:
    root = _deferred("kubernetes")
    client = _deferred("kubernetes.client")
    root.__dict__.setdefault("client", client)
    configuration = importlib.import_module("kubernetes.client.configuration").Configuration
    rest = importlib.import_module("kubernetes.client.rest")
    _place(client, "Configuration", configuration)  # the real class, as the complete package holds
    _place(client, "ApiClient", _ApiClientOnDemand)
    try:
        config = importlib.import_module("kubernetes.config")
    finally:
        if client.__dict__.get("ApiClient") is _ApiClientOnDemand:
            del client.__dict__["ApiClient"]
    return Pieces(configuration=configuration, rest=rest, config=config)


def _place(module: ModuleType, name: str, value: object) -> None:
    """Put ``value`` into a package whose ``__init__`` is still deferred (not into a complete one)."""
    if module.__dict__.get("__deferred_done__", True) is False and name not in module.__dict__:
        module.__dict__[name] = value


def _deferred(name: str) -> ModuleType:
    """``sys.modules[name]``, putting it there unexecuted (``__init__`` deferred) when absent."""
    present = sys.modules.get(name)
    if present is not None:
        return present
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package", name=name)
    module = importlib.util.module_from_spec(spec)
    module.__dict__["__deferred_done__"] = False
    loader = spec.loader

    def __getattr__(attribute: str) -> Any:
        # Python calls this only for a name the module does not hold yet: any such name, dunder names
        # such as __all__ included, completes the package first.
        with _LOCK:
            if module.__dict__.get("__deferred_done__") is False:
                module.__dict__["__deferred_done__"] = True
                module.__dict__.pop("__getattr__", None)
                if module.__dict__.get("ApiClient") is _ApiClientOnDemand:
                    del module.__dict__["ApiClient"]
                loader.exec_module(module)
        # The complete module answers, through its own lazy __getattr__ if its __init__ defines one.
        return getattr(module, attribute)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    return module


class _ApiClientOnDemand:
    """``kubernetes.client.ApiClient`` while ``kube_config`` is imported; building one builds the real one."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return importlib.import_module("kubernetes.client").ApiClient(*args, **kwargs)
