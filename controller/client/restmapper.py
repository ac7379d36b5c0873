"""The discovery-backed REST mapper: which resource, at which URL, serves a kind.

Go origin: controller-runtime ``pkg/client/apiutil`` (the lazy ``RESTMapper``) over client-go ``discovery``
(``ServerGroups``, ``ServerResourcesForGroupVersion``).

Guarantees: thread-safe; the kinds of :data:`controller.client.gvk.BUILTIN_RESOURCES` never cost a round trip;
other kinds are found in their group-version's resource list, fetched once, cached, and fetched again on a
miss (a CRD installed later is found); a kind nobody serves raises
:class:`~controller.client.errors.NoKindMatch`.

Deliberately missing: the aggregated discovery document (one request per group-version is enough for the
handful of kinds a controller uses), short names, and a disk cache.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from controller.client import errors
from controller.client.gvk import BUILTIN_RESOURCES, GVK, Resource

__all__ = ["DiscoveryReader", "RESTMapper", "parse_api_groups", "parse_api_resource_list"]


def parse_api_resource_list(doc: Mapping[str, Any]) -> dict[str, Resource]:
    """Kind → Resource from a ``metav1.APIResourceList`` (``GET /api/v1``, ``GET /apis/<g>/<v>``).

    Subresources (``pods/status``) are skipped; the first resource named for a kind wins, as the discovery
    RESTMapper does.
    """
    gvk = GVK.from_api_version(str(doc.get("groupVersion") or ""), "")
    out: dict[str, Resource] = {}
    for entry in doc.get("resources") or ():
        name = entry.get("name") or ""
        kind = entry.get("kind") or ""
        if not name or "/" in name or not kind or kind in out:
            continue
        out[kind] = Resource(
            group=gvk.group,
            version=gvk.version,
            plural=name,
            namespaced=bool(entry.get("namespaced")),
            kind=kind,
        )
    return out


def parse_api_groups(
    core: Mapping[str, Any] | None, groups: Mapping[str, Any] | None
) -> dict[str, list[str]]:
    """Group → versions, preferred version first, from ``GET /api`` (``APIVersions``) and ``GET /apis``
    (``APIGroupList``)."""
    out: dict[str, list[str]] = {}
    if core:
        versions = [str(v) for v in core.get("versions") or ()]
        if versions:
            out[""] = versions
    for group in (groups or {}).get("groups") or ():
        name = group.get("name") or ""
        versions = [str(v.get("version")) for v in group.get("versions") or () if v.get("version")]
        preferred = (group.get("preferredVersion") or {}).get("version")
        if preferred in versions:
            versions.remove(preferred)
            versions.insert(0, preferred)
        if name and versions:
            out[name] = versions
    return out


class DiscoveryReader(Protocol):
    """What the mapper needs from a client: one JSON GET (raising ``controller.client.errors`` on failure)."""

    def get_raw(self, path: str) -> Any: ...


class RESTMapper:
    """Resolves kinds to resources through discovery, lazily, with a cache (controller-runtime's lazy mapper).

    Thread-safe. Built-in kinds (:data:`BUILTIN_RESOURCES`) never cost a round trip. Other kinds are looked up
    in their group-version's resource list, fetched on first use and cached; a kind missing from a cached
    list triggers one re-fetch (a CRD may have been installed since). A version of ``""`` asks for the
    group's preferred version (from ``/api`` and ``/apis``, also cached and re-fetched on a miss).
    """

    def __init__(self, reader: DiscoveryReader, builtins: Sequence[Resource] = BUILTIN_RESOURCES) -> None:
        self._reader = reader
        self._lock = threading.Lock()
        self._builtins: dict[GVK, Resource] = {r.gvk: r for r in builtins}
        # Invariant: a group-version is a key only once its resource list was fetched successfully.
        self._discovered: dict[str, dict[str, Resource]] = {}
        self._groups: dict[str, list[str]] | None = None

    def resource_for(self, gvk: GVK) -> Resource:
        """The resource serving ``gvk``; raises :class:`~controller.client.errors.NoKindMatch` if there is
        none."""
        if not gvk.version:
            gvk = GVK(gvk.group, self.preferred_version(gvk.group, gvk.kind), gvk.kind)
        builtin = self._builtins.get(gvk)
        if builtin is not None:
            return builtin
        gv = gvk.api_version
        with self._lock:
            cached = self._discovered.get(gv)
        if cached is not None and gvk.kind in cached:
            return cached[gvk.kind]
        resources = self._fetch_group_version(gvk)
        found = resources.get(gvk.kind)
        if found is None:
            raise errors.NoKindMatch(gvk.group, gvk.version, gvk.kind)
        return found

    def is_served(self, gvk: GVK) -> bool:
        """Whether the API server serves ``gvk`` now, asked of discovery even for a built-in kind (a CRD's
        kind is in :data:`BUILTIN_RESOURCES` so that it costs no round trip, but it is served only once its
        CRD is installed). A group-version already fetched and listing the kind answers without a request."""
        with self._lock:
            cached = self._discovered.get(gvk.api_version)
        if cached is not None and gvk.kind in cached:
            return True
        try:
            return gvk.kind in self._fetch_group_version(gvk)
        except errors.NoKindMatch:
            return False

    def _fetch_group_version(self, gvk: GVK) -> dict[str, Resource]:
        gv = gvk.api_version
        path = f"/apis/{gv}" if gvk.group else f"/api/{gv}"
        try:
            doc = self._reader.get_raw(path)
        except errors.NotFound as exc:
            with self._lock:
                self._discovered.pop(gv, None)
            raise errors.NoKindMatch(gvk.group, gvk.version, gvk.kind) from exc
        resources = parse_api_resource_list(doc)
        with self._lock:
            self._discovered[gv] = resources
        return resources

    def server_groups(self, *, refresh: bool = False) -> dict[str, list[str]]:
        """Group → served versions, preferred first (``""`` is the core group)."""
        with self._lock:
            groups = self._groups
        if groups is None or refresh:
            groups = parse_api_groups(self._reader.get_raw("/api"), self._reader.get_raw("/apis"))
            with self._lock:
                self._groups = groups
        return groups

    def preferred_version(self, group: str, kind: str = "") -> str:
        """The group's preferred version; re-fetches the group list once if the group is unknown."""
        versions = self.server_groups().get(group) or self.server_groups(refresh=True).get(group)
        if not versions:
            raise errors.NoKindMatch(group, "", kind)
        return versions[0]

    def invalidate(self) -> None:
        """Forget everything discovered (built-ins stay)."""
        with self._lock:
            self._discovered.clear()
            self._groups = None

    def __repr__(self) -> str:
        with self._lock:
            discovered = sorted(self._discovered)
        return f"RESTMapper(builtins={len(self._builtins)}, discovered={discovered})"
