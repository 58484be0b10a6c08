"""The MCP server: :mod:`acp_proxy.mcp.tools` registered on the official SDK's ``MCPServer``,
served over stdio or Streamable HTTP.

Every tool is read-only, idempotent and closed-world (its annotations say so), has a JSON
schema built from its typed parameters, and answers in plain text. The work runs in a worker
thread, so one slow query never stalls the other clients of the HTTP server. Over HTTP a
configured token is required on every request (``Authorization: Bearer`` or ``?token=``,
checked in constant time); without one the server only listens on loopback and the SDK's
own DNS-rebinding protection admits loopback ``Host`` headers alone.
"""

from __future__ import annotations

import socket
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import ToolAnnotations
from pydantic import Field

from acp_proxy.mcp.tools import FINDINGS_LAST, PAGE_DEFAULT, PAGE_MAX, StoreTools, ToolFailure
from acp_proxy.transport.address import check_listen
from acp_proxy.transport.ws_bridge import token_from, token_ok

INSTRUCTIONS = """\
Read-only tools over an acp-proxy store: recordings of Agent Client Protocol (ACP,
JSON-RPC 2.0) traffic between a client (an editor) and an agent. Nothing here writes.
Start with list_connections (filters: host, agent, client, label, since such as 2h or
2026-12-01, state running/ended/unknown-end), then connection_summary for one connection
(metadata, totals, latency per method, findings count, how it ended). findings lists the
protocol rules broken (tier error = a MUST, warning = a SHOULD), who broke them (side) and
the frames (#seq). messages pages through frames (filters: session, kind, method,
direction c2a = client to agent / a2c, update_variant; pass after=<cursor> for the next
page); message shows one frame by connection and seq with its raw bytes, parsed JSON and
its request/response pair. search queries the full-text index (message text, tool output,
errors). timeline gives a session's turns with latencies, stats counts and latencies per
method, diff aligns two connections (ids, sessionIds and timestamps ignored). Results
are bounded and say when they were cut: narrow the query or page on."""

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)

ConnectionId = Annotated[int, Field(description="Connection id (see list_connections)")]
OptionalConnection = Annotated[int | None, Field(description="Only this connection (default: all)")]
OptionalSession = Annotated[str | None, Field(description="Only this sessionId")]
Limit = Annotated[
    int,
    Field(description=f"Rows at most (1..{PAGE_MAX})", ge=1, le=PAGE_MAX),
]
Filter = Annotated[str | None, Field(description="Substring, case-insensitive")]


