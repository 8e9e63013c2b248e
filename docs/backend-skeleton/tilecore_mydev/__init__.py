"""A skeleton tilecore backend (docs/write-a-backend.md walks through it)."""
