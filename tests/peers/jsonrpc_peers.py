"""Raw JSON-RPC peers for the tests: the same scripted client over stdio and over HTTP+SSE.

:class:`StdioPeer` talks to an agent process directly; :class:`HttpPeer` talks to
``acp-proxy serve`` the way the RFD says (POST, SSE GETs merged into one inbox, DELETE).
:func:`v2_scenario` drives the demo agent through a v2 prompt with a permission, a cancelled
turn and a ``session/resume`` with ``replayFrom`` on a second connection, and returns every
message the client got, for comparison between the two.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2

Message = dict[str, Any]


class Peer:
    """An inbox of agent messages and the calls the scenario makes."""

    def __init__(self) -> None:
        self.inbox: asyncio.Queue[Message] = asyncio.Queue()
        self.seen: list[Message] = []
        self.next_id = 0

    async def send(self, message: Message, session: str | None = None) -> None:
        raise NotImplementedError

    async def close(self) -> None:
        raise NotImplementedError

    async def on_session(self, session: str) -> None:
        """A session id became known (HTTP: open its stream)."""

    async def call(
        self,
        method: str,
        params: Message,
        session: str | None = None,
        on_message: Callable[[Message], Awaitable[None]] | None = None,
    ) -> Message:
        self.next_id += 1
        rid = self.next_id
        await self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}, session)
        return await self.until(lambda m: m.get("id") == rid and "method" not in m, on_message)

    async def until(
        self,
        done: Callable[[Message], bool],
        on_message: Callable[[Message], Awaitable[None]] | None = None,
    ) -> Message:
        while True:
            message = await asyncio.wait_for(self.inbox.get(), 120)
            self.seen.append(message)
            if on_message is not None and "method" in message:
                await on_message(message)
            if done(message):
                return message


class StdioPeer(Peer):
    def __init__(self, argv: list[str]) -> None:
        super().__init__()
        self.argv = argv
        self.proc: asyncio.subprocess.Process | None = None
        self.reader: asyncio.Task[None] | None = None

    async def start(self) -> StdioPeer:
        self.proc = await asyncio.create_subprocess_exec(
            *self.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
        )
        self.reader = asyncio.create_task(self._read())
        return self

    async def _read(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        async for line in self.proc.stdout:
            self.inbox.put_nowait(json.loads(line))

    async def send(self, message: Message, session: str | None = None) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message).encode() + b"\n")
        await self.proc.stdin.drain()

    async def close(self) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.close()
        await self.proc.wait()
        if self.reader is not None:
            self.reader.cancel()


class HttpPeer(Peer):
    def __init__(self, url: str, headers: dict[str, str] | None = None) -> None:
        super().__init__()
        self.url = url
        self.headers = headers or {}
        self.client = httpx2.AsyncClient(timeout=httpx2.Timeout(None))
        self.connection_id: str | None = None
        self.streams: dict[str | None, asyncio.Task[None]] = {}
        self.statuses: list[int] = []
        self.received = 0
        self.sent_raw: list[bytes] = []
        """Every POST body, as sent."""
        self.received_raw: list[bytes] = []
        """Every agent message as it arrived (the initialize body, each SSE event's data)."""

    async def start(self) -> HttpPeer:
        return self

    async def send(self, message: Message, session: str | None = None) -> None:
        headers = {"Content-Type": "application/json", **self.headers}
        if self.connection_id is not None:
            headers["Acp-Connection-Id"] = self.connection_id
        if session is not None:
            headers["Acp-Session-Id"] = session
        body = json.dumps(message).encode()
        self.sent_raw.append(body)
        resp = await self.client.post(self.url, content=body, headers=headers)
        self.statuses.append(resp.status_code)
        if message.get("method") == "initialize":
            assert resp.status_code == 200, resp.text
            self.connection_id = resp.headers["Acp-Connection-Id"]
            self.inbox.put_nowait(resp.json())
            self.received += 1
            self.received_raw.append(resp.content)
            self._open(None)
        else:
            assert resp.status_code == 202, (resp.status_code, resp.text)

    async def on_session(self, session: str) -> None:
        self._open(session)

    def _open(self, session: str | None) -> None:
        if session not in self.streams:
            self.streams[session] = asyncio.create_task(self._stream(session))

    async def _stream(self, session: str | None) -> None:
        assert self.connection_id is not None
        headers = {"Accept": "text/event-stream", "Acp-Connection-Id": self.connection_id}
        if session is not None:
            headers["Acp-Session-Id"] = session
        async with self.client.stream("GET", self.url, headers={**headers, **self.headers}) as r:
            assert r.status_code == 200
            async for line in r.aiter_lines():
                if line.startswith("data: "):
                    self.received += 1
                    self.received_raw.append(line[6:].encode())
                    self.inbox.put_nowait(json.loads(line[6:]))

    async def close(self) -> None:
        if self.connection_id is not None:
            headers = {"Acp-Connection-Id": self.connection_id, **self.headers}
            resp = await self.client.delete(self.url, headers=headers)
            assert resp.status_code == 202
        for task in self.streams.values():
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(task, 30)
        await self.client.aclose()


def _idle(session: str) -> Callable[[Message], bool]:
    def done(m: Message) -> bool:
        update = (m.get("params") or {}).get("update") or {}
        return (
            m.get("method") == "session/update"
            and update.get("sessionUpdate") == "state_update"
            and update.get("state") == "idle"
        )

    return done


async def v2_scenario(new_peer: Callable[[], Awaitable[Peer]]) -> list[list[Message]]:
    """Prompt + permission, a cancelled turn, then resume with replayFrom on a new connection."""
    peer = await new_peer()
    await peer.call("initialize", {"protocolVersion": 2, "clientCapabilities": {}})
    new = await peer.call("session/new", {"cwd": "/tmp", "mcpServers": []})
    sid = new["result"]["sessionId"]
    await peer.on_session(sid)

    async def allow(m: Message) -> None:
        if m["method"] == "session/request_permission":
            option = m["params"]["options"][0]["optionId"]
            outcome = {"outcome": {"outcome": "selected", "optionId": option}}
            await peer.send({"jsonrpc": "2.0", "id": m["id"], "result": outcome}, sid)

    async def cancel(m: Message) -> None:
        if m["method"] == "session/request_permission":
            await peer.send(
                {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": sid}}, sid
            )
            outcome = {"outcome": {"outcome": "cancelled"}}
            await peer.send({"jsonrpc": "2.0", "id": m["id"], "result": outcome}, sid)

    prompt = {"sessionId": sid, "prompt": [{"type": "text", "text": "hello"}]}
    await peer.call("session/prompt", prompt, sid, allow)
    await peer.until(_idle(sid), allow)
    await peer.call("session/prompt", prompt, sid, cancel)
    await peer.until(_idle(sid), cancel)
    await peer.close()
    first = peer.seen

    peer = await new_peer()
    await peer.call("initialize", {"protocolVersion": 2, "clientCapabilities": {}})
    params = {"sessionId": sid, "cwd": "/tmp", "mcpServers": [], "replayFrom": {"type": "start"}}
    await peer.call("session/resume", params)
    await peer.close()
    return [first, peer.seen]
