"""acp-proxy: a transparent recording proxy, replay server and inspector for ACP.

ACP (the Agent Client Protocol) is JSON-RPC 2.0 between an editor (the client) and a coding
agent, over stdio (one message per line) or WebSocket. This package forwards that traffic
byte for byte, records it to SQLite off the hot path, replays it, and explains it.
"""

__version__ = "0.1.0"
