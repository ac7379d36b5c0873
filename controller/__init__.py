"""controller: see docs/architecture.md (map to be written)."""
