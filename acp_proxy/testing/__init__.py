"""Test helpers for ACP clients and agents: an asyncio client and a pytest plugin.

:class:`AcpTestClient` drives an agent (or ``acp-proxy replay``) over stdio;
:mod:`acp_proxy.testing.pytest_plugin` provides the ``acp_agent`` fixture and
``--acp-record-mode``.
"""

from acp_proxy.testing.client import AcpError, AcpTestClient, ActiveSession, LogEntry, Stop

__all__ = ["AcpError", "AcpTestClient", "ActiveSession", "LogEntry", "Stop"]
