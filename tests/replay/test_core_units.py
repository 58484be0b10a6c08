"""In-process tests of the sans-I/O core: splicing, matching, history policy, the engine."""

from __future__ import annotations

import base64
from typing import Any

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

from acp_proxy.acp.jsonpaths import parse_path
from acp_proxy.replay.engine import Note, ReplayEngine, ReplayOptions, Send, Wait
from acp_proxy.replay.history import history_frames
from acp_proxy.replay.match import SessionMap, compare_call
from acp_proxy.replay.script import Classified, ConnectionInfo, build_script, classified_bytes
from acp_proxy.replay.splice import find_spans, splice

# -- splice -----------------------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, other=json_values, indent=st.booleans())
def test_find_spans_returns_exactly_the_member_bytes(value: Any, other: Any, indent: bool) -> None:
    doc = {"jsonrpc": "2.0", "id": "x", "params": {"a": other, "sessionId": value}, "z": [other]}
    option = orjson.OPT_INDENT_2 if indent else 0
    raw = orjson.dumps(doc, option=option)
    spans = find_spans(raw, [("id",), ("params", "sessionId")])
    assert [s.path for s in spans] == [("id",), ("params", "sessionId")]
    assert orjson.loads(spans[1].text(raw)) == orjson.loads(orjson.dumps(value))
    out = splice(raw, [(spans[0], b"42")])
    assert orjson.loads(out) == {**orjson.loads(raw), "id": 42}
    # Only the id bytes changed.
    assert out[: spans[0].start] == raw[: spans[0].start]
    assert out[spans[0].start + 2 :] == raw[spans[0].end :]


def test_find_spans_on_broken_input_is_empty() -> None:
    assert find_spans(b'{"id": 1, "x": [1, 2', [("id",)]) == []
    assert find_spans(b"\xff\xfe", [("id",)]) == []
    assert find_spans(b"", [("id",)]) == []


# -- matching ---------------------------------------------------------------------------


def test_compare_call_ignores_ids_cwd_and_maps_sessions() -> None:
    sessions = SessionMap()
    rec = {
        "id": 1,
        "method": "session/prompt",
        "params": {"sessionId": "r1", "cwd": "/a", "prompt": [{"type": "text", "text": "hi"}]},
    }
    live = {
        "id": "z",
        "method": "session/prompt",
        "params": {"sessionId": "L1", "cwd": "/b", "prompt": [{"type": "text", "text": "hi"}]},
    }
    assert compare_call(rec, live, [parse_path("cwd")], sessions) == []
    sessions.bind("r1", "L1")
    other = {**live, "params": {**live["params"], "sessionId": "L2"}}
    diffs = compare_call(rec, other, [parse_path("cwd")], sessions)
    assert [d.path for d in diffs] == ["params.sessionId"]
    typed = {**live, "params": {**live["params"], "prompt": [{"type": "text", "text": 1}]}}
    assert [d.describe() for d in compare_call(rec, typed, [parse_path("cwd")], sessions)] == [
        'params.prompt[0].text: recorded "hi", got 1'
    ]
    assert parse_path("params.prompt.*.text") == ("params", "prompt", "*", "text")


# -- history ----------------------------------------------------------------------------


def frames_of(lines: list[tuple[str, dict[str, Any]]], conn: int = 1) -> list[Classified]:
    out = []
    for i, (direction, msg) in enumerate(lines, 1):
        raw = orjson.dumps(msg) + b"\n"
        params = msg.get("params") or {}
        sid = params.get("sessionId") if isinstance(params, dict) else None
        out.append(classified_bytes(conn, i, i * 1000, direction, raw, sid or "S"))  # type: ignore[arg-type]
    return out


