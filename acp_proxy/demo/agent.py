"""A deterministic, stdlib-only ACP demo agent: ``python -m acp_proxy.demo.agent``.

It speaks newline-delimited JSON-RPC 2.0 on stdio, protocol v1 or v2 (whatever
``initialize`` negotiates: ``min(requested, 2)``), and plays the same realistic turn for
every ``session/prompt``: the user message echoed with its ``messageId``, thought and
message chunks, a plan, a tool call guarded by ``session/request_permission``, a live-only
``notice``, an unknown ``_vendor_demo`` update, ``usage_update`` and (v2) ``state_update``
running/requires_action/idle. It supports ``session/new``, ``session/prompt``,
``session/cancel``, ``session/load`` (v1), ``session/resume`` (v2: with or without
``replayFrom: {"type": "start"}``), ``session/list``, ``session/close`` and
``session/delete``; other requests get -32601, unknown notifications are ignored.

Every id comes from a counter (``sess_1``, ``msg_1``, ``call_1``, ``plan_1``) and nothing
carries a timestamp, so two runs produce the same bytes. With ``--state FILE`` (or
``ACP_DEMO_STATE``) sessions and counters persist in a JSON file, so a second agent process
(a new connection) can load or resume a session created by the first. ``--delay SECONDS``
paces the updates of a turn; ``session/cancel`` takes effect between any two steps.

The protocol logic is :class:`DemoAgent`, a sans-I/O state machine: lines in,
JSON-RPC messages out through a callback. :func:`main` is the thin stdio driver. The turn
it plays is :mod:`acp_proxy.demo.turn_script`; sessions and the state file are
:mod:`acp_proxy.demo.sessions`.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import queue
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from acp_proxy.demo.history import is_history, replay_updates
from acp_proxy.demo.sessions import SessionStore, StateError
from acp_proxy.demo.turn_script import Cancelled, Json, Turn, turn_script

AGENT_INFO = {"name": "acp-proxy-demo", "title": "acp-proxy demo agent", "version": "1.0.0"}

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
RESOURCE_NOT_FOUND = -32002


class RpcError(Exception):
    """A JSON-RPC error to answer a request with."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _id_key(rpc_id: Json) -> str:
    return json.dumps(rpc_id)


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number out of range: {text}")
    return value


def _no_constants(text: str) -> Any:
    raise ValueError(f"not JSON: {text}")


def _valid_id(value: Json) -> bool:
    return value is None or (isinstance(value, str | int | float) and not isinstance(value, bool))


