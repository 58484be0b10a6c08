"""A scripted stdlib ACP client that drives an agent command and prints a transcript.

``python -m acp_proxy.demo.client [--protocol 1|2] [--reconnect] -- AGENT [ARGS]...``

Connection 1: ``initialize``, ``session/new``, a prompt whose permission request is
allowed, a prompt that is cancelled while its permission request is pending (the request is
then answered ``cancelled``, as the spec requires), ``session/list``. With ``--reconnect``
a second agent process is started (a new connection) that takes the session back — v1
``session/load``, v2 ``session/resume`` with ``replayFrom: {"type": "start"}`` — sends one
more prompt whose permission request is rejected, and closes the session. The demo agent
needs a shared ``--state`` file for that; the client points ``ACP_DEMO_STATE`` at a
temporary one unless it is already set.

Only the standard library is used (asyncio subprocesses), so it can drive any agent.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shlex
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from acp_proxy.transport.process.agent import ProcessTree

CLIENT_INFO = {
    "name": "acp-proxy-demo-client",
    "title": "acp-proxy demo client",
    "version": "1.0.0",
}
LINE_LIMIT = 1 << 30
Out = Callable[[str], None]


class ClientError(Exception):
    """The agent misbehaved or went away; the message is one line for the user."""


def _short(text: str, limit: int = 90) -> str:
    text = text.replace("\n", "\\n")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _block_text(block: Any) -> str:
    if isinstance(block, dict):
        if block.get("type") == "text":
            return str(block.get("text", ""))
        if block.get("type") == "content":
            return _block_text(block.get("content"))
        return f"<{block.get('type', '?')}>"
    return repr(block)


def describe_update(update: Any) -> str:
    """One compact human-readable line for a ``session/update`` payload."""
    if not isinstance(update, dict):
        return f"(malformed update) {_short(json.dumps(update))}"
    kind = str(update.get("sessionUpdate"))
    mid = update.get("messageId")
    if kind.endswith("_chunk") and kind.split("_")[0] in ("user", "agent"):
        who = {"user_message_chunk": "user", "agent_message_chunk": "agent"}.get(kind, "thought")
        return f"{who:<7} [{mid}] {_short(_block_text(update.get('content')))}"
    if kind in ("user_message", "agent_message", "agent_thought"):
        who = {"user_message": "user", "agent_message": "agent"}.get(kind, "thought")
        content = update.get("content")
        if not content:
            return f"{who:<7} [{mid}] (reset to empty)"
        text = "".join(_block_text(b) for b in content)
        return f"{who:<7} [{mid}] {_short(text)}"
    if kind == "state_update":
        state = str(update.get("state"))
        reason = update.get("stopReason")
        return f"state   {state}" + (f" ({reason})" if reason else "")
    if kind in ("tool_call", "tool_call_update"):
        parts = [f"tool    [{update.get('toolCallId')}]"]
        if update.get("title"):
            parts.append(str(update["title"]))
        if update.get("status"):
            parts.append(f"-> {update['status']}")
        for item in update.get("content") or []:
            parts.append(f'"{_short(_block_text(item), 40)}"')
        return " ".join(parts)
    if kind == "tool_call_content_chunk":
        text = _short(_block_text(update.get("content")), 60)
        return f'tool    [{update.get("toolCallId")}] + "{text}"'
    if kind in ("plan", "plan_update"):
        plan = update.get("plan") if kind == "plan_update" else update
        plan = plan if isinstance(plan, dict) else {}
        marks = {"completed": "[x]", "in_progress": "[~]"}
        entries = " ".join(
            f"{marks.get(str(e.get('status')), '[ ]')} {e.get('content')}"
            for e in plan.get("entries") or []
            if isinstance(e, dict)
        )
        return f"plan    [{plan.get('planId', '-')}] {entries}"
    if kind == "notice":
        return f"notice  ({update.get('severity')}) {update.get('title')}"
    if kind == "usage_update":
        cost = update.get("cost") or {}
        money = f", {cost.get('amount')} {cost.get('currency')}" if cost else ""
        return f"usage   {update.get('used')}/{update.get('size')} tokens{money}"
    if kind == "session_info_update":
        return f"title   {update.get('title')!r}"
    rest = {k: v for k, v in update.items() if k != "sessionUpdate"}
    return f"{kind} (unknown to this client, kept as is) {_short(json.dumps(rest), 70)}"


class AgentConnection:
    """One agent process spoken to over newline-delimited JSON-RPC on its stdio."""

    def __init__(self, out: Out, timeout: float) -> None:
        self.out = out
        self.timeout = timeout
        self.proc: asyncio.subprocess.Process | None = None
        self.next_id = 0
        self.waiting: dict[str, asyncio.Future[Any]] = {}
        self.idle: dict[str, asyncio.Queue[Any]] = {}
        self.permission: Callable[[dict[str, Any]], Any] | None = None
        self.stderr_tail: list[str] = []
        self.updates_seen = 0
        self._tasks: list[asyncio.Task[None]] = []
        self.tree: ProcessTree | None = None

    async def start(self, command: Sequence[str], env: dict[str, str] | None) -> None:
        # Its own process group with a watchdog: nothing it starts outlives this client.
        self.tree = ProcessTree()
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                limit=LINE_LIMIT,
                **self.tree.popen_options(),
            )
            self.tree.joined(self.proc.pid)
        except OSError as exc:
            await self.tree.end_async(kill_now=True)
            raise ClientError(f"cannot start {command[0]}: {exc.strerror or exc}") from None
        self._tasks = [
            asyncio.create_task(self._read_stdout()),
            asyncio.create_task(self._read_stderr()),
        ]

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        async for line in self.proc.stderr:
            self.stderr_tail = [*self.stderr_tail[-19:], line.decode("utf-8", "replace").rstrip()]

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        try:
            while True:
                line = await self.proc.stdout.readline()
                if not line:
                    break
                await self._on_line(line)
        finally:
            for future in self.waiting.values():
                if not future.done():
                    future.set_exception(ClientError("the agent closed its output"))

    async def _on_line(self, line: bytes) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            self.out(f"  ?? not JSON from the agent: {_short(line.decode('utf-8', 'replace'))}")
            return
        if not isinstance(message, dict):
            self.out(f"  ?? unexpected message: {_short(json.dumps(message))}")
            return
        if "method" not in message:
            future = self.waiting.pop(json.dumps(message.get("id")), None)
            if future is not None and not future.done():
                future.set_result(message)
            return
        method, params = message["method"], message.get("params") or {}
        if method == "session/update" and isinstance(params, dict):
            self.updates_seen += 1
            update = params.get("update")
            self.out(f"  {describe_update(update)}")
            if (
                isinstance(update, dict)
                and update.get("sessionUpdate") == "state_update"
                and update.get("state") == "idle"
            ):
                sid = str(params.get("sessionId"))
                self._idle_queue(sid).put_nowait(update.get("stopReason"))
            return
        if "id" not in message:
            self.out(f"  <- {method} (notification)")
            return
        if method == "session/request_permission" and self.permission is not None:
            result = await self.permission(params)
            await self._write({"jsonrpc": "2.0", "id": message["id"], "result": result})
            return
        self.out(f"  <- {method} (request not supported by this client)")
        error = {"code": -32601, "message": f"Method not found: {method}"}
        await self._write({"jsonrpc": "2.0", "id": message["id"], "error": error})

    def _idle_queue(self, session_id: str) -> asyncio.Queue[Any]:
        return self.idle.setdefault(session_id, asyncio.Queue())

    async def _write(self, message: dict[str, Any]) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        data = json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"
        try:
            self.proc.stdin.write(data)
            await self.proc.stdin.drain()
        except (BrokenPipeError, ConnectionResetError):
            raise ClientError("the agent closed its input") from None

    async def notify(self, method: str, params: dict[str, Any]) -> None:
        await self._write({"jsonrpc": "2.0", "method": method, "params": params})

    async def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send a request and wait for its response; a JSON-RPC error becomes ClientError."""
        rpc_id = self.next_id
        self.next_id += 1
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self.waiting[json.dumps(rpc_id)] = future
        await self._write({"jsonrpc": "2.0", "id": rpc_id, "method": method, "params": params})
        try:
            response = await asyncio.wait_for(future, self.timeout)
        except TimeoutError:
            raise ClientError(f"no answer to {method} within {self.timeout:g}s") from None
        if "error" in response:
            error = response["error"] if isinstance(response["error"], dict) else {}
            raise ClientError(f"{method} failed: {error.get('code')} {error.get('message')}")
        return response.get("result")

    async def wait_idle(self, session_id: str) -> Any:
        try:
            return await asyncio.wait_for(self._idle_queue(session_id).get(), self.timeout)
        except TimeoutError:
            raise ClientError(f"the agent did not become idle within {self.timeout:g}s") from None

    async def abort(self) -> None:
        """Stop the agent now (after a failure): SIGTERM, then SIGKILL."""
        if self.proc is None or self.proc.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            self.proc.terminate()
        try:
            await asyncio.wait_for(self.proc.wait(), 5)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            await self.proc.wait()
        if self.tree is not None:
            await self.tree.end_async()

    async def close(self) -> int | None:
        """Close the agent's stdin and wait for it to exit (terminate it if it will not)."""
        if self.proc is None:
            return None
        if self.proc.stdin is not None:
            with contextlib.suppress(OSError):
                self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), self.timeout)
        except TimeoutError:
            self.proc.terminate()
            try:
                await asyncio.wait_for(self.proc.wait(), 5)
            except TimeoutError:
                self.proc.kill()
                await self.proc.wait()
        if self.tree is not None:
            await self.tree.end_async()
        for task in self._tasks:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(task, 5)
        return self.proc.returncode


