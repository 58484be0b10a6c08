"""Agent mode of ``acp-proxy ws``: one WebSocket connection to one agent process over stdio.

Each connection gets its own agent (:func:`acp_proxy.transport.process.agent.spawn_agent`, in its
own process group with a watchdog) and its own recorded connection. A text message becomes
``payload + \\n`` on the agent's stdin; each line of its stdout becomes one message. Every
direction is one task that awaits the peer it writes to, so a slow reader slows only its own
connection. When either side ends, the agent gets the close sequence of
:class:`~acp_proxy.transport.process.agent.Agent` and whatever it left behind is ended with it.
"""

from __future__ import annotations

import asyncio
import contextlib
import os

from aiohttp import WSMsgType, web

from acp_proxy.recorder.handle import ConnectionRecorder
from acp_proxy.transport.chunks import CHUNK
from acp_proxy.transport.process.agent import Agent, AgentStartError, spawn_agent_async, wait_exit
from acp_proxy.transport.process.pipes import StdinBatcher, agent_pipes, copy_agent_stderr
from acp_proxy.transport.ws.handshake import Handshake, WsSettings
from acp_proxy.transport.ws.rules import (
    CLOSE_TOO_BIG,
    Ignore,
    Refuse,
    ToLine,
    agent_exit_close,
    line_to_message,
    message_to_line,
)
from acp_proxy.transport.ws.sockets import (
    Cork,
    ServerWebSocket,
    close_info,
    close_quietly,
    data_queued,
    log,
    record_close,
    settle_all,
)
from acp_proxy.wire.frame import A2C, C2A
from acp_proxy.wire.framing import LineFramer


async def serve_agent(handshake: Handshake) -> web.StreamResponse:
    """Start an agent for this upgrade request and bridge it until either side ends."""
    s = handshake.settings
    assert s.agent_argv is not None
    try:
        agent = await spawn_agent_async(s.agent_argv, grace=s.grace)
    except AgentStartError as exc:
        return handshake.refuse(502, f"cannot start the agent: {exc}")
    ws: ServerWebSocket | None = None
    try:
        stdin, stdout, stderr = await agent_pipes(agent)
        ws = await handshake.accept()
    except BaseException:
        await agent.end_tree_async(kill_now=True)
        raise
    rec = handshake.record_connection(
        "websocket",
        ws,
        agent_command=list(s.agent_argv),
        cwd=os.getcwd(),
        pid=agent.pid,
    )
    bridge = AgentBridge(ws, agent, stdin, stdout, stderr, rec, s)
    bridge.cork = Cork(handshake.request.transport)
    await bridge.run()
    return ws


