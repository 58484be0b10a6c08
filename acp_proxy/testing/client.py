"""A small asyncio ACP client for tests, modelled on the TypeScript SDK's active-session helper.

::

    async with AcpTestClient.spawn(["acp-proxy", "replay", "session.db"]) as client:
        await client.initialize(protocol_version=1)
        session = await client.new_session(cwd="/work")
        stop = await session.prompt("hello")      # v1: the stop reason; v2: the messageId
        text = await session.read_text()          # agent text until the turn/idle stop
        update = await session.next_update()      # a session/update dict, or a Stop

It speaks JSON-RPC over the child's stdio itself (no SDK needed) and keeps every frame it
sent and received, byte for byte, in :attr:`AcpTestClient.log`, so tests can assert on
exact bytes and ordering. Agent→client requests are answered by :attr:`handlers`
(``session/request_permission`` picks the first ``allow`` option by default; others get
``-32601``). Every wait has a timeout and raises :class:`TimeoutError` instead of hanging.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson

DEFAULT_TIMEOUT = 30.0
Handler = Callable[[Any], Awaitable[Any]]


class AcpError(Exception):
    """The agent answered a request with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(f"{code}: {message}")
        self.code = code
        self.message = message
        self.data = data


@dataclass(frozen=True, slots=True)
class Stop:
    """The end of foreground work: v2 idle ``state_update``, or a v1 prompt's response."""

    stop_reason: str | None
    update: dict[str, Any] | None = None


@dataclass(slots=True)
class LogEntry:
    """One frame on the wire: ``sent`` by the client or ``received`` from the agent."""

    direction: str  # "sent" | "received"
    raw: bytes
    message: Any  # parsed JSON, None if not JSON


async def _allow_first(params: Any) -> Any:
    options = params.get("options", []) if isinstance(params, dict) else []
    for option in options:
        if isinstance(option, dict) and str(option.get("kind", "")).startswith("allow"):
            return {"outcome": {"outcome": "selected", "optionId": option.get("optionId")}}
    return {"outcome": {"outcome": "cancelled"}}


class ActiveSession:
    """Routes one session's updates into a queue; see the module docstring."""

    def __init__(self, client: AcpTestClient, session_id: str) -> None:
        self.client = client
        self.session_id = session_id
        self.queue: asyncio.Queue[dict[str, Any] | Stop] = asyncio.Queue()
        self.updates: list[dict[str, Any]] = []

    async def prompt(self, content: str | dict[str, Any] | list[Any], **params: Any) -> Any:
        """Send ``session/prompt``; v2: the inserted message's id, v1: the stop reason."""
        if isinstance(content, str):
            blocks: list[Any] = [{"type": "text", "text": content}]
        elif isinstance(content, dict):
            blocks = [content]
        else:
            blocks = list(content)
        result = await self.client.request(
            "session/prompt", {"sessionId": self.session_id, "prompt": blocks, **params}
        )
        if isinstance(result, dict) and "messageId" in result:
            return result["messageId"]
        stop = result.get("stopReason") if isinstance(result, dict) else None
        self.queue.put_nowait(Stop(stop, None))
        return stop

    async def cancel(self) -> None:
        await self.client.notify("session/cancel", {"sessionId": self.session_id})

    async def next_update(self, timeout: float = DEFAULT_TIMEOUT) -> dict[str, Any] | Stop:
        """The next update (the ``params.update`` object) or a :class:`Stop`."""
        try:
            return await asyncio.wait_for(self.queue.get(), timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no update for session {self.session_id} within {timeout}s"
            ) from None

    async def read_text(self, timeout: float = DEFAULT_TIMEOUT) -> str:
        """Agent text until the next stop: chunks append, whole ``agent_message`` replaces."""
        order: list[str] = []
        texts: dict[str, list[str]] = {}
        anonymous = 0
        while True:
            item = await self.next_update(timeout)
            if isinstance(item, Stop):
                return "".join("".join(texts[k]) for k in order)
            variant = item.get("sessionUpdate")
            if variant not in ("agent_message_chunk", "agent_message"):
                continue
            mid = item.get("messageId")
            if not isinstance(mid, str):
                anonymous += 0 if order and order[-1].startswith("~") else 1
                mid = f"~{anonymous}"
            if mid not in texts:
                order.append(mid)
                texts[mid] = []
            if variant == "agent_message":
                if "content" in item:
                    texts[mid] = [_text_of(b) for b in (item.get("content") or [])]
            else:
                texts[mid].append(_text_of(item.get("content")))

    def _deliver(self, update: dict[str, Any]) -> None:
        self.updates.append(update)
        if update.get("sessionUpdate") == "state_update" and update.get("state") == "idle":
            reason = update.get("stopReason")
            self.queue.put_nowait(Stop(reason if isinstance(reason, str) else None, update))
            return
        self.queue.put_nowait(update)