class Scenario:
    """The scripted conversation, for protocol v1 or v2."""

    def __init__(
        self, command: Sequence[str], protocol: int, out: Out, timeout: float, cwd: str
    ) -> None:
        self.command = list(command)
        self.protocol = protocol
        self.out = out
        self.timeout = timeout
        self.cwd = cwd
        self.env = dict(os.environ)
        self.connections = 0
        self.live: list[AgentConnection] = []

    async def _connect(self) -> AgentConnection:
        self.connections += 1
        shown = ["python" if arg == sys.executable else arg for arg in self.command]
        self.out(f"== agent process {self.connections}: {shlex.join(shown)}")
        conn = AgentConnection(self.out, self.timeout)
        self.live.append(conn)
        await conn.start(self.command, self.env)
        params: dict[str, Any] = {"protocolVersion": self.protocol}
        if self.protocol >= 2:
            params |= {"info": CLIENT_INFO, "capabilities": {}}
        else:
            params |= {
                "clientInfo": CLIENT_INFO,
                "clientCapabilities": {"fs": {"readTextFile": False, "writeTextFile": False}},
            }
        self.out(f"-> initialize (protocol {self.protocol})")
        result = await conn.request("initialize", params)
        info = result.get("info") or result.get("agentInfo") or {}
        self.out(
            f"<- initialized: {info.get('title') or info.get('name', '?')} "
            f"{info.get('version', '')}, protocol {result.get('protocolVersion')}"
        )
        return conn

    async def _finish(self, conn: AgentConnection) -> None:
        code = await conn.close()
        self.out(f"   agent exited with code {code}")
        if code != 0:
            tail = "; ".join(conn.stderr_tail[-3:])
            raise ClientError(f"the agent exited with code {code}" + (f": {tail}" if tail else ""))

    async def _prompt(self, conn: AgentConnection, sid: str, text: str, answer: str) -> Any:
        """One turn; ``answer`` is what to do with the permission request:
        allow | reject | cancel (send session/cancel, then answer ``cancelled``)."""

        async def on_permission(params: dict[str, Any]) -> Any:
            title = params.get("title") or (params.get("toolCall") or {}).get("title")
            self.out(f"  ?? permission requested: {title}")
            if answer == "cancel":
                self.out("-> session/cancel (the user changed their mind)")
                await conn.notify("session/cancel", {"sessionId": sid})
                self.out("-> permission answer: cancelled")
                return {"outcome": {"outcome": "cancelled"}}
            option = "allow" if answer == "allow" else "reject"
            for opt in params.get("options") or []:
                if isinstance(opt, dict) and str(opt.get("kind", "")).startswith(option):
                    self.out(f"-> permission answer: {opt.get('name')} ({opt.get('optionId')})")
                    return {"outcome": {"outcome": "selected", "optionId": opt.get("optionId")}}
            return {"outcome": {"outcome": "cancelled"}}

        conn.permission = on_permission
        self.out(f'-> session/prompt "{text}"')
        prompt = [{"type": "text", "text": text}]
        result = await conn.request("session/prompt", {"sessionId": sid, "prompt": prompt})
        if self.protocol >= 2:
            self.out(f"<- prompt accepted: messageId {result.get('messageId')}")
            reason = await conn.wait_idle(sid)
        else:
            reason = result.get("stopReason")
            self.out(f"<- prompt finished: stopReason {reason}")
        return reason

    async def run(self, reconnect: bool) -> None:
        try:
            await self._run(reconnect)
        finally:  # never leave an agent process behind, whatever happened
            for conn in self.live:
                await conn.abort()

    async def _run(self, reconnect: bool) -> None:
        conn = await self._connect()
        self.out(f"-> session/new (cwd {self.cwd})")
        result = await conn.request("session/new", {"cwd": self.cwd, "mcpServers": []})
        sid = str(result.get("sessionId"))
        self.out(f"<- session {sid}")
        await self._prompt(conn, sid, "What is this project about?", "allow")
        reason = await self._prompt(conn, sid, "Please read it again.", "cancel")
        if reason != "cancelled":
            raise ClientError(f"the cancelled turn ended with {reason!r}, not 'cancelled'")
        self.out("-> session/list")
        listed = await conn.request("session/list", {})
        ids = [s.get("sessionId") for s in listed.get("sessions") or [] if isinstance(s, dict)]
        self.out(f"<- sessions: {', '.join(map(str, ids)) or '(none)'}")
        await self._finish(conn)
        if not reconnect:
            return
        conn = await self._connect()
        base = {"sessionId": sid, "cwd": self.cwd, "mcpServers": []}
        conn.updates_seen = 0
        if self.protocol >= 2:
            self.out(f'-> session/resume {sid} replayFrom {{"type": "start"}}')
            await conn.request("session/resume", {**base, "replayFrom": {"type": "start"}})
        else:
            self.out(f"-> session/load {sid}")
            await conn.request("session/load", base)
        self.out(f"<- session {sid} is back ({conn.updates_seen} history updates replayed)")
        await self._prompt(conn, sid, "Thanks! One more question.", "reject")
        self.out(f"-> session/close {sid}")
        await conn.request("session/close", {"sessionId": sid})
        await self._finish(conn)