def build_server(location: str | Path) -> MCPServer[Any]:
    """The MCP server over the store at ``location`` (a file or a ``postgresql://`` URL)."""
    tools = StoreTools(location)
    server: MCPServer[Any] = MCPServer(
        "acp-proxy",
        instructions=INSTRUCTIONS,
        version=_version(),
        log_level="WARNING",
    )

    def add(fn: Callable[..., Awaitable[str]], title: str) -> None:
        server.add_tool(
            fn, title=title, description=fn.__doc__, annotations=READ_ONLY, structured_output=False
        )

    async def run(call: Callable[[], str]) -> str:
        try:
            return await anyio.to_thread.run_sync(call)
        except ToolFailure as exc:
            raise ToolError(str(exc)) from None

    async def list_connections(
        host: Filter = None,
        agent: Filter = None,
        client: Filter = None,
        label: Filter = None,
        since: Annotated[
            str | None,
            Field(description="Started at or after: ISO 8601 (UTC), Unix seconds, or 30m/2h/7d"),
        ] = None,
        state: Annotated[str | None, Field(description="running, ended or unknown-end")] = None,
        limit: Limit = PAGE_DEFAULT,
    ) -> str:
        """List recorded connections (newest first): id, state, start, agent, client, host,
        label, frame and session counts."""
        return await run(
            lambda: tools.list_connections(
                host=host,
                agent=agent,
                client=client,
                label=label,
                since=since,
                state=state,
                limit=limit,
            )
        )

    async def connection_summary(connection: ConnectionId) -> str:
        """One connection in one call: metadata, totals, sessions, latency per method,
        findings count and how it ended. Start here."""
        return await run(lambda: tools.connection_summary(connection))

    async def messages(
        connection: OptionalConnection = None,
        session: OptionalSession = None,
        kind: Annotated[
            str | None, Field(description="request, response, notification, error, batch...")
        ] = None,
        method: Annotated[str | None, Field(description="e.g. session/prompt")] = None,
        direction: Annotated[
            str | None, Field(description="c2a (client to agent) or a2c (agent to client)")
        ] = None,
        update_variant: Annotated[
            str | None, Field(description="session/update variant, e.g. agent_message_chunk")
        ] = None,
        after: Annotated[
            int | None, Field(description="Cursor: the 'after=' value a previous page gave")
        ] = None,
        limit: Limit = PAGE_DEFAULT,
    ) -> str:
        """Page through frames in order, one line each (seq, direction, kind, method, id,
        session, size, pair and latency, preview)."""
        return await run(
            lambda: tools.messages(
                connection=connection,
                session=session,
                kind=kind,
                method=method,
                direction=direction,
                update_variant=update_variant,
                after=after,
                limit=limit,
            )
        )

    async def message(
        connection: ConnectionId,
        seq: Annotated[int, Field(description="Frame number in the connection (#seq)")],
    ) -> str:
        """One frame: its exact raw bytes, the parsed JSON, and its request/response pair with
        the latency (long frames are cut with a marker)."""
        return await run(lambda: tools.message(connection, seq))

    async def search(
        query: Annotated[str, Field(description="Words to find (each a phrase; all must match)")],
        connection: OptionalConnection = None,
        session: OptionalSession = None,
        limit: Limit = PAGE_DEFAULT,
    ) -> str:
        """Full-text search of the store (as `acp-proxy search`): message text joined across
        chunks, tool output, methods, errors. Each hit with its connection, #seq and snippet."""
        return await run(
            lambda: tools.search(query, connection=connection, session=session, limit=limit)
        )

    async def findings(
        connection: OptionalConnection = None,
        min_tier: Annotated[
            str, Field(description="Lowest tier listed: info, warning or error")
        ] = "info",
        last: Annotated[
            int,
            Field(description="Without connection: check the newest this many", ge=1, le=1000),
        ] = FINDINGS_LAST,
        limit: Limit = PAGE_DEFAULT,
    ) -> str:
        """Protocol conformance findings (as `acp-proxy check`): tier, rule, the side that broke
        it, the frames (#seq), what happened and the rule's text."""
        return await run(
            lambda: tools.findings(connection=connection, min_tier=min_tier, last=last, limit=limit)
        )

    async def stats(connection: OptionalConnection = None) -> str:
        """Counts, bytes and latency p50/p99/max per method, update variants, and turns per
        session (as `acp-proxy stats`)."""
        return await run(lambda: tools.stats(connection=connection))

    async def diff(
        a: Annotated[int, Field(description="Connection A")],
        b: Annotated[int, Field(description="Connection B")],
        ignore: Annotated[
            list[str] | None,
            Field(description="Also ignore these members (dotted paths, e.g. params.cwd)"),
        ] = None,
        timing_threshold_ms: Annotated[
            float, Field(description="Report exchanges slower by more than this", ge=0)
        ] = 1000.0,
        limit: Limit = PAGE_DEFAULT,
    ) -> str:
        """Compare two connections (as `acp-proxy diff`; JSON-RPC ids, sessionIds, entity ids
        and timestamps ignored): frames added, removed, changed member by member, slower."""
        return await run(
            lambda: tools.diff(
                a, b, ignore=ignore, timing_threshold_ms=timing_threshold_ms, limit=limit
            )
        )

    async def timeline(connection: ConnectionId, session: OptionalSession = None) -> str:
        """The turns of a connection or one session (prompt to end) with their latencies,
        time to first chunk and stop reasons, and the latency per method."""
        return await run(lambda: tools.timeline(connection, session=session))

    add(list_connections, "List connections")
    add(connection_summary, "Connection summary")
    add(messages, "List frames")
    add(message, "One frame")
    add(search, "Search")
    add(findings, "Conformance findings")
    add(stats, "Statistics")
    add(diff, "Compare two connections")
    add(timeline, "Session timeline")
    return server


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("acp-proxy")
    except PackageNotFoundError:
        return "0"


def serve_stdio(location: str | Path) -> None:
    """Serve the tools on stdin/stdout until the client closes them."""
    build_server(location).run("stdio")


ASGIApp = Callable[..., Awaitable[None]]


def _token_guard(app: ASGIApp, token: str) -> ASGIApp:
    """``app`` behind the token: 401 (one line of text) for a request without it."""

    async def guarded(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        headers = {k.title(): v for k, v in headers.items()}
        query = dict(
            part.split("=", 1) if "=" in part else (part, "")
            for part in scope.get("query_string", b"").decode("latin-1").split("&")
            if part
        )
        if token_ok(token_from(headers, query), token):
            await app(scope, receive, send)
            return
        body = b"a valid token is required (Authorization: Bearer ... or ?token=...)\n"
        await send(
            {
                "type": "http.response.start",
                "status": 401,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")],
            }
        )
        await send({"type": "http.response.body", "body": body})

    return guarded


def serve_http(
    location: str | Path,
    host: str,
    port: int,
    *,
    token: str | None = None,
    on_ready: Callable[[str], None] | None = None,
) -> None:
    """Serve the tools over Streamable HTTP at ``http://HOST:PORT/mcp`` until interrupted.

    Raises :class:`~acp_proxy.transport.address.ListenError` for a non-loopback host without
    a token and :class:`OSError` when the address cannot be bound.
    """
    import uvicorn

    check_listen(host, token, what="the MCP server")
    server = build_server(location)
    security = (
        TransportSecuritySettings(enable_dns_rebinding_protection=False)
        if token
        else TransportSecuritySettings(
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    )
    app: ASGIApp = server.streamable_http_app(transport_security=security, host=host)
    if token:
        app = _token_guard(app, token)
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host.strip("[]"), port))
    except OSError:
        sock.close()
        raise
    sock.listen(128)  # connections wait for the server instead of being refused
    bound = sock.getsockname()[1]
    shown = f"[{host.strip('[]')}]" if ":" in host else host
    config = uvicorn.Config(app, log_level="warning", lifespan="on")
    http = uvicorn.Server(config)
    if on_ready is not None:
        on_ready(f"http://{shown}:{bound}/mcp")
    try:
        anyio.run(lambda: http.serve(sockets=[sock]))
    finally:
        sock.close()
