"""ACP semantics over classified frames: indexing, sessions, conformance (sans-I/O)."""