def _text_of(block: Any) -> str:
    if isinstance(block, dict) and block.get("type") == "text":
        text = block.get("text")
        return text if isinstance(text, str) else ""
    return ""


@dataclass(slots=True)
class _State:
    next_id: int = 0
    pending: dict[str, asyncio.Future[Any]] = field(default_factory=dict)


class AcpTestClient:
    """A JSON-RPC client over a child process's stdio; see the module docstring."""

    def __init__(
        self,
        proc: asyncio.subprocess.Process,
        handlers: dict[str, Handler] | None = None,
    ) -> None:
        self.proc = proc
        self.log: list[LogEntry] = []
        self.handlers: dict[str, Handler] = {"session/request_permission": _allow_first}
        self.handlers.update(handlers or {})
        self.sessions: dict[str, ActiveSession] = {}
        self.stderr = bytearray()
        self.protocol_version: int | None = None
        self._state = _State()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._reader = asyncio.create_task(self._read_loop())
        self._err_reader = asyncio.create_task(self._read_stderr())
        self._closed = asyncio.Event()

    @classmethod
    @contextlib.asynccontextmanager
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: dict[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        handlers: dict[str, Handler] | None = None,
    ) -> AsyncIterator[AcpTestClient]:
        """Start ``argv`` and yield a client bound to its stdio; closes and reaps it after."""
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env={**os.environ, **(env or {})},
            cwd=cwd,
            limit=64 * 1024 * 1024,
        )
        client = cls(proc, handlers)
        try:
            yield client
        finally:
            await client.close()

    # -- sending ---------------------------------------------------------------------------

    async def send_raw(self, raw: bytes) -> None:
        """Write one frame exactly as given (add the newline yourself)."""
        assert self.proc.stdin is not None
        try:
            message = orjson.loads(raw)
        except orjson.JSONDecodeError:
            message = None
        self.log.append(LogEntry("sent", raw, message))
        self.proc.stdin.write(raw)
        await self.proc.stdin.drain()

    async def request(
        self, method: str, params: Any = None, timeout: float = DEFAULT_TIMEOUT
    ) -> Any:
        """Send a request and return its result; :class:`AcpError` for an error response."""
        rid = self._state.next_id
        self._state.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._state.pending[str(rid)] = future
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            body["params"] = params
        await self.send_raw(orjson.dumps(body) + b"\n")
        try:
            reply = await asyncio.wait_for(future, timeout)
        except TimeoutError:
            raise TimeoutError(f"no response to {method} (id {rid}) within {timeout}s") from None
        finally:
            self._state.pending.pop(str(rid), None)
        if "error" in reply:
            err = reply["error"] if isinstance(reply["error"], dict) else {}
            raise AcpError(int(err.get("code", 0)), str(err.get("message", "")), err.get("data"))
        return reply.get("result")

    async def notify(self, method: str, params: Any = None) -> None:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            body["params"] = params
        await self.send_raw(orjson.dumps(body) + b"\n")

    # -- conveniences ----------------------------------------------------------------------

    async def initialize(self, protocol_version: int = 1, **params: Any) -> Any:
        if protocol_version >= 2:
            params.setdefault("info", {"name": "acp-proxy-testing", "version": "0"})
            params.setdefault("capabilities", {})
        else:
            params.setdefault("clientCapabilities", {"fs": {}})
        result = await self.request("initialize", {"protocolVersion": protocol_version, **params})
        version = result.get("protocolVersion") if isinstance(result, dict) else None
        self.protocol_version = version if isinstance(version, int) else protocol_version
        return result

    def session(self, session_id: str) -> ActiveSession:
        """The active-session helper for ``session_id`` (created on first use)."""
        if session_id not in self.sessions:
            self.sessions[session_id] = ActiveSession(self, session_id)
        return self.sessions[session_id]

    async def new_session(self, cwd: str | None = None, **params: Any) -> ActiveSession:
        params.setdefault("mcpServers", [])
        result = await self.request("session/new", {"cwd": cwd or os.getcwd(), **params})
        return self.session(result["sessionId"])

    async def load_session(self, session_id: str, cwd: str | None = None, **params: Any) -> Any:
        """v1 ``session/load``; history updates land in the session's queue first."""
        self.session(session_id)
        params.setdefault("mcpServers", [])
        return await self.request(
            "session/load", {"sessionId": session_id, "cwd": cwd or os.getcwd(), **params}
        )

    async def resume_session(
        self,
        session_id: str,
        cwd: str | None = None,
        *,
        replay_from_start: bool = False,
        **params: Any,
    ) -> Any:
        """``session/resume``; with ``replay_from_start`` asks for ``replayFrom: start``."""
        self.session(session_id)
        if replay_from_start:
            params["replayFrom"] = {"type": "start"}
        return await self.request(
            "session/resume", {"sessionId": session_id, "cwd": cwd or os.getcwd(), **params}
        )

    def received(self) -> list[LogEntry]:
        return [e for e in self.log if e.direction == "received"]

    # -- receiving -------------------------------------------------------------------------

    async def _read_loop(self) -> None:
        assert self.proc.stdout is not None
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                self._dispatch(line)
        except (ValueError, OSError):  # pragma: no cover - oversized line or closed pipe
            pass
        finally:
            for future in self._state.pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("the agent closed its stdout"))

    async def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = await self.proc.stderr.read(65536)
            if not chunk:
                return
            self.stderr += chunk

    def _dispatch(self, line: bytes) -> None:
        try:
            message = orjson.loads(line)
        except orjson.JSONDecodeError:
            message = None
        self.log.append(LogEntry("received", line, message))
        if not isinstance(message, dict):
            return
        method = message.get("method")
        if method is None:
            key = orjson.dumps(message.get("id")).decode()
            future = self._state.pending.get(key)
            if future is not None and not future.done():
                future.set_result(message)
            return
        params = message.get("params")
        if "id" not in message:
            if method == "session/update" and isinstance(params, dict):
                sid = params.get("sessionId")
                update = params.get("update")
                if isinstance(sid, str) and isinstance(update, dict):
                    self.session(sid)._deliver(update)
            return
        task = asyncio.create_task(self._answer(message["id"], method, params))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, rid: Any, method: str, params: Any) -> None:
        handler = self.handlers.get(method)
        body: dict[str, Any] = {"jsonrpc": "2.0", "id": rid}
        if handler is None:
            body["error"] = {"code": -32601, "message": f"method not found: {method}"}
        else:
            try:
                body["result"] = await handler(params)
            except AcpError as exc:
                body["error"] = {"code": exc.code, "message": exc.message}
        with contextlib.suppress(ConnectionError, OSError):
            await self.send_raw(orjson.dumps(body) + b"\n")

    async def close(self, timeout: float = 10.0) -> int | None:
        """Close the agent's stdin and wait for it (then terminate it); returns its exit code."""
        if self._closed.is_set():
            return self.proc.returncode
        self._closed.set()
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError, RuntimeError):
                self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), timeout)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    self.proc.kill()
                await self.proc.wait()
        for task in (self._reader, self._err_reader):
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, timeout)
        for task in list(self._tasks):
            task.cancel()
        return self.proc.returncode
