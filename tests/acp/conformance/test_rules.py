"""Every rule of the table, in process: a recording that breaks it and one that keeps it.

Each case is a transcript of frames (client ``C``, agent ``A``) fed to the sans-I/O
engine. Breaking transcripts must produce the rule (pointing at the right frames where the
case says so); keeping transcripts — near misses of the same situation — must produce no
finding of that rule and no error at all.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from acp_proxy.acp.conformance import MAX_LINE_BYTES, ConnectionChecker
from acp_proxy.acp.rules import RULE_BY_ID, RULES
from acp_proxy.wire.frame import Frame
from tests.acp.conformance.helpers import (
    SID,
    TEXT,
    A,
    C,
    Line,
    er,
    nt,
    ok,
    rq,
    rules_of,
    run_engine,
    up,
    v1_prelude,
    v1_turn,
    v2_prelude,
    v2_turn,
)


@dataclass
class Run:
    frames: list[Line]
    transport: str | None = "stdio"
    frames_dropped: int = 0
    binary_at: tuple[int, ...] = ()
    seqs: tuple[int, ...] | None = None  # the frames the finding must point at
    side: str | None = None  # the side that must be named as breaking the rule
    allow: tuple[str, ...] = ()  # other error rules a keeping run may trigger


@dataclass
class Case:
    breaks: list[Run]
    keeps: list[Run] = field(default_factory=list)


def R(*parts: list[Line], **kw: Any) -> Run:
    frames: list[Line] = []
    for p in parts:
        frames += p
    return Run(frames, **kw)


P1 = v1_prelude()
P2 = v2_prelude()
PERM = {"toolCall": {"toolCallId": "t9"}, "options": []}
CANCELLED = {"outcome": {"outcome": "cancelled"}}

CASES: dict[str, Case] = {
    "framing.utf8": Case(
        [R(P1, [A(b"\xff\xfe not utf-8\n")], seqs=(5,))],
        [
            R(
                P1,
                [
                    C(
                        rq(
                            2,
                            "session/prompt",
                            sessionId=SID,
                            prompt=[{"type": "text", "text": "h\u00e9llo \u2713"}],
                        )
                    ),
                    A(ok(2, stopReason="end_turn")),
                ],
            )
        ],
    ),
    "framing.json": Case(
        [R(P1, [C(b'{"jsonrpc": "2.0", "method": \n')], seqs=(5,))],
        [R(P1, [C(b' { "jsonrpc" : "2.0" , "method" : "_ping" } \n')])],
    ),
    "framing.blank-line": Case([R(P1, [C(b"\n")], seqs=(5,))], [R(P1)]),
    "framing.unterminated": Case(
        [R(P1, [C(b'{"jsonrpc":"2.0","method":"_bye"}')], seqs=(5,))],
        # a WebSocket message has no terminator
        [R(P1, [C(b'{"jsonrpc":"2.0","method":"_bye"}')], transport="websocket")],
    ),
    "framing.crlf": Case(
        [R(P1, [C(b'{"jsonrpc":"2.0","method":"_bye"}\r\n')], seqs=(5,))],
        [R(P1, [C(b'{"jsonrpc":"2.0","method":"_bye"}\n')])],
    ),
    "framing.binary": Case(
        [
            R(
                P1,
                [C(b'{"jsonrpc":"2.0","method":"_bin"}')],
                transport="websocket",
                binary_at=(5,),
                seqs=(5,),
            )
        ],
        [R(P1, [C(b'{"jsonrpc":"2.0","method":"_bin"}')], transport="websocket")],
    ),
    "jsonrpc.envelope": Case(
        [
            R(P1, [C({"id": 9, "method": "_x"}), A(ok(9))], seqs=(5,)),
            R(P1, [A(b"[1, 2]\n")], transport="websocket"),
            R(P1, [C({"jsonrpc": "2.0", "id": [1], "method": "_x"}), A(ok([1]))]),
            R(P1, [C(b'"just a string"\n')]),
            R(P1, [C({"jsonrpc": "2.0", "method": 5})]),
        ],
        [R(P1, [C(rq("str-id", "_x")), A(ok("str-id"))])],
    ),
    "jsonrpc.batch": Case(
        [
            R(P1, [C(b'[{"jsonrpc":"2.0","method":"_x"}]\n')], seqs=(5,)),
            R(P2, [C(b"[]\n")], seqs=(5,)),
        ],
        [
            R(
                P2,
                [
                    C(
                        b'[{"jsonrpc":"2.0","method":"_x"},{"jsonrpc":"2.0","id":7,"method":"_y"}]\n'
                    ),
                    A(er(7)),
                ],
            )
        ],
    ),
    "jsonrpc.response-id-echo": Case(
        [
            R(
                P1,
                [C(rq(5, "session/list")), A(b'{"jsonrpc":"2.0","id":5.0,"result":{}}\n')],
                seqs=(5, 6),
            ),
            R(P1, [C(rq(5, "session/list")), A(ok("5", sessions=[]))], seqs=(5, 6)),
            R(P1, [A(ok(99))], seqs=(5,), side="agent"),
            # the agent's id 1 is not the client's id 1: each direction has its own id space
            R(P1, [C(rq(3, "_x")), C(ok(3))], side="client"),
        ],
        [
            R(P1, [C(rq(1, "_x")), A(rq(1, "_y")), C(ok(1)), A(ok(1))]),
            # the same string value spelled with an escape is the same id
            R(P1, [C(rq("ab", "_x")), A(b'{"jsonrpc":"2.0","id":"a\\u0062","result":{}}\n')]),
        ],
    ),
    "jsonrpc.result-xor-error": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "_x")),
                    A(
                        {
                            "jsonrpc": "2.0",
                            "id": 2,
                            "result": {},
                            "error": {"code": 1, "message": "m"},
                        }
                    ),
                ],
                seqs=(6,),
            ),
            R(P1, [C(rq(2, "_x")), A({"jsonrpc": "2.0", "id": 2})]),
        ],
        [R(P1, [C(rq(2, "_x")), A(er(2))])],
    ),
    "jsonrpc.notification-answered": Case(
        [
            R(P1, [C(nt("_vendor/ping")), A(er(None, -32601))], seqs=(5, 6), side="agent"),
            R(P1, [A(nt("_vendor/ping")), C(ok(None))], seqs=(5, 6), side="client"),
        ],
        [
            R(P1, [C(nt("_vendor/ping")), C(rq(2, "_x")), A(er(2))]),
            R(P1, [C(b"garbage\n"), A(er(None, -32700, "Parse error"))], allow=("framing.json",)),
        ],
    ),
    "jsonrpc.one-response": Case(
        [R(P1, [C(rq(2, "_x")), A(ok(2)), A(ok(2))], seqs=(6, 7))],
        [R(P1, [C(rq(2, "_x")), A(ok(2)), C(rq(3, "_x")), A(ok(3))])],
    ),
    "jsonrpc.request-answered": Case(
        [
            R(P1, [C(rq(2, "session/list"))], seqs=(5,), side="agent"),
            R(
                P1,
                [C(rq(2, "session/list")), C(nt("$/cancel_request", requestId=2))],
                seqs=(5, 6),
                side="agent",
            ),
            R(P1, [A(rq(4, "fs/read_text_file", sessionId=SID, path="/a"))], side="client"),
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/list")),
                    C(nt("$/cancel_request", requestId=2)),
                    A(er(2, -32800, "cancelled")),
                ],
            )
        ],
    ),
    "jsonrpc.extension-answered": Case(
        [R(P1, [C(rq(2, "_vendor/x"))], seqs=(5,))],
        [R(P1, [C(rq(2, "_vendor/x")), A(er(2, -32601))])],
    ),
    "lifecycle.initialize-first": Case(
        [
            R(
                [C(rq(1, "session/new", cwd="/w", mcpServers=[])), A(ok(1, sessionId=SID))],
                seqs=(1,),
            ),
            R([A(up("agent_message_chunk", content=TEXT))], seqs=(1,)),
        ],
        [R(P1)],
    ),
    "lifecycle.capabilities": Case(
        [
            R(
                v1_prelude(client_caps={}),
                [A(rq(7, "fs/read_text_file", sessionId=SID, path="/a")), C(ok(7, content=""))],
                seqs=(5,),
            ),
            R(
                v1_prelude(client_caps={"fs": {"readTextFile": True}}),
                [A(rq(7, "fs/write_text_file", sessionId=SID, path="/a", content="")), C(ok(7))],
            ),
            R(
                v1_prelude(client_caps={}),
                [
                    A(rq(7, "terminal/create", sessionId=SID, command="ls")),
                    C(ok(7, terminalId="x")),
                ],
            ),
            R(
                v1_prelude(agent_caps={}),
                [C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])), A(ok(2))],
            ),
            R(
                v1_prelude(agent_caps={}),
                [C(rq(2, "session/resume", sessionId=SID, cwd="/w")), A(ok(2))],
            ),
            R(v1_prelude(agent_caps={}), [C(rq(2, "session/list")), A(ok(2, sessions=[]))]),
            R(
                P1,
                [
                    C(
                        rq(
                            2,
                            "session/prompt",
                            sessionId=SID,
                            prompt=[{"type": "audio", "data": "", "mimeType": "audio/wav"}],
                        )
                    ),
                    A(ok(2, stopReason="end_turn")),
                ],
            ),
            R(P2, [A(rq(7, "fs/read_text_file", sessionId=SID, path="/a")), C(er(7))]),
            R(P2, [C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])), A(er(2))]),
            R(
                v2_prelude(client_caps={}),
                [
                    A(rq(7, "elicitation/create", sessionId=SID, message="?")),
                    C(ok(7, action="cancel")),
                ],
            ),
            R(v2_prelude(agent_caps={}), [C(rq(2, "session/list")), A(ok(2, sessions=[]))]),
            R(P2, [C(rq(2, "session/delete", sessionId=SID)), A(ok(2))]),
            R(P2, [C(rq(2, "auth/login", methodId="x")), A(ok(2))]),
            R(
                P2,
                [
                    C(
                        rq(
                            2,
                            "session/prompt",
                            sessionId=SID,
                            prompt=[
                                {"type": "resource", "resource": {"uri": "file:///a", "text": ""}}
                            ],
                        )
                    ),
                    A(er(2)),
                ],
            ),
        ],
        [
            R(
                P1,
                [
                    A(rq(7, "fs/read_text_file", sessionId=SID, path="/a")),
                    C(ok(7, content="")),
                    A(rq(8, "terminal/create", sessionId=SID, command="ls", cwd="/w")),
                    C(ok(8, terminalId="x")),
                    C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])),
                    A(ok(2)),
                    C(
                        rq(
                            3,
                            "session/prompt",
                            sessionId=SID,
                            prompt=[{"type": "image", "data": "", "mimeType": "image/png"}],
                        )
                    ),
                    A(ok(3, stopReason="end_turn")),
                ],
            ),
            R(
                P2,
                [
                    A(rq(7, "elicitation/create", sessionId=SID, message="?")),
                    C(ok(7, action="cancel")),
                    C(rq(2, "session/list")),
                    A(ok(2, sessions=[])),
                    C(
                        rq(
                            3,
                            "session/prompt",
                            sessionId=SID,
                            prompt=[{"type": "image", "data": "", "mimeType": "image/png"}],
                        )
                    ),
                    A(er(3)),
                ],
            ),
            R(
                v2_prelude(auth=[{"id": "x", "name": "X"}]),
                [C(rq(2, "auth/login", methodId="x")), A(ok(2))],
            ),
        ],
    ),
    "lifecycle.absolute-path": Case(
        [
            R(
                [
                    *P1[:2],
                    C(rq(1, "session/new", cwd="work/x", mcpServers=[])),
                    A(ok(1, sessionId=SID)),
                ],
                seqs=(3,),
            ),
            R(
                P1,
                [
                    A(rq(7, "fs/read_text_file", sessionId=SID, path="rel.txt")),
                    C(ok(7, content="")),
                ],
                seqs=(5,),
            ),
            R(P1, [A(up("tool_call", toolCallId="t", title="x", locations=[{"path": "a.py"}]))]),
        ],
        [
            R(
                [
                    *P1[:2],
                    C(rq(1, "session/new", cwd="C:\\work", mcpServers=[])),
                    A(ok(1, sessionId=SID)),
                    A(rq(7, "fs/read_text_file", sessionId=SID, path="/abs/a.txt")),
                    C(ok(7, content="")),
                ]
            )
        ],
    ),
    "turn.permission-cancelled": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(rq(0, "session/request_permission", sessionId=SID, **PERM)),
                    C(nt("session/cancel", sessionId=SID)),
                    C(ok(0, outcome={"outcome": "selected", "optionId": "allow"})),
                    A(ok(2, stopReason="cancelled")),
                ],
                seqs=(7, 8),
            )
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(rq(0, "session/request_permission", sessionId=SID, **PERM)),
                    C(nt("session/cancel", sessionId=SID)),
                    C(ok(0, **CANCELLED)),
                    A(ok(2, stopReason="cancelled")),
                ],
            ),
            # answered before the cancel: any outcome is fine
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(rq(0, "session/request_permission", sessionId=SID, **PERM)),
                    C(ok(0, outcome={"outcome": "selected", "optionId": "allow"})),
                    C(nt("session/cancel", sessionId=SID)),
                    A(ok(2, stopReason="cancelled")),
                ],
            ),
        ],
    ),
    "v1.cancel-stop-reason": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    C(nt("session/cancel", sessionId=SID)),
                    A(ok(2, stopReason="end_turn")),
                ],
                seqs=(6, 7),
            ),
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    C(nt("session/cancel", sessionId=SID)),
                    A(er(2, -32800)),
                ],
            ),
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("agent_message_chunk", content=TEXT)),
                    A(ok(2, stopReason="cancelled")),
                ],
            ),
            # a cancel with no prompt pending expects nothing
            R(P1, v1_turn(), [C(nt("session/cancel", sessionId=SID))], v1_turn(3)),
        ],
    ),
    "v1.updates-after-turn": Case(
        [R(P1, v1_turn(), [A(up("agent_message_chunk", content=TEXT))], seqs=(10, 11))],
        [
            R(
                P1,
                v1_turn(),
                [
                    A(up("available_commands_update", availableCommands=[])),
                    A(up("current_mode_update", currentModeId="x")),
                ],
                v1_turn(3),
            )
        ],
    ),
    "v2.prompt-message-id": Case(
        [
            R(P2, [C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])), A(ok(2))], seqs=(6,)),
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(ok(2, messageId=None)),
                ],
            ),
        ],
        [R(P2, v2_turn())],
    ),
    "v2.prompt-user-message": Case(
        [
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("state_update", state="running")),
                    A(up("user_message", messageId="other", content=[TEXT])),
                    A(ok(2, messageId="u2")),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
                seqs=(8,),
            ),
            # an agent_message with that id is a different entity type
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("state_update", state="running")),
                    A(ok(2, messageId="u2")),
                    A(up("agent_message", messageId="u2", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
        ],
        # the update may arrive after the response, and as chunks
        [
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("state_update", state="running")),
                    A(ok(2, messageId="u2")),
                    A(up("user_message_chunk", messageId="u2", content=TEXT)),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            )
        ],
    ),
    "v2.running-before-idle": Case(
        [
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("user_message", messageId="u2", content=[TEXT])),
                    A(ok(2, messageId="u2")),
                    A(up("agent_message", messageId="m", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
                seqs=(5, 9),
            ),
            # agent-initiated output on a fresh (idle) session, then idle, never running
            R(
                P2,
                [
                    A(up("agent_message", messageId="m", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
                seqs=(5, 6),
            ),
        ],
        [
            R(P2, v2_turn()),
            # an idle with no foreground work to end (e.g. right after session/new)
            R(P2, [A(up("state_update", state="idle"))], v2_turn(3)),
            # agent-initiated work: running, output, idle, no prompt at all
            R(
                P2,
                [
                    A(up("state_update", state="running")),
                    A(up("agent_message", messageId="m", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
            # a session resumed from another connection: its work may predate the recording
            R(
                v2_prelude()[:2],
                [
                    C(rq(1, "session/resume", sessionId=SID, cwd="/w")),
                    A(ok(1)),
                    A(up("agent_message", messageId="m", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
            # background tool progress while idle does not start work
            R(
                P2,
                v2_turn(),
                [
                    A(up("tool_call_update", toolCallId="bg", status="in_progress")),
                    A(up("tool_call_update", toolCallId="bg", status="completed")),
                ],
            ),
        ],
    ),
    "v2.stop-reason": Case(
        [
            R(P2, v2_turn()[:-1], [A(up("state_update", state="idle"))], seqs=(13,)),
            R(P2, v2_turn()[:-1], [A(up("state_update", state="idle", stopReason=3))]),
        ],
        [R(P2, v2_turn(stop="_vendor_paused")), R(P2, v2_turn(stop="max_tokens"))],
    ),
    "v2.cancel-idle": Case(
        [
            R(
                P2,
                v2_turn()[:5],
                [
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
                seqs=(10, 11),
            ),
            R(
                P2,
                v2_turn()[:5],
                [
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("state_update", state="idle", stopReason="error")),
                ],
            ),
            R(P2, v2_turn()[:5], [C(nt("session/cancel", sessionId=SID))], seqs=(10,)),
        ],
        [
            R(
                P2,
                v2_turn()[:5],
                [
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("agent_message_chunk", messageId="m2", content=TEXT)),
                    A(up("state_update", state="idle", stopReason="cancelled")),
                ],
            ),
            # cancelling while idle expects nothing
            R(P2, v2_turn(), [C(nt("session/cancel", sessionId=SID))]),
        ],
    ),
    "v2.nothing-after-cancel": Case(
        [
            R(
                P2,
                v2_turn()[:7],
                [
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("state_update", state="idle", stopReason="cancelled")),
                    A(up("tool_call_update", toolCallId="t2", status="completed")),
                ],
                seqs=(13, 14),
            )
        ],
        [
            R(
                P2,
                v2_turn()[:7],
                [
                    C(nt("session/cancel", sessionId=SID)),
                    A(up("tool_call_update", toolCallId="t2", status="cancelled")),
                    A(up("state_update", state="idle", stopReason="cancelled")),
                    A(up("usage_update", used=1, size=10)),
                ],
                v2_turn(3),
            )
        ],
    ),
    "v2.error-idle-tools": Case(
        [
            R(
                P2,
                v2_turn()[:7],
                [
                    A(
                        up(
                            "state_update",
                            state="idle",
                            stopReason="error",
                            error={"code": -32603, "message": "boom"},
                        )
                    )
                ],
                seqs=(11, 12),
            )
        ],
        [
            R(
                P2,
                v2_turn()[:7],
                [
                    A(up("tool_call_update", toolCallId="t2", status="failed")),
                    A(up("state_update", state="idle", stopReason="error")),
                ],
            )
        ],
    ),
    "v2.message-id": Case(
        [
            R(
                P2,
                v2_turn()[:4],
                [
                    A(up("agent_message_chunk", content=TEXT)),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
                seqs=(9,),
            )
        ],
        [R(P2, v2_turn())],
    ),
    "v2.work-left-running": Case(
        [R(P2, v2_turn()[:-1])],
        [R(P2, v2_turn())],
    ),
    "entity.id-reuse": Case(
        [
            R(P2, v2_turn(2, mid="u"), v2_turn(3, mid="u"), seqs=(8, 17)),
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(up("compaction_update", compactionId="c", status="completed")),
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(up("compaction_update", compactionId="c", status="completed")),
                ],
            ),
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("tool_call", toolCallId="t", title="a")),
                    A(up("tool_call", toolCallId="t", title="b")),
                    A(ok(2, stopReason="end_turn")),
                ],
            ),
        ],
        [
            # a thought and a message may share a messageId: different entity types
            R(
                P2,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(up("state_update", state="running")),
                    A(up("user_message", messageId="x", content=[TEXT])),
                    A(ok(2, messageId="x")),
                    A(up("agent_thought", messageId="x", content=[TEXT])),
                    A(up("agent_message", messageId="x", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
            R(P1, v1_turn(), v1_turn(3)),
        ],
    ),
    "notice.fields": Case(
        [
            R(P2, [A(up("notice", severity="warning", title=""))], seqs=(5,)),
            R(P2, [A(up("notice", title="MCP server unavailable"))]),
            R(P2, [A(up("notice", severity="info"))]),
        ],
        [
            R(
                P2,
                [
                    A(
                        up(
                            "notice",
                            severity="warning",
                            title="MCP server unavailable",
                            description=None,
                        )
                    ),
                    A(up("notice", severity="_vendor_loud", title="x")),
                ],
            )
        ],
    ),
    "compaction.fields": Case(
        [
            R(P2, [A(up("compaction_update", compactionId="c"))], seqs=(5,)),
            R(P2, [A(up("compaction_update", status="completed"))]),
            R(P2, [A(up("compaction_summary_chunk", compactionId="c"))]),
        ],
        [
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(up("compaction_summary_chunk", compactionId="c", content=TEXT)),
                    A(
                        up(
                            "compaction_update",
                            compactionId="c",
                            status="completed",
                            summary=[TEXT],
                        )
                    ),
                ],
            )
        ],
    ),
    "compaction.terminal-status": Case(
        [
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(up("compaction_summary_chunk", compactionId="c", content=TEXT)),
                ],
                seqs=(5,),
            ),
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(up("compaction_update", compactionId="c", status="_vendor_paused")),
                ],
            ),
        ],
        [
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="in_progress")),
                    A(
                        up(
                            "compaction_update",
                            compactionId="c",
                            status="failed",
                            error="out of tokens",
                        )
                    ),
                ],
            ),
            R(P2, [A(up("compaction_update", compactionId="c", status="completed"))]),
        ],
    ),
    "enum.reserved": Case(
        [
            R(P2, v2_turn(stop="done"), seqs=(13,)),
            R(P2, [A(up("future_variant", x=1))], seqs=(5,)),
            R(P2, [A(up("notice", severity="critical", title="x"))]),
            R(
                P2,
                [
                    A(up("compaction_update", compactionId="c", status="paused")),
                    A(up("compaction_update", compactionId="c", status="completed")),
                ],
            ),
            R(
                P2,
                v2_turn()[:-1],
                [
                    A(up("state_update", state="sleeping")),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
            R(P1, [A(up("state_update", state="running"))]),
            R(P1, v1_turn(stop="finished")),
            R(P1, [A(up("tool_call", toolCallId="t", title="x", kind="compile", status="queued"))]),
        ],
        [
            R(P2, [A(up("_vendor_x", payload={"a": 1}))], v2_turn(stop="_vendor_stop")),
            R(P1, [A(up("_vendor_x"))], v1_turn(stop="refusal")),
        ],
    ),
    "replay.before-response": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])),
                    A(up("user_message_chunk", content=TEXT)),
                    A(ok(2)),
                    A(up("agent_message_chunk", content=TEXT)),
                ],
                seqs=(7, 8),
            ),
            R(
                P2,
                [
                    C(
                        rq(
                            2,
                            "session/resume",
                            sessionId=SID,
                            cwd="/w",
                            replayFrom={"type": "start"},
                        )
                    ),
                    A(ok(2)),
                    A(up("user_message", messageId="u1", content=[TEXT])),
                ],
            ),
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])),
                    A(up("user_message_chunk", content=TEXT)),
                    A(up("agent_message_chunk", content=TEXT)),
                    A(up("tool_call", toolCallId="old", title="x", status="completed")),
                    A(ok(2)),
                    A(up("available_commands_update", availableCommands=[])),
                ],
                v1_turn(3),
            ),
            R(
                P2,
                [
                    C(
                        rq(
                            2,
                            "session/resume",
                            sessionId=SID,
                            cwd="/w",
                            replayFrom={"type": "start"},
                        )
                    ),
                    A(up("user_message", messageId="u1", content=[])),
                    A(up("user_message_chunk", messageId="u1", content=TEXT)),
                    A(up("compaction_update", compactionId="c", status="completed")),
                    A(ok(2)),
                    # agent-initiated work after the resume is not replay
                    A(up("state_update", state="running")),
                    A(up("agent_message", messageId="m9", content=[TEXT])),
                    A(up("state_update", state="idle", stopReason="end_turn")),
                ],
            ),
        ],
    ),
    "replay.plain-resume": Case(
        [
            R(
                P2,
                [
                    C(rq(2, "session/resume", sessionId=SID, cwd="/w")),
                    A(up("user_message", messageId="u1", content=[TEXT])),
                    A(ok(2)),
                ],
                seqs=(5, 6),
            ),
            R(
                P1,
                [
                    C(rq(2, "session/resume", sessionId=SID, cwd="/w")),
                    A(up("agent_message_chunk", content=TEXT)),
                    A(ok(2)),
                ],
            ),
            R(
                P1,
                [
                    C(rq(2, "session/resume", sessionId=SID, cwd="/w")),
                    A(ok(2)),
                    A(up("user_message_chunk", content=TEXT)),
                ],
                seqs=(6, 7),
            ),
        ],
        [
            R(
                P2,
                [
                    C(rq(2, "session/resume", sessionId=SID, cwd="/w", replayFrom=None)),
                    A(up("available_commands_update", availableCommands=[])),
                    A(ok(2)),
                ],
                v2_turn(3),
            )
        ],
    ),
    "replay.no-notice": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])),
                    A(up("notice", severity="info", title="welcome back")),
                    A(ok(2)),
                ],
                seqs=(5, 6),
            )
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/load", sessionId=SID, cwd="/w", mcpServers=[])),
                    A(ok(2)),
                    A(up("notice", severity="info", title="welcome back")),
                ],
            )
        ],
    ),
    "recording.order": Case(
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    C(ok(0, outcome={"outcome": "selected", "optionId": "a"})),
                    A(rq(0, "session/request_permission", sessionId=SID, **PERM)),
                    A(ok(2, stopReason="end_turn")),
                ],
                seqs=(6, 7),
            )
        ],
        [
            R(
                P1,
                [
                    C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
                    A(rq(0, "session/request_permission", sessionId=SID, **PERM)),
                    C(ok(0, outcome={"outcome": "selected", "optionId": "a"})),
                    A(ok(2, stopReason="end_turn")),
                ],
            )
        ],
    ),
    "recording.incomplete": Case([R(P1, frames_dropped=3, seqs=())], [R(P1)]),
}


def _run(run: Run) -> list[Any]:
    return run_engine(
        run.frames,
        transport=run.transport,
        frames_dropped=run.frames_dropped,
        binary_at=run.binary_at,
    )


def test_every_rule_has_a_case() -> None:
    assert set(CASES) | {"framing.size"} == set(RULE_BY_ID)
    for rule_id, case in CASES.items():
        assert case.breaks and case.keeps, rule_id


BREAKS = [(r, i) for r, c in CASES.items() for i in range(len(c.breaks))]
KEEPS = [(r, i) for r, c in CASES.items() for i in range(len(c.keeps))]


@pytest.mark.parametrize(("rule_id", "index"), BREAKS, ids=[f"{r}-{i}" for r, i in BREAKS])
def test_breaking_recording_is_flagged(rule_id: str, index: int) -> None:
    run = CASES[rule_id].breaks[index]
    findings = _run(run)
    hits = [f for f in findings if f.rule == rule_id]
    assert hits, f"{rule_id} not reported; got {[(f.rule, f.reason) for f in findings]}"
    hit = hits[0]
    assert hit.tier == RULE_BY_ID[rule_id].tier
    assert hit.connection_id == 1
    assert hit.reason
    if run.seqs is not None:
        assert hit.seqs == run.seqs, (hit.seqs, hit.reason)
    # who broke it: fixed by the rule, or the peer the finding names (its reason says so too)
    breaker = RULE_BY_ID[rule_id].breaker
    if breaker == "recorder":
        assert hit.side is None
    elif breaker != "peer":
        assert hit.side == breaker
    else:
        assert hit.side in ("client", "agent")
    if run.side is not None:
        assert hit.side == run.side, (hit.side, hit.reason)
    if hit.side is not None:
        assert hit.reason.startswith(f"{hit.side}: ")
        assert hit.rule_text == RULE_BY_ID[rule_id].text_for(hit.side)


@pytest.mark.parametrize(("rule_id", "index"), KEEPS, ids=[f"{r}-{i}" for r, i in KEEPS])
def test_keeping_recording_is_clean(rule_id: str, index: int) -> None:
    findings = _run(CASES[rule_id].keeps[index])
    assert rule_id not in rules_of(findings), [(f.rule, f.seqs, f.reason) for f in findings]
    allowed = CASES[rule_id].keeps[index].allow
    errors = [
        (f.rule, f.seqs, f.reason) for f in findings if f.tier == "error" and f.rule not in allowed
    ]
    assert not errors


def test_framing_size_flags_a_line_over_64_mib_and_not_one_at_the_limit() -> None:
    def frame_of(size: int) -> bytes:
        head = b'{"jsonrpc":"2.0","method":"_blob","params":{"data":"'
        tail = b'"}}\n'
        return head + b"x" * (size - len(head) - len(tail)) + tail

    checker = ConnectionChecker(1, transport="stdio")
    at_limit = checker.feed(Frame.wire("c2a", frame_of(MAX_LINE_BYTES), 1))
    assert "framing.size" not in rules_of(at_limit)
    over = checker.feed(Frame.wire("c2a", frame_of(MAX_LINE_BYTES + 1), 2)) + checker.finish()
    assert [f.seqs for f in over if f.rule == "framing.size"] == [(2,)]
    assert RULE_BY_ID["framing.size"].tier == "info"


def test_version_specific_rules_follow_the_negotiated_version() -> None:
    # the same frames: v1 rules fire on v1, v2 rules on v2
    body = [
        C(rq(2, "session/prompt", sessionId=SID, prompt=[TEXT])),
        A(up("agent_message_chunk", content=TEXT)),
        A(ok(2, stopReason="end_turn")),
        A(up("agent_message_chunk", content=TEXT)),
    ]
    v1 = rules_of(run_engine(v1_prelude() + body))
    v2 = rules_of(run_engine(v2_prelude() + body))
    assert "v1.updates-after-turn" in v1 and "v2.message-id" not in v1
    assert "v2.message-id" in v2 and "v2.prompt-message-id" in v2
    assert "v1.updates-after-turn" not in v2


def test_agent_answering_a_lower_version_wins() -> None:
    # the client asks for 2, the agent answers 1: v1 rules apply
    frames = [
        C(rq(0, "initialize", protocolVersion=2, capabilities={})),
        A(ok(0, protocolVersion=1, agentCapabilities={})),
        C(b'[{"jsonrpc":"2.0","method":"_x"}]\n'),
    ]
    assert "jsonrpc.batch" in rules_of(run_engine(frames))


def test_findings_are_capped_per_rule_but_counted() -> None:
    checker = ConnectionChecker(1, transport="stdio", max_per_rule=5)
    out = []
    for seq in range(1, 101):  # both sides in turn: not one repeated finding
        out += checker.feed(Frame.wire("a2c" if seq % 2 else "c2a", b"not json\n", seq))
    out += checker.finish()
    assert len([f for f in out if f.rule == "framing.json"]) == 5
    assert checker.suppressed["framing.json"] == 95
    assert checker.per_rule["framing.json"] == 100
    assert checker.counts["error"] == 101  # 100 x framing.json + initialize-first


def test_repeats_of_one_finding_are_one_finding_naming_each_frame() -> None:
    checker = ConnectionChecker(1, transport="stdio")
    out = []
    for seq in range(1, 251):
        out += checker.feed(Frame.wire("a2c", b"not json\n", seq))
    out += checker.finish()
    runs = [f for f in out if f.rule == "framing.json"]
    assert [f.seqs for f in runs] == [
        tuple(range(1, 101)),
        tuple(range(101, 201)),
        tuple(range(201, 251)),
    ]  # at most RUN_MAX frames a finding: bounded memory
    assert runs[2].reason.endswith("(50 times: #201\u2013#250)")
    assert checker.counts["error"] == 4  # 3 x framing.json + initialize-first


def test_open_state_is_released() -> None:
    """Answered requests and finished turns leave no state behind (flat memory)."""
    checker = ConnectionChecker(1, transport="stdio")
    frames = v2_prelude()
    for i in range(2, 2002):
        turn = v2_turn(i)
        if i % 2:  # the user message after the prompt's response
            turn[2], turn[3] = turn[3], turn[2]
        frames += turn
    for seq, (d, raw) in enumerate(frames, 1):
        assert not checker.feed(Frame.wire(d, raw, seq))
    assert not checker._exchanges.pending
    session = checker._sessions[SID]
    assert not session.awaiting_user and not session.work_entities and not session.tool_status
    # the user messages of answered prompts are not kept (only the ids prompts returned)
    assert not session.user_ids_seen and len(session.prompt_message_ids) == 2000
    assert len(checker._answered) <= 4096
    assert not checker.finish()


def test_rule_table_is_well_formed() -> None:
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    for r in RULES:
        assert r.tier in ("error", "warning", "info")
        assert r.text.strip() and "." in r.id


def test_answers_to_notifications_are_grouped_and_name_their_frames() -> None:
    findings = run_engine(
        [
            *P1,
            A(up("notice", title="Heads up", severity="info")),  # 5
            A(nt("_acme_custom", n=1)),  # 6
            C(ok(None)),  # 7: the client answers the notice ...
            C(ok(None)),  # 8: ... and the extension notification
        ]
    )
    (hit,) = [f for f in findings if f.rule == "jsonrpc.notification-answered"]
    assert (hit.side, hit.seqs) == ("client", (5, 6, 7, 8))
    # answers in a row answer the notifications before them in order (by time)
    assert hit.reason == (
        "client: #7 and #8 answer notifications `notice` #5 (by time: under 0.1 ms before)"
        " and `_acme_custom` #6 (by time: under 0.1 ms before)"
    )
    # the rule as it applies to a client (JSON-RPC's "the Server" would be wrong here)
    assert hit.rule_text == (
        "The Client MUST NOT reply to a Notification (the agent's notifications get no response)."
    )


def test_frames_far_apart_are_separate_findings() -> None:
    spacer = [C(nt("_vendor/tick"))] * 20  # more than GROUP_GAP frames between the answers
    findings = run_engine(
        [*P1, A(nt("_acme_a")), C(ok(None)), *spacer, A(nt("_acme_b")), C(ok(None))]
    )
    reasons = [f.reason for f in findings if f.rule == "jsonrpc.notification-answered"]
    assert reasons == [
        "client: #6 answers notification `_acme_a` #5 (by time: under 0.1 ms before)",
        "client: #28 answers notification `_acme_b` #27 (by time: under 0.1 ms before)",
    ]


def test_orphan_responses_are_grouped_with_their_ids() -> None:
    findings = run_engine([*P1, A(ok(98)), A(ok(99))])
    (hit,) = [f for f in findings if f.rule == "jsonrpc.response-id-echo"]
    assert (hit.side, hit.seqs) == ("agent", (5, 6))
    assert (
        hit.reason == "agent: responses #5 and #6 (id 98 and id 99) answer no request of the client"
    )
    assert hit.rule_text.startswith(
        "The Agent's responses MUST carry the id of the client's request"
    )