def run_scenario(
    command: Sequence[str],
    *,
    protocol: int = 2,
    reconnect: bool = False,
    out: Out = print,
    timeout: float = 60.0,
    cwd: str | None = None,
) -> None:
    """Run the scripted conversation against ``command``; raises :class:`ClientError`.

    ``cwd`` is the project directory announced in ``session/new`` (default: the current
    directory); the agent process itself runs in the current directory either way.
    """
    scenario = Scenario(command, protocol, out, timeout, cwd or os.getcwd())
    with tempfile.TemporaryDirectory(prefix="acp-demo-") as tmp:
        if reconnect and not scenario.env.get("ACP_DEMO_STATE"):
            scenario.env["ACP_DEMO_STATE"] = str(Path(tmp) / "state.json")
        asyncio.run(scenario.run(reconnect))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_proxy.demo.client",
        description="Drive an ACP agent through a scripted conversation and print it.",
    )
    parser.add_argument("--protocol", type=int, choices=(1, 2), default=2)
    parser.add_argument(
        "--reconnect",
        action="store_true",
        help="then start the agent again and take the session back (load / resume + replay)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait per step")
    parser.add_argument(
        "--cwd", help="project directory announced in session/new (default: the current one)"
    )
    parser.add_argument("command", nargs="+", metavar="AGENT", help="agent command (after --)")
    args = parser.parse_args(argv)

    def out(line: str) -> None:
        print(line, flush=True)

    try:
        run_scenario(
            args.command,
            protocol=args.protocol,
            reconnect=args.reconnect,
            out=out,
            timeout=args.timeout,
            cwd=args.cwd,
        )
    except ClientError as exc:
        print(f"demo-client: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
