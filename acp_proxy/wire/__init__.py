"""Wire level: frame directions, line framing, JSON-RPC classification and lone-surrogate-safe
text (sans-I/O)."""
