"""Wire level: frames as raw bytes, line framing and JSON-RPC classification (sans-I/O)."""
