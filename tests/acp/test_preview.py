"""The frame list's preview (acp/preview.py): what a person reads first, also of cut frames."""

from __future__ import annotations

import json
from typing import Any

from acp_proxy.acp.preview import frame_preview


def raw(obj: dict[str, Any]) -> bytes:
    return json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n"


def chunk(text: str) -> bytes:
    return raw(
        {
            "method": "session/update",
            "params": {
                "sessionId": "s",
                "update": {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "m1",
                    "content": {"type": "text", "text": text},
                },
            },
        }
    )


def test_chunk_prompt_error_and_result() -> None:
    b = chunk("Echo: hello")
    p = frame_preview(
        b, len(b), kind="notification", method="session/update", update_kind="agent_message_chunk"
    )
    assert p.label == 'session/update · agent_message_chunk "Echo: hello"'
    assert (p.text, p.message_id, p.error) == ("Echo: hello", "m1", False)
    b = raw(
        {
            "id": 3,
            "method": "session/prompt",
            "params": {"sessionId": "s", "prompt": [{"type": "text", "text": "Can you help?"}]},
        }
    )
    p = frame_preview(b, len(b), kind="request", method="session/prompt", update_kind=None)
    assert p.label == 'session/prompt "Can you help?"'
    b = raw({"id": 3, "error": {"code": -32603, "message": "Internal error"}})
    p = frame_preview(b, len(b), kind="response", method="session/prompt", update_kind=None)
    assert (p.label, p.error) == ("error -32603 Internal error", True)
    b = raw({"id": 3, "result": {"stopReason": "end_turn"}})
    p = frame_preview(b, len(b), kind="response", method="session/prompt", update_kind=None)
    assert p.label == "result stopReason=end_turn"
    b = raw({"id": 0, "result": {"outcome": {"outcome": "selected", "optionId": "allow"}}})
    p = frame_preview(b, len(b), kind="response", method=None, update_kind=None)
    assert p.label == "result outcome={outcome=selected optionId=allow}"


def test_long_text_is_shortened_and_a_cut_frame_still_reads() -> None:
    b = chunk("word " * 200)
    p = frame_preview(
        b, len(b), kind="notification", method="session/update", update_kind="agent_message_chunk"
    )
    assert len(p.label) < 200 and p.label.endswith('…"')
    head = chunk('He said \\"hi\\" and ' + "x" * 500)[:300]  # a list reads 400 bytes at most
    p = frame_preview(
        head,
        1000,
        kind="notification",
        method="session/update",
        update_kind="agent_message_chunk",
    )
    assert p.label.startswith('session/update · agent_message_chunk "He said \\"hi\\" and xxx')
    assert p.message_id == "m1"
    cut_error = raw({"id": 1, "error": {"code": -1, "message": "boom " + "y" * 900}})[:200]
    p = frame_preview(cut_error, 1000, kind="response", method=None, update_kind=None)
    assert p.error and p.label.startswith('error "boom y')


def test_invalid_frames_say_so() -> None:
    p = frame_preview(b"not json\n", 9, kind="invalid", method=None, update_kind=None)
    assert p.label == 'invalid "not json"'
    assert p.summary == '"not json"'  # the method column says invalid


def update(upd: dict[str, Any]) -> bytes:
    return raw({"method": "session/update", "params": {"sessionId": "s", "update": upd}})


def test_previews_say_something_and_the_summary_drops_the_method() -> None:
    b = raw(
        {
            "id": 0,
            "result": {
                "protocolVersion": 2,
                "info": {"name": "claude-code", "version": "2.1.0"},  # v2's name
                "capabilities": {},
            },
        }
    )
    p = frame_preview(b, len(b), kind="response", method="initialize", update_kind=None)
    assert p.summary == p.label == "result agent claude-code 2.1.0 \u00b7 protocol 2"
    b = raw(
        {
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": 2, "clientInfo": {"name": "zed", "version": "0.200"}},
        }
    )
    p = frame_preview(b, len(b), kind="request", method="initialize", update_kind=None)
    assert p.summary == "client zed 0.200 \u00b7 protocol 2"
    assert p.label == "initialize client zed 0.200 \u00b7 protocol 2"
    b = raw(
        {
            "id": 4,
            "method": "session/request_permission",
            "params": {
                "sessionId": "s",
                "toolCall": {"toolCallId": "t1", "title": "Write x.py"},
                "options": [
                    {"optionId": "a", "name": "Allow once", "kind": "allow_once"},
                    {"optionId": "r", "name": "Reject", "kind": "reject_once"},
                ],
            },
        }
    )
    p = frame_preview(
        b, len(b), kind="request", method="session/request_permission", update_kind=None
    )
    assert p.summary == '"Write x.py" \u00b7 Allow once / Reject'
    commands = [{"name": n, "description": n} for n in ("help", "plan", "review")]
    b = update({"sessionUpdate": "available_commands_update", "availableCommands": commands})
    p = frame_preview(
        b, len(b), kind="notification", method="session/update",
        update_kind="available_commands_update",
    )  # fmt: skip
    assert p.summary == "3 commands: /help, /plan, /review"
    b = update({"sessionUpdate": "session_info_update", "title": "Fix the test"})
    p = frame_preview(
        b, len(b), kind="notification", method="session/update", update_kind="session_info_update"
    )
    assert p.summary == 'title: "Fix the test"'
    assert p.label == 'session/update \u00b7 session_info_update title: "Fix the test"'
    b = chunk("Echo: hi")
    p = frame_preview(
        b, len(b), kind="notification", method="session/update", update_kind="agent_message_chunk"
    )
    assert p.summary == '"Echo: hi"'
    b = update({"sessionUpdate": "_vendor_x", "span": "abc", "n": 3})
    p = frame_preview(b, len(b), kind="notification", method="session/update", update_kind=None)
    assert p.summary == "span=abc n=3"
    b = raw({"method": "session/cancel", "params": {"sessionId": "s"}})
    p = frame_preview(b, len(b), kind="notification", method="session/cancel", update_kind=None)
    assert p.summary == "sessionId=s"


def test_a_session_opening_names_its_directory_and_session() -> None:
    b = raw({"id": 2, "method": "session/new", "params": {"cwd": "/tmp", "mcpServers": []}})
    p = frame_preview(b, len(b), kind="request", method="session/new", update_kind=None)
    assert p.summary == 'cwd "/tmp"'
    b = raw({"id": 2, "method": "session/load", "params": {"sessionId": "s1", "cwd": "/w"}})
    p = frame_preview(b, len(b), kind="request", method="session/load", update_kind=None)
    assert p.summary == 'sessionId=s1 cwd "/w"'