class AgentBridge:
    """One WebSocket connection to one agent process over stdio.

    Text message -> ``payload + \\n`` on the agent's stdin; each agent stdout line -> one
    message (the line without its ``\\n``). Recorded frames hold the WebSocket payloads.
    """

    def __init__(
        self,
        ws: ServerWebSocket,
        agent: Agent,
        stdin: asyncio.StreamWriter,
        stdout: asyncio.StreamReader,
        stderr: asyncio.StreamReader,
        rec: ConnectionRecorder,
        settings: WsSettings,
    ) -> None:
        self.ws = ws
        self.agent = agent
        self.stdin = stdin
        self.stdout = stdout
        self.stderr = stderr
        self.rec = rec
        self.settings = settings
        self.warned_binary = False
        self.client_gone = False
        self.too_big = False
        self.cork: Cork | None = None  # the lines of one read leave together

    async def run(self) -> None:
        c2a = asyncio.create_task(self._client_to_agent())
        a2c = asyncio.create_task(self._agent_to_client())
        err = asyncio.create_task(self._stderr())
        agent = self.agent
        returncode: int | None = None
        try:
            done, _ = await asyncio.wait({c2a, a2c}, return_when=asyncio.FIRST_COMPLETED)
            if c2a in done:
                # The client closed (or was refused): the agent's connection is over.
                returncode = await agent.terminate_async(self.stdin)
                draining = [a2c, err]
            else:
                # The agent closed its stdout: it is ending. Close the WebSocket with why.
                returncode = await wait_exit(agent.popen, agent.grace)
                if returncode is None:
                    returncode = await agent.terminate_async(self.stdin)
                code, reason = agent_exit_close(returncode)
                if not self.ws.closed:
                    record_close(self.rec, "proxy", code, reason)
                await close_quietly(self.ws, code, reason)
                draining = [c2a, err]
            # One deadline for what is still in flight (a grandchild may hold the pipes),
            # then what the agent left in its process group goes with it.
            await settle_all(draining, agent.grace)
            await agent.end_tree_async()
        finally:
            for task in (c2a, a2c, err):
                task.cancel()
            if agent.popen.poll() is None or agent.tree.running():
                await agent.end_tree_async(kill_now=True)  # cancelled or failed: at once
                returncode = await wait_exit(agent.popen, None)
            with contextlib.suppress(Exception):
                self.stdin.close()
            self.rec.close(exit_status=returncode if returncode is not None else agent.popen.poll())

    async def _client_to_agent(self) -> None:
        ws, rec = self.ws, self.rec
        agent_ok = True
        batcher = StdinBatcher(self.stdin)
        while True:
            msg = await ws.receive()
            if msg.type == WSMsgType.TEXT or msg.type == WSMsgType.BINARY:
                payload: bytes = msg.data
                binary = msg.type == WSMsgType.BINARY
                decision = message_to_line(payload, binary=binary)
                if isinstance(decision, ToLine):
                    # Recorded before it is written (as on stdio): the agent's answer can
                    # then never be recorded ahead of the request it answers.
                    rec.frame(C2A, payload)
                    if agent_ok:
                        try:
                            # a round trip's line at once; a burst's lines together
                            await batcher.write(decision.line, more=data_queued(ws))
                        except (ConnectionError, OSError, RuntimeError):
                            agent_ok = False
                elif isinstance(decision, Ignore):
                    rec.frame(C2A, payload, binary=True)
                    if not self.warned_binary:
                        self.warned_binary = True
                        rec.event("binary_ignored", {"size": len(payload)})
                        log(f"a client sent a binary message; {decision.why}")
                else:
                    assert isinstance(decision, Refuse)
                    rec.frame(C2A, payload)
                    record_close(rec, "proxy", decision.code, decision.reason)
                    log(f"closing a connection: {decision.reason} (close code {decision.code})")
                    await close_quietly(ws, decision.code, decision.reason)
                    return
                continue
            info = close_info(msg, ws, "client")
            record_close(rec, info.by, info.code, info.reason)
            return

    async def _agent_to_client(self) -> None:
        framer = LineFramer()
        limit = self.settings.max_message
        while True:
            data = await self.stdout.read(CHUNK)
            if not data:
                break
            if self.too_big:
                continue  # the connection is closing: drain the agent, keep nothing
            await self._send_all(framer.feed(data))
            if framer.pending > limit and not self.too_big:
                await self._refusetoo_big()
        last = framer.close()
        if last is not None and not self.too_big:
            await self._send(last)

    async def _send_all(self, lines: list[bytes]) -> None:
        """The lines of one read: recorded in one call, then sent one message each; a line
        over the limit closes the connection (it and the lines after it are not sent)."""
        if len(lines) < 2:
            for line in lines:
                await self._send(line)
            return
        messages: list[tuple[bytes, bool]] = []
        for line in lines:
            payload, binary = line_to_message(line)
            if len(payload) > self.settings.max_message:
                break
            messages.append((payload, binary))
        flags = [binary for _, binary in messages]
        # before sending: causal order
        self.rec.frames(A2C, [payload for payload, _ in messages], flags if any(flags) else None)
        if self.cork is not None and len(messages) > 1:
            self.cork.hold()
        try:
            for payload, binary in messages:
                if self.client_gone:
                    break
                await self._deliver(payload, binary)
        finally:
            if self.cork is not None:
                self.cork.release()
        if len(messages) < len(lines):
            await self._refusetoo_big()

    async def _send(self, line: bytes) -> bool:
        payload, binary = line_to_message(line)
        if len(payload) > self.settings.max_message:
            await self._refusetoo_big()
            return False
        self.rec.frame(A2C, payload, binary=binary)  # before sending: causal order
        if not self.client_gone:
            await self._deliver(payload, binary)
        return True

    async def _deliver(self, payload: bytes, binary: bool) -> None:
        """Send one recorded message; a client that is gone is noted, not raised."""
        try:
            await self.ws.send_frame(payload, WSMsgType.BINARY if binary else WSMsgType.TEXT)
        except (ConnectionError, RuntimeError):
            self.client_gone = True

    async def _refusetoo_big(self) -> None:
        """The agent wrote a line over the limit: close 1009; the agent is then ended."""
        self.too_big = self.client_gone = True
        reason = f"the agent wrote a line over the {self.settings.max_message}-byte limit"
        record_close(self.rec, "proxy", CLOSE_TOO_BIG, reason)
        log(f"closing a connection: {reason}")
        await close_quietly(self.ws, CLOSE_TOO_BIG, reason)

    async def _stderr(self) -> None:
        await copy_agent_stderr(self.stderr, self.rec)