def upd(update: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    return (
        "a2c",
        {
            "jsonrpc": "2.0",
            "method": "session/update",
            "params": {"sessionId": "S", "update": update},
        },
    )


def test_history_policy_v2() -> None:
    b64 = base64.b64encode
    frames = frames_of(
        [
            (
                "c2a",
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "session/prompt",
                    "params": {"sessionId": "S", "prompt": [{"type": "text", "text": "q"}]},
                },
            ),
            ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"messageId": "u1"}}),
            upd({"sessionUpdate": "usage_update", "used": 1, "size": 9}),
            upd(
                {
                    "sessionUpdate": "agent_message",
                    "messageId": "a1",
                    "content": [{"type": "text", "text": "x"}],
                }
            ),
            upd(
                {
                    "sessionUpdate": "agent_message_chunk",
                    "messageId": "a1",
                    "content": {"type": "text", "text": "y"},
                }
            ),
            upd(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": "t",
                    "data": b64(b"A").decode(),
                }
            ),
            upd(
                {
                    "sessionUpdate": "terminal_update",
                    "terminalId": "t",
                    "output": {"data": b64(b"B").decode()},
                }
            ),
            upd(
                {
                    "sessionUpdate": "terminal_output_chunk",
                    "terminalId": "t",
                    "data": b64(b"C").decode(),
                }
            ),
            upd(
                {
                    "sessionUpdate": "compaction_summary_chunk",
                    "compactionId": "c",
                    "content": {"type": "text", "text": "s1"},
                }
            ),
            upd(
                {
                    "sessionUpdate": "compaction_update",
                    "compactionId": "c",
                    "status": "failed",
                    "error": "boom",
                }
            ),
            upd({"sessionUpdate": "notice", "title": "n", "severity": "info"}),
            upd({"sessionUpdate": "state_update", "state": "idle"}),
            upd({"sessionUpdate": "usage_update", "used": 2, "size": 9}),
            # A later load whose re-emitted history must not count twice.
            (
                "c2a",
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/resume",
                    "params": {"sessionId": "S", "replayFrom": {"type": "start"}},
                },
            ),
            upd({"sessionUpdate": "agent_message", "messageId": "a1", "content": []}),
            ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {}}),
        ]
    )
    out = [orjson.loads(h)["params"]["update"] for h in history_frames("S", frames, 2)]
    assert out == [
        # Never echoed in v2: rebuilt with the messageId of the prompt response.
        {
            "sessionUpdate": "user_message",
            "messageId": "u1",
            "content": [{"type": "text", "text": "q"}],
        },
        # A whole update with content comes first: no reset needed.
        {
            "sessionUpdate": "agent_message",
            "messageId": "a1",
            "content": [{"type": "text", "text": "x"}],
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "messageId": "a1",
            "content": {"type": "text", "text": "y"},
        },
        {
            "sessionUpdate": "terminal_update",
            "terminalId": "t",
            "output": {"data": b64(b"BC").decode()},
        },
        {
            "sessionUpdate": "compaction_update",
            "compactionId": "c",
            "status": "failed",
            "error": "boom",
            "summary": [{"type": "text", "text": "s1"}],
        },
        {"sessionUpdate": "usage_update", "used": 2, "size": 9},
    ]


def test_history_uses_a_leading_load_window_as_the_base() -> None:
    frames = frames_of(
        [
            (
                "c2a",
                {"jsonrpc": "2.0", "id": 1, "method": "session/load", "params": {"sessionId": "S"}},
            ),
            upd(
                {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old"}}
            ),
            ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {}}),
            (
                "c2a",
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "session/prompt",
                    "params": {"sessionId": "S", "prompt": [{"type": "text", "text": "new"}]},
                },
            ),
            upd(
                {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}}
            ),
            ("a2c", {"jsonrpc": "2.0", "id": 2, "result": {"stopReason": "end_turn"}}),
        ]
    )
    out = [orjson.loads(h)["params"]["update"] for h in history_frames("S", frames, 1)]
    assert out == [
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "old"}},
        {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "new"}},
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "ok"}},
    ]


def test_history_v1_passes_terminal_updates_through_raw() -> None:
    # v1 has no agent-owned terminals: such updates are unknown there and go out raw, each
    # one (a v2 history would fold them into one snapshot).
    chunks = [
        upd({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "QQ=="}),
        upd({"sessionUpdate": "terminal_output_chunk", "terminalId": "t", "data": "Qg=="}),
    ]
    frames = frames_of(chunks)
    assert history_frames("S", frames, 1) == [f.raw for f in frames]
    (snapshot,) = history_frames("S", frames, 2)
    assert orjson.loads(snapshot)["params"]["update"] == {
        "sessionUpdate": "terminal_update",
        "terminalId": "t",
        "output": {"data": "QUI="},
    }


# -- engine -----------------------------------------------------------------------------

RECORDING = [
    ("c2a", b'{"jsonrpc":"2.0","id":7,"method":"session/new","params":{"cwd":"/r"}}\n'),
    ("a2c", b'{"jsonrpc":"2.0","id":7,"result":{"sessionId":"S1"}}\n'),
    (
        "c2a",
        b'{"jsonrpc":"2.0","id":8,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}\n',
    ),
    (
        "a2c",
        b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"S1","update":{"sessionUpdate":"x"}}}\n',
    ),
    (
        "a2c",
        b'{"jsonrpc":"2.0","id":"perm-1","method":"session/request_permission","params":{"sessionId":"S1"}}\n',
    ),
    (
        "a2c",
        b'{ "jsonrpc" : "2.0", "method":"session/update",'
        b'"params":{"sessionId":"S1","update":{"sessionUpdate":"y"}}}\n',
    ),
    ("c2a", b'{"jsonrpc":"2.0","id":"perm-1","result":{"outcome":{"outcome":"cancelled"}}}\n'),
    ("a2c", b'{"jsonrpc":"2.0","id":8,  "result":{"stopReason":"end_turn"}}\n'),
]


