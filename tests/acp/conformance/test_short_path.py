"""The checker's short path for the agent's ``session/update``s gives the general path's findings.

:meth:`ConnectionChecker.feed_rows` checks most of a recording (the agent's updates, chunks
in line) without building a :class:`Message`; ``fast_path = False`` sends every frame
through the general path. Both must report the same findings, counts and state, on every
case of the rule table and on random traffic near the short path's edges (unknown sessions,
replay windows, cancelled work, v1 turns over, NUL and lone surrogates, CRLF, binary frames).
"""

from __future__ import annotations

import random
from typing import Any

import orjson
import pytest

from acp_proxy.acp.conformance import ConnectionChecker
from acp_proxy.wire.frame import Frame, wire_key
from tests.acp.conformance.helpers import (
    SID,
    TEXT,
    A,
    C,
    Line,
    er,
    line,
    nt,
    ok,
    rq,
    up,
    v1_prelude,
    v1_turn,
    v2_prelude,
    v2_turn,
)
from tests.acp.conformance.test_rules import CASES


def _outcome(frames: list[Line], fast: bool, transport: str | None, steps: list[int]) -> Any:
    """What the checker reports, batch by batch (``steps``: the batches' sizes), and its state.

    The short path takes each batch in one :meth:`~ConnectionChecker.feed_rows` call, as a
    live reader (or check's cursor) feeds it; the general path takes frame by frame
    (:meth:`~ConnectionChecker.feed`), its findings gathered per batch: a finding must come
    out of the same batch both ways.
    """
    checker = ConnectionChecker(1, transport=transport, max_per_rule=7)
    checker.fast_path = fast
    found: list[list[Any]] = [[f.to_json() for f in checker.drain()]]
    rows = [
        (seq, d, raw, seq * 1000, raw == b"<binary>\n") for seq, (d, raw) in enumerate(frames, 1)
    ]
    if fast:  # (feed keeps the times of its frames; feed_rows' rows carry none)
        times = {seq: ns for seq, _d, _raw, ns, _binary in rows}
        checker.frame_times = lambda seqs: {s: times[s] for s in seqs}
    at = 0
    for step in steps:
        batch = rows[at : at + step]
        at += step
        if fast:
            keyed = [(wire_key(seq, d, binary), raw) for seq, d, raw, _ns, binary in batch]
            found.append([f.to_json() for f in checker.feed_rows(keyed)])
        else:
            found.append(
                [
                    f.to_json()
                    for seq, d, raw, ns, binary in batch
                    for f in checker.feed(Frame.wire(d, raw, seq, ns, binary=binary))
                ]
            )
    found.append([f.to_json() for f in checker.finish()])
    sessions = {
        sid: (s.activity_seq, sorted(s.work_entities), s.state, s.after)
        for sid, s in checker._sessions.items()
    }
    return found, checker.counts, checker.suppressed, checker.frames, sessions


def _same(frames: list[Line], rng: random.Random) -> None:
    steps = []
    while sum(steps) < len(frames):
        steps.append(rng.choice([rng.randint(1, 9), rng.randint(10, 80)]))
    for transport in ("stdio", "websocket"):
        general = _outcome(frames, False, transport, steps)
        short = _outcome(frames, True, transport, steps)
        assert short == general


RUNS = [
    (r, k, i)
    for r, c in CASES.items()
    for k in ("breaks", "keeps")
    for i in range(len(getattr(c, k)))
]


@pytest.mark.parametrize(
    ("rule_id", "kind", "index"), RUNS, ids=[f"{r}-{k}-{i}" for r, k, i in RUNS]
)
def test_every_case_of_the_rule_table_gives_the_same_findings(
    rule_id: str, kind: str, index: int
) -> None:
    _same(getattr(CASES[rule_id], kind)[index].frames, random.Random(index))


def _chunk(rng: random.Random, sid: str, rid: int) -> Line:
    variant = rng.choice(["agent_message_chunk", "agent_thought_chunk", "user_message_chunk"])
    mid: Any = rng.choice([f"m{rid}", f"m{rid}", f"m{rid - 1}", "", None, 7, "m\u0000"])
    fields: dict[str, Any] = {"content": TEXT}
    if mid is not None:
        fields["messageId"] = mid
    return A(up(variant, sid, **fields))


