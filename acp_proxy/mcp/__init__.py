"""``acp-proxy mcp STORE``: a read-only MCP server over a recording, for coding agents.

:mod:`acp_proxy.mcp.tools` holds the tools as plain functions over the inspector's views (no
SQL, no second analysis: the reader, ``check``, ``diff``, ``search`` and ``stats`` code the CLI
and the web inspector run), each returning bounded text; :mod:`acp_proxy.mcp.server` registers
them on the official ``mcp`` SDK's server and serves them over stdio or Streamable HTTP.
"""