def engine() -> ReplayEngine:
    frames = [classified_bytes(1, i, i, d, raw) for i, (d, raw) in enumerate(RECORDING, 1)]  # type: ignore[arg-type]
    script = build_script(frames, {1: ConnectionInfo(1, 1)})
    return ReplayEngine(script, ReplayOptions())


def sends(outputs: list[Any]) -> list[bytes]:
    return [o.data for o in outputs if isinstance(o, Send)]


def test_engine_rewrites_ids_and_waits_for_answers() -> None:
    e = engine()
    out = e.receive(b'{"jsonrpc":"2.0","id":"n","method":"session/new","params":{"cwd":"/live"}}')
    assert sends(out) == [b'{"jsonrpc":"2.0","id":"n","result":{"sessionId":"S1"}}\n']
    out = e.receive(
        b'{"jsonrpc":"2.0","id":3,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}\n'
    )
    # Frames up to where the recorded client answered, then a wait for the answer. The
    # agent request keeps its recorded id (nothing else used it in this live connection).
    assert sends(out) == [RECORDING[3][1], RECORDING[4][1], RECORDING[5][1]]
    assert out[-1] == Wait('"perm-1"') and e.waiting_for == '"perm-1"'
    assert e.receive(b'{"jsonrpc":"2.0","id":99,"result":{}}\n') == [
        Note("replay: the client answered unknown request id 99")
    ]
    out = e.receive(RECORDING[6][1])
    assert sends(out) == [b'{"jsonrpc":"2.0","id":3,  "result":{"stopReason":"end_turn"}}\n']
    assert e.finish() == []


def test_engine_maps_agent_minted_session_ids() -> None:
    e = engine()
    e.receive(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/x"}}\n')
    # The client refers to the session by another id (e.g. it persisted a mapping).
    e.sessions.rec_to_live["S1"] = "LIVE"
    e.sessions.live_to_rec["LIVE"] = "S1"
    out = e.receive(
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"LIVE","prompt":[]}}\n'
    )
    assert sends(out)[0] == RECORDING[3][1].replace(b'"S1"', b'"LIVE"')


def test_engine_answer_timeout_moves_on() -> None:
    e = engine()
    e.receive(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n')
    e.receive(
        b'{"jsonrpc":"2.0","id":2,"method":"session/prompt","params":{"sessionId":"S1","prompt":[]}}\n'
    )
    out = e.answer_timed_out()
    assert isinstance(out[0], Note) and sends(out) == [
        b'{"jsonrpc":"2.0","id":2,  "result":{"stopReason":"end_turn"}}\n'
    ]


def test_engine_binds_sessions_it_announces() -> None:
    lines = [
        ("c2a", b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"A"}}\n'),
        ("c2a", b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":2,"result":{"sessionId":"B"}}\n'),
        ("c2a", b'{"jsonrpc":"2.0","id":3,"method":"_go","params":{"sessionId":"A"}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":3,"result":"from A"}\n'),
        ("c2a", b'{"jsonrpc":"2.0","id":4,"method":"_go","params":{"sessionId":"B"}}\n'),
        ("a2c", b'{"jsonrpc":"2.0","id":4,"result":"from B"}\n'),
    ]
    frames = [classified_bytes(1, i, i, d, raw) for i, (d, raw) in enumerate(lines, 1)]  # type: ignore[arg-type]
    e = ReplayEngine(build_script(frames, {1: ConnectionInfo(1, 1)}))
    e.receive(b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{}}\n')
    e.receive(b'{"jsonrpc":"2.0","id":2,"method":"session/new","params":{}}\n')
    # B is asked first: it must get B's answer, not the earlier-recorded A's.
    out = e.receive(b'{"jsonrpc":"2.0","id":9,"method":"_go","params":{"sessionId":"B"}}\n')
    assert sends(out) == [b'{"jsonrpc":"2.0","id":9,"result":"from B"}\n']


def test_v1_user_messages_echoed_by_the_agent_are_not_rebuilt() -> None:
    prompt = {"sessionId": "S", "prompt": [{"type": "text", "text": "q"}]}
    echo = {"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": "q"}}
    frames = frames_of(
        [
            ("c2a", {"jsonrpc": "2.0", "id": 1, "method": "session/prompt", "params": prompt}),
            upd(echo),
            ("a2c", {"jsonrpc": "2.0", "id": 1, "result": {"stopReason": "end_turn"}}),
            # A prompt that failed (error response) is not history at all.
            ("c2a", {"jsonrpc": "2.0", "id": 2, "method": "session/prompt", "params": prompt}),
            ("a2c", {"jsonrpc": "2.0", "id": 2, "error": {"code": -32000, "message": "auth"}}),
        ]
    )
    out = [orjson.loads(h)["params"]["update"] for h in history_frames("S", frames, 1)]
    assert out == [echo]