@dataclass
class DemoAgent:
    """The demo agent's protocol logic: feed it lines, it emits JSON-RPC messages."""

    store: SessionStore
    send: Callable[[dict[str, Any]], None]
    log: Callable[[str], None] = lambda _line: None
    version: int = 1
    open_sessions: set[str] = field(default_factory=set)
    turns: dict[str, Turn] = field(default_factory=dict)
    pending: dict[str, Turn] = field(default_factory=dict)
    next_request_id: int = 1

    # -- input -------------------------------------------------------------------------

    def receive_line(self, line: bytes) -> None:
        """Handle one input line (terminator included or not). Never raises."""
        text = line.strip()
        if not text:
            return
        try:
            message = json.loads(
                text.decode("utf-8"), parse_float=_finite_float, parse_constant=_no_constants
            )
        except (UnicodeDecodeError, ValueError, RecursionError) as exc:
            self.log(f"parse error: {exc}")
            self._error(None, PARSE_ERROR, f"Parse error: {exc}")
            return
        if isinstance(message, list):
            if not message:
                self._error(None, INVALID_REQUEST, "Invalid Request: empty batch")
            for item in message:
                self._dispatch(item)
            return
        self._dispatch(message)

    def _dispatch(self, message: Json) -> None:
        rpc_id = message.get("id") if isinstance(message, dict) else None
        if not _valid_id(rpc_id):
            rpc_id = None
        try:
            if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
                raise RpcError(INVALID_REQUEST, "Invalid Request: not a JSON-RPC 2.0 object")
            if "method" not in message:
                if "id" in message and ("result" in message) != ("error" in message):
                    self._on_response(message)
                    return
                raise RpcError(INVALID_REQUEST, "Invalid Request: no method")
            method = message["method"]
            if not isinstance(method, str):
                raise RpcError(INVALID_REQUEST, "Invalid Request: method must be a string")
            if "id" in message and not _valid_id(message["id"]):
                raise RpcError(INVALID_REQUEST, "Invalid Request: bad id")
            params = message.get("params")
            if params is None:
                params = {}
            if "id" not in message:
                if isinstance(params, dict):
                    self._on_notification(method, params)
                return
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, "Invalid params: params must be an object")
            self._on_request(message["id"], method, params)
        except RpcError as exc:
            self._error(rpc_id, exc.code, exc.message)
        except StateError:
            raise
        except Exception as exc:  # never crash on odd input
            self.log(f"internal error: {exc!r}")
            if isinstance(message, dict) and "method" in message and "id" in message:
                self._error(rpc_id, INTERNAL_ERROR, f"Internal error: {exc}")

    # -- output ------------------------------------------------------------------------

    def _result(self, rpc_id: Json, result: Json) -> None:
        self.send({"jsonrpc": "2.0", "id": rpc_id, "result": result})

    def _error(self, rpc_id: Json, code: int, message: str) -> None:
        self.send({"jsonrpc": "2.0", "id": rpc_id, "error": {"code": code, "message": message}})

    def _update(self, session_id: str, update: dict[str, Any]) -> None:
        self.send(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": session_id, "update": update},
            }
        )

    # -- requests ----------------------------------------------------------------------

    def _on_request(self, rpc_id: Json, method: str, params: dict[str, Any]) -> None:
        sid = params.get("sessionId")
        self.log(f"<- {method} id={_id_key(rpc_id)}" + (f" {sid}" if isinstance(sid, str) else ""))
        handler = {
            "initialize": self._initialize,
            "session/new": self._session_new,
            "session/load": self._session_load,
            "session/resume": self._session_resume,
            "session/list": self._session_list,
            "session/close": self._session_close,
            "session/delete": self._session_delete,
        }.get(method)
        if method == "session/load" and self.version >= 2:
            handler = None
        if method == "session/prompt":
            self._session_prompt(rpc_id, params)
            return
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")
        self._result(rpc_id, handler(params))

    def _initialize(self, params: dict[str, Any]) -> Json:
        requested = params.get("protocolVersion")
        if not isinstance(requested, int) or isinstance(requested, bool):
            raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be an integer")
        self.version = 2 if requested >= 2 else 1
        self.log(f"   protocol version {self.version} (client asked {requested})")
        if self.version == 1:
            return {
                "protocolVersion": 1,
                "agentCapabilities": {
                    "loadSession": True,
                    "promptCapabilities": {"image": False, "audio": False, "embeddedContext": True},
                    "sessionCapabilities": {"list": {}, "resume": {}, "close": {}, "delete": {}},
                },
                "authMethods": [],
                "agentInfo": AGENT_INFO,
            }
        return {
            "protocolVersion": 2,
            "info": AGENT_INFO,
            "capabilities": {"session": {"prompt": {"embeddedContext": {}}, "delete": {}}},
            "authMethods": [],
        }

    def _session(self, params: dict[str, Any], *, must_be_open: bool = False) -> dict[str, Any]:
        sid = params.get("sessionId")
        if not isinstance(sid, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: sessionId must be a string")
        if sid not in self.store.sessions:
            self.store.reload()
        session = self.store.sessions.get(sid)
        if session is None:
            raise RpcError(RESOURCE_NOT_FOUND, f"Resource not found: unknown session {sid}")
        if must_be_open and sid not in self.open_sessions:
            raise RpcError(
                INVALID_PARAMS,
                f"Invalid params: session {sid} is not open on this connection "
                "(session/new, session/load or session/resume first)",
            )
        return session

    @staticmethod
    def _cwd(params: dict[str, Any]) -> str:
        cwd = params.get("cwd")
        if not isinstance(cwd, str) or not cwd:
            raise RpcError(INVALID_PARAMS, "Invalid params: cwd must be a path")
        return cwd

    def _session_new(self, params: dict[str, Any]) -> Json:
        cwd = self._cwd(params)
        sid = self.store.next_id("sess")
        self.store.sessions[sid] = {"cwd": cwd, "title": None, "turns": 0, "history": []}
        self.open_sessions.add(sid)
        return {"sessionId": sid}

    def _replay(self, sid: str, session: dict[str, Any]) -> None:
        for update in replay_updates(session["history"], self.version):
            self._update(sid, update)

    def _session_load(self, params: dict[str, Any]) -> Json:
        self._cwd(params)
        session = self._session(params)
        sid = params["sessionId"]
        self._replay(sid, session)
        self.open_sessions.add(sid)
        return {}

    def _session_resume(self, params: dict[str, Any]) -> Json:
        self._cwd(params)
        session = self._session(params)
        sid = params["sessionId"]
        replay_from = params.get("replayFrom")
        if replay_from is not None:
            if self.version < 2:
                raise RpcError(INVALID_PARAMS, "Invalid params: replayFrom needs protocol v2")
            if not isinstance(replay_from, dict) or replay_from.get("type") != "start":
                raise RpcError(INVALID_PARAMS, "Invalid params: unsupported replayFrom")
            self._replay(sid, session)
        self.open_sessions.add(sid)
        return {}

    def _session_list(self, params: dict[str, Any]) -> Json:
        self.store.reload()
        cwd = params.get("cwd")
        sessions = []
        for sid, session in self.store.sessions.items():
            if isinstance(cwd, str) and session.get("cwd") != cwd:
                continue
            info: dict[str, Any] = {"sessionId": sid, "cwd": session.get("cwd", "/")}
            if session.get("title"):
                info["title"] = session["title"]
            sessions.append(info)
        return {"sessions": sessions}

    def _stop_turn(self, sid: str) -> None:
        """End a session's turn at once (close/delete): cancel it, drop pending asks."""
        turn = self.turns.get(sid)
        if turn is None:
            return
        turn.cancelled = True
        if turn.waiting_for is not None:
            self.pending.pop(turn.waiting_for, None)
            turn.waiting_for = None
        while sid in self.turns:
            self._advance(turn)

    def _session_close(self, params: dict[str, Any]) -> Json:
        self._session(params)
        sid = params["sessionId"]
        self._stop_turn(sid)
        self.open_sessions.discard(sid)
        return {}

    def _session_delete(self, params: dict[str, Any]) -> Json:
        self._session(params)
        sid = params["sessionId"]
        self._stop_turn(sid)
        self.open_sessions.discard(sid)
        del self.store.sessions[sid]
        self.store.dirty = True
        return {}

    def _session_prompt(self, rpc_id: Json, params: dict[str, Any]) -> None:
        session = self._session(params, must_be_open=True)
        sid = params["sessionId"]
        prompt = params.get("prompt")
        if not isinstance(prompt, list) or not all(isinstance(b, dict) for b in prompt):
            raise RpcError(INVALID_PARAMS, "Invalid params: prompt must be an array of blocks")
        if sid in self.turns:
            raise RpcError(INVALID_PARAMS, f"Invalid params: session {sid} is busy with a turn")
        session["turns"] = int(session.get("turns", 0)) + 1
        self.store.dirty = True
        turn = Turn(sid, rpc_id)
        turn.script = turn_script(turn, session, prompt, version=self.version, store=self.store)
        self.turns[sid] = turn

    # -- notifications and responses ---------------------------------------------------

    def _on_notification(self, method: str, params: dict[str, Any]) -> None:
        if method == "session/cancel":
            sid = params.get("sessionId")
            turn = self.turns.get(sid) if isinstance(sid, str) else None
            self.log(f"<- session/cancel {sid}" + ("" if turn else " (no active turn)"))
            if turn is not None:
                turn.cancelled = True
            return
        self.log(f"<- {method} (notification ignored)")

    def _on_response(self, message: dict[str, Any]) -> None:
        key = _id_key(message.get("id"))
        turn = self.pending.pop(key, None)
        if turn is None:
            self.log(f"<- response id={key} to no pending request (ignored)")
            return
        turn.waiting_for = None
        turn.reply = message

    # -- driving turns -----------------------------------------------------------------

    def runnable(self) -> bool:
        """Whether some turn can make progress without input."""
        return any(t.waiting_for is None for t in self.turns.values())

    def step(self) -> None:
        """Advance every runnable turn by one step (one burst of messages)."""
        for turn in [t for t in self.turns.values() if t.waiting_for is None]:
            self._advance(turn)

    def _advance(self, turn: Turn) -> None:
        assert turn.script is not None
        try:
            if turn.cancelled and turn.started and not turn.cancel_delivered:
                turn.cancel_delivered = True
                actions = turn.script.throw(Cancelled())
            else:
                reply, turn.reply = turn.reply, None
                actions = turn.script.send(reply) if turn.started else next(turn.script)
                turn.started = True
        except StopIteration:
            self.turns.pop(turn.session_id, None)
            return
        except Exception as exc:  # a bug in a script must not take the agent down
            self.log(f"internal error in turn: {exc!r}")
            self.turns.pop(turn.session_id, None)
            self._error(turn.request_id, INTERNAL_ERROR, f"Internal error: {exc}")
            return
        session = self.store.sessions.get(turn.session_id)
        for action in actions:
            kind = action[0]
            if kind == "update":
                self._update(turn.session_id, action[1])
                if session is not None and is_history(action[1]):
                    session["history"].append(action[1])
                    self.store.dirty = True
            elif kind == "respond":
                self._result(turn.request_id, action[1])
            elif kind == "error":
                self._error(turn.request_id, action[1], action[2])
            elif kind == "done":  # the turn is over: the session takes prompts again
                self.turns.pop(turn.session_id, None)
                turn.script.close()
            elif kind == "ask":
                rid = self.next_request_id
                self.next_request_id += 1
                turn.waiting_for = _id_key(rid)
                self.pending[turn.waiting_for] = turn
                self.send(
                    {
                        "jsonrpc": "2.0",
                        "id": rid,
                        "method": "session/request_permission",
                        "params": action[1],
                    }
                )


# -- the stdio driver ----------------------------------------------------------------------


def _reader(stream: Any, inbox: queue.Queue[bytes | None]) -> None:
    try:
        for line in iter(stream.readline, b""):
            inbox.put(line)
    except (OSError, ValueError):
        pass
    inbox.put(None)


def serve(
    agent: DemoAgent, inbox: queue.Queue[bytes | None], delay: float = 0.0, flush: Any = None
) -> None:
    """Run the agent until end of input: turn steps (paced by ``delay``) and input lines.

    With no delay, runnable turns run until they wait for the client before the next input
    line is read, so the output does not depend on input timing. At end of input the
    runnable turns are played out without delay (up to a permission request that can no
    longer be answered), then it returns.
    """
    next_at = 0.0
    eof = False
    while True:
        if agent.runnable() and (eof or delay <= 0 or time.monotonic() >= next_at):
            agent.step()
            agent.store.save()
            next_at = time.monotonic() + delay
            continue
        if eof:
            return
        timeout = max(0.0, next_at - time.monotonic()) if agent.runnable() else None
        try:
            item = inbox.get(timeout=timeout)
        except queue.Empty:
            continue
        if item is None:
            eof = True
            continue
        agent.receive_line(item)
        agent.store.save()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m acp_proxy.demo.agent",
        description="A deterministic ACP demo agent (protocol v1 and v2) on stdio.",
    )
    parser.add_argument(
        "--state",
        default=os.environ.get("ACP_DEMO_STATE") or None,
        metavar="FILE",
        help="JSON file that keeps sessions across agent processes (env ACP_DEMO_STATE)",
    )
    parser.add_argument(
        "--delay", type=float, default=0.0, metavar="SECONDS", help="pause between turn steps"
    )
    args = parser.parse_args(argv)
    if args.delay < 0:
        parser.error("--delay must not be negative")

    def log(line: str) -> None:
        sys.stderr.write(f"demo-agent: {line}\n")
        sys.stderr.flush()

    out = sys.stdout.buffer

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode() + b"\n")
        out.flush()

    try:
        store = SessionStore(args.state)
        agent = DemoAgent(store, send, log)
        inbox: queue.Queue[bytes | None] = queue.Queue()
        threading.Thread(target=_reader, args=(sys.stdin.buffer, inbox), daemon=True).start()
        log("ready" + (f" (state {args.state})" if args.state else ""))
        serve(agent, inbox, args.delay)
    except StateError as exc:
        log(str(exc))
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
