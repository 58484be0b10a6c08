"""Small hand-made recordings for the replay tests: JSONL exports and SQLite files.

The committed demo recordings (``recordings/*.jsonl``) are real traffic; these helpers build
the odd cases real agents rarely produce on demand (lone surrogates, colliding request ids).
"""

from __future__ import annotations

import json
from pathlib import Path

from acp_proxy.store.edit import Capture
from tests.helpers import insert_frames

REPO = Path(__file__).resolve().parents[2]
V1_LOAD = REPO / "recordings" / "v1-load.jsonl"
V2_RESUME = REPO / "recordings" / "v2-resume-replay.jsonl"

Frames = list[tuple[str, bytes]]
"""(direction, raw) in recorded order; raw ends with its newline."""


def export_frames(path: Path, connection: int) -> Frames:
    """(direction, raw) of one connection of a JSONL export, in order."""
    out: Frames = []
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record["type"] == "frame" and record["connection"] == connection:
            out.append((record["direction"], record["text"].encode()))
    return out


def write_export(path: Path, connections: list[tuple[int, Frames]]) -> Path:
    """A JSONL export holding ``connections``: (protocol version, frames) each."""
    lines = [
        {
            "created_by": "tests",
            "format": "acp-proxy-recording",
            "redacted": False,
            "type": "header",
            "version": 1,
        }
    ]
    count = 0
    for cid, (version, frames) in enumerate(connections, 1):
        lines.append(
            {
                "connection": cid,
                "started_at": 1767225600.0 + cid,
                "ended_at": 1767225601.0 + cid,
                "transport": "stdio",
                "protocol_version": version,
                "type": "connection",
            }
        )
        for seq, (direction, raw) in enumerate(frames, 1):
            lines.append(
                {
                    "connection": cid,
                    "direction": direction,
                    "mono_ns": seq * 1_000_000,
                    "seq": seq,
                    "text": raw.decode(),
                    "ts": 1767225600.0 + cid + seq / 1000,
                    "type": "frame",
                }
            )
            count += 1
    lines.append(
        {"connections": len(connections), "events": 0, "frames": count, "stderr": 0, "type": "end"}
    )
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def write_db(path: Path, frames: Frames, protocol_version: int = 1) -> Path:
    """A SQLite recording of one connection, written row by row (index columns left empty,
    as a recorder that could not index a frame leaves them)."""
    insert_frames(
        path,
        [
            Capture(d, raw, ts=1767225600.0 + seq / 1000, mono_ns=seq * 1_000_000)
            for seq, (d, raw) in enumerate(frames, 1)
        ],
        connection={
            "id": 1,
            "started_at": 1767225600.0,
            "transport": "stdio",
            "protocol_version": protocol_version,
        },
    )
    return path


def client_lines(frames: Frames, *seqs: int) -> bytes:
    """The raw bytes of the frames at ``seqs`` (1-based), concatenated."""
    return b"".join(frames[s - 1][1] for s in seqs)