# -- multi-connection recordings ----------------------------------------------------------


def _conn_frames(conn: int, lines: list[tuple[str, bytes]]) -> list[Classified]:
    out = []
    for i, (direction, raw) in enumerate(lines, 1):
        sid = orjson.loads(raw).get("params", {}).get("sessionId")
        out.append(classified_bytes(conn, i, i, direction, raw, sid))  # type: ignore[arg-type]
    return out


def _init(version: int) -> list[tuple[str, bytes]]:
    v = str(version).encode()
    return [
        (
            "c2a",
            b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":'
            + v
            + b"}}\n",
        ),
        ("a2c", b'{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":' + v + b"}}\n"),
    ]


def _say(text: str) -> tuple[str, bytes]:
    update = {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}
    msg = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "S", "update": update},
    }
    return ("a2c", orjson.dumps(msg) + b"\n")


NEW = b'{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/x"}}\n'
LOAD = b'{"jsonrpc":"2.0","id":1,"method":"session/load","params":{"sessionId":"S","cwd":"/x"}}\n'


def _session_s(conn: int, said: str) -> list[Classified]:
    """Connection ``conn``: initialize, session/new answered with session S, one message."""
    return _conn_frames(
        conn,
        [
            *_init(1),
            ("c2a", NEW),
            ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S"}}\n'),
            _say(said),
        ],
    )


def test_loose_matching_stays_in_the_connection_being_replayed() -> None:
    # The same client ran twice, v1 then v2; its session/new is identical in both.
    v1 = _conn_frames(
        1,
        [
            *_init(1),
            ("c2a", NEW),
            ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S","v":1}}\n'),
        ],
    )
    v2 = _conn_frames(
        2,
        [
            *_init(2),
            ("c2a", NEW),
            ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S","v":2}}\n'),
        ],
    )
    script = build_script([*v1, *v2], {1: ConnectionInfo(1, 1), 2: ConnectionInfo(2, 2)})
    e = ReplayEngine(script, ReplayOptions())
    e.receive(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":2}}\n')
    out = e.receive(NEW)
    assert sends(out) == [b'{"jsonrpc":"2.0","id":1,"result":{"sessionId":"S","v":2}}\n']


def test_load_re_emits_the_history_as_it_was_when_the_recorded_load_was_answered() -> None:
    first = _session_s(1, "before")
    second = _conn_frames(
        2,
        [
            *_init(1),
            ("c2a", LOAD),
            _say("before"),
            ("a2c", b'{"jsonrpc":"2.0","id":1,"result":{}}\n'),
            _say("after the load"),
        ],
    )
    script = build_script([*first, *second], {1: ConnectionInfo(1, 1), 2: ConnectionInfo(2, 1)})
    e = ReplayEngine(script, ReplayOptions())
    e.receive(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
    out = sends(e.receive(LOAD))
    response = out.index(b'{"jsonrpc":"2.0","id":1,"result":{}}\n')
    history = b"".join(out[:response])
    assert b"before" in history and b"after the load" not in history
    assert b"after the load" in out[response + 1]  # recorded after the response: sent after it


def test_strict_mode_refuses_a_load_that_is_not_the_next_recorded_message() -> None:
    first = _session_s(1, "hi")
    script = build_script(first, {1: ConnectionInfo(1, 1)})
    e = ReplayEngine(script, ReplayOptions(match="strict"))
    e.receive(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
    (error,) = sends(e.receive(LOAD))
    message = orjson.loads(error)["error"]["message"]
    assert "next in order, --match strict" in message and "session/new" in message
    # loose (the default) answers a LOAD the recording never saw with the session's history
    e = ReplayEngine(script, ReplayOptions())
    e.receive(b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}\n')
    out = sends(e.receive(LOAD))
    assert b"hi" in out[0] and out[-1] == b'{"jsonrpc":"2.0","id":1,"result":{}}\n'
