"""The pieces of the official ``kubernetes`` package the transport uses, without what it never calls.

The transport needs four modules of ``kubernetes`` (37.x): ``config`` (kubeconfig and in-cluster loading,
exec plugins and auth providers), ``client.configuration`` (the loaded ``Configuration``), ``client.rest``
(the urllib3 pool built from it) and ``client.exceptions``. Importing any of them the ordinary way first runs
the package's ``__init__`` files, which import the generated API classes, pydantic and the package's
watch, stream, dynamic and informer helpers; and ``kubernetes.config.kube_config`` imports ``requests``,
``requests_oauthlib`` and ``oauthlib.oauth2`` for its OIDC token refresh. Measured on CPython 3.11, the
manager's process imports 16 MiB less resident memory without them (about 450 modules): 11 MiB for the
packages' ``__init__`` files, 5 MiB for requests and oauthlib.

:func:`load` imports the pieces with four package ``__init__`` files **deferred**, not skipped:
``kubernetes``, ``kubernetes.client``, ``oauthlib.oauth2`` and ``requests_oauthlib`` go into
``sys.modules`` (and onto their parent package) as real, not-yet-executed modules with their own spec,
``__path__`` and ``__file__``. The first lookup of a name such a package does not yet hold runs its
``__init__`` in place and answers. So any other code in the process (the Kubeflow SDK in a test, a
debugger) that asks ``kubernetes.client.CoreV1Api``, ``kubernetes.watch`` or ``requests_oauthlib.OAuth1``
gets the complete package, the same objects an ordinary import gives; and an OIDC refresh, when a
kubeconfig asks for one, completes what it uses (``oauthlib.oauth2.rfc6749``) the same way. Only the
memory is spent later, or never.

Two names need care: ``kube_config`` binds ``kubernetes.client.ApiClient`` (for its
``new_client_from_config`` helpers, which the transport never calls) and ``requests_oauthlib.OAuth2Session``
when it is imported. During that import each deferred package holds a small stand-in class whose
construction completes the package and returns the real object; the stand-ins are removed right after, so
a later lookup of either name completes the package and gets the real class.

A package already imported (ordinarily, before this module) is used as it is. Bound: each deferred
``__init__`` runs at most once, under one lock.
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

__all__ = ["Pieces", "load"]

if TYPE_CHECKING:
    # Exported for annotations only (the transport's); at run time the class is `load().configuration`, so
    # a star import must not name it.
    from kubernetes.client.configuration import Configuration

    __all__ += ["Configuration"]

_LOCK = threading.RLock()  # reentrant: a deferred __init__ looks names up in its own package
_DEFERRED = "__deferred_init__"
"""Set on a package whose ``__init__`` has not run yet: True until the first lookup it cannot answer."""
_STAND_INS: list[type] = []
"""Every stand-in class made (at most two per process)."""


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
    _deferred("kubernetes")
    client = _deferred("kubernetes.client")
    # What kube_config imports for its OIDC token refresh, used only when that runs: requests and oauthlib.
    _deferred("oauthlib.oauth2")
    requests_oauthlib = _deferred("requests_oauthlib")
    configuration = importlib.import_module("kubernetes.client.configuration").Configuration
    rest = importlib.import_module("kubernetes.client.rest")
    if _is_deferred(client) and "Configuration" not in client.__dict__:
        client.__dict__["Configuration"] = configuration  # the real class, as the complete package holds
    # kube_config binds these two names when it is imported; each stands in until then.
    stand_ins = [_stand_in(client, "ApiClient"), _stand_in(requests_oauthlib, "OAuth2Session")]
    try:
        config = importlib.import_module("kubernetes.config")
    finally:
        for module, name, stand_in in stand_ins:
            if module.__dict__.get(name) is stand_in:
                del module.__dict__[name]
    return Pieces(configuration=configuration, rest=rest, config=config)


def _is_deferred(module: ModuleType) -> bool:
    return module.__dict__.get(_DEFERRED) is True


def _stand_in(module: ModuleType, name: str) -> tuple[ModuleType, str, object]:
    """Put a stand-in for the class ``module.name`` into a still-deferred package: building one completes
    the package and builds the real class. Returns what to remove once the importer has bound it."""
    if not _is_deferred(module) or name in module.__dict__:
        return module, name, None
    package = module.__name__

    class OnDemand:
        def __new__(cls, *args: Any, **kwargs: Any) -> Any:
            return getattr(importlib.import_module(package), name)(*args, **kwargs)

    OnDemand.__name__ = OnDemand.__qualname__ = f"{name}OnDemand"
    _STAND_INS.append(OnDemand)
    module.__dict__[name] = OnDemand
    return module, name, OnDemand


def _deferred(name: str) -> ModuleType:
    """``sys.modules[name]``, putting it there unexecuted (``__init__`` deferred) when absent, and onto its
    parent package as an import would."""
    present = sys.modules.get(name)
    if present is not None:
        return present
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        raise ImportError(f"{name} is not an importable package", name=name)
    module = importlib.util.module_from_spec(spec)
    module.__dict__[_DEFERRED] = True
    loader = spec.loader

    def __getattr__(attribute: str) -> Any:
        # Python calls this only for a name the module does not hold yet: any such name, dunder names
        # such as __all__ included, completes the package first.
        with _LOCK:
            if _is_deferred(module):
                module.__dict__[_DEFERRED] = False
                del module.__dict__["__getattr__"]
                for key in [k for k, v in module.__dict__.items() if any(v is s for s in _STAND_INS)]:
                    del module.__dict__[key]  # a stand-in: the __init__ binds the real class
                loader.exec_module(module)
        # The complete module answers, through its own lazy __getattr__ if its __init__ defines one.
        return getattr(module, attribute)

    module.__dict__["__getattr__"] = __getattr__
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        importlib.import_module(parent).__dict__.setdefault(child, module)
    return module