def _noise(rng: random.Random, sid: str, rid: int) -> list[Line]:
    """One frame (or two) of the kind that sits at an edge of the short path."""
    pick = rng.randrange(31)
    if pick < 6:
        return [_chunk(rng, sid, rid)]
    return [
        [C(nt("session/cancel", sessionId=sid))],
        [A(up("state_update", sid, state=rng.choice(["running", "idle", "requires_action"])))],
        [A(up("state_update", sid, state="idle", stopReason=rng.choice(["cancelled", "error"])))],
        [A(up("tool_call_update", sid, toolCallId=f"t{rid}", status="pending", kind="nope"))],
        [A(up("user_message", sid, messageId=f"u{rid}", content=[TEXT]))],
        [C(rq(900 + rid, "session/load", sessionId=sid, cwd="/w", mcpServers=[]))],
        [A(ok(900 + rid))],
        [C(rq(950 + rid, "session/resume", sessionId=sid, cwd="/w", replayFrom=None))],
        [A(ok(950 + rid))],
        [
            A(
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s\\u0000",'
                b'"update":{"sessionUpdate":"agent_message_chunk","messageId":"m1"}}}\n'
            )
        ],
        [
            A(
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
                b'"update":{"sessionUpdate":"notice","title":"\\ud800","severity":"x\\u0000"}}}\n'
            )
        ],
        [
            A(
                b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s1",'
                b'"update":{"sessionUpdate":"agent_message_chunk","messageId":"\\udc00"}}}\n'
            )
        ],
        [A(orjson.dumps(up("agent_message_chunk", sid, messageId=f"m{rid}")) + b"\r\n")],
        [A(b"<binary>\n")],
        [A({"jsonrpc": "2.0", "id": None, "error": {"code": 1, "message": "session/update"}})],
        [A({"method": "session/update", "params": {"sessionId": sid, "update": TEXT}})],
        # a finding (a run of one, for now), then chunks that are no findings: it is
        # reported in line, GROUP_GAP frames on
        [
            A(b"<binary>\n"),
            *[A(up("agent_message_chunk", sid, messageId=f"m{rid}", content=TEXT))] * 12,
        ],
        # the same from an update the short path hands to the session rules
        [
            A(up("tool_call_update", sid, toolCallId=f"t{rid}", kind="nope")),
            *[A(up("agent_message_chunk", sid, messageId=f"m{rid}", content=TEXT))] * 12,
        ],
        # the same message's chunks on either side of a frame that changes what one may do
        [
            same := A(up("agent_message_chunk", sid, messageId=f"m{rid}", content=TEXT)),
            C(nt("session/cancel", sessionId=sid)),
            same,
        ],
        [same, A(ok(rid, stopReason="end_turn")), same],
        # a chunk's envelope broken: no jsonrpc, another version, a key too many, another method
        [
            A(
                {
                    k: v
                    for k, v in up("agent_message_chunk", sid, messageId=f"m{rid}").items()
                    if k != "jsonrpc"
                }
            )
        ],
        [A({**up("agent_thought_chunk", sid, messageId=f"m{rid}"), "jsonrpc": "1.0"})],
        [A({**up("agent_message_chunk", sid, messageId=f"m{rid}"), "id": None})],
        [A({**up("agent_message_chunk", sid, messageId=f"m{rid}"), "method": "session/upd"})],
        [same, C(rq(970 + rid, "session/load", sessionId=sid, cwd="/w", mcpServers=[])), same],
    ][pick - 6]


def _traffic(seed: int) -> list[Line]:
    rng = random.Random(seed)
    v2 = rng.random() < 0.7
    frames: list[Line] = list(v2_prelude() if v2 else v1_prelude())
    if rng.random() < 0.1:
        frames.insert(0, _chunk(rng, SID, 1))  # before initialize
    for rid in range(2, 2 + rng.randint(5, 25)):
        turn = v2_turn(rid) if v2 else v1_turn(rid)
        turn[4:4] = [_chunk(rng, SID, rid) for _ in range(rng.randint(0, 6))]
        for _ in range(rng.randint(0, 4)):
            sid = rng.choice([SID, SID, "other"])
            turn[rng.randrange(len(turn) + 1) : 0] = _noise(rng, sid, rid)
        if rng.random() < 0.2:
            turn.append(A(er(rid)))
        frames += turn
    return frames


@pytest.mark.parametrize("seed", range(100))
def test_random_traffic_near_the_short_paths_edges_gives_the_same_findings(seed: int) -> None:
    _same(_traffic(seed), random.Random(seed))


def test_a_direction_neither_c2a_nor_a2c_is_refused() -> None:
    """No recording of ours has one (the recorder and import write c2a or a2c); the checker
    says so rather than check it as either side."""
    checker = ConnectionChecker(1)
    checker.feed_rows([(wire_key(1, "c2a", False), line(rq(0, "initialize")))])
    with pytest.raises(ValueError, match="frame #2: a direction neither c2a nor a2c"):
        checker.feed_rows([(wire_key(2, "xyz", False), line(nt("session/update")))])
