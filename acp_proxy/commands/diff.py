"""``acp-proxy diff A B``: what changed between two recorded connections (exit 1 if anything).

A thin layer over :mod:`acp_proxy.acp.diff`: each connection is read twice, streamed (once
for the signatures and latencies the alignment needs, once to compare the aligned frames'
JSON), so memory stays bounded by the alignment's limit, not by the frames' bytes.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import orjson

from acp_proxy.acp.diff import (
    LCS_CELLS,
    Change,
    ConnectionSketch,
    Opcode,
    Signatures,
    TimingRegression,
    align,
    compare_aligned,
    describe_signature,
    timing_regressions,
)
from acp_proxy.acp.jsonpaths import Difference, parse_path, short
from acp_proxy.commands.common import RECORDING_PATH, fmt_duration, recording
from acp_proxy.record.reader import FrameRow, get_connection, iter_frames, list_connections
from acp_proxy.record.schema import RecordingError


def _frames(db: sqlite3.Connection, connection_id: int) -> Iterator[FrameRow]:
    """The one place this command reads frames: one connection, in order, streamed."""
    return iter_frames(db, connection_id=connection_id)


def _pick_connection(db: sqlite3.Connection, wanted: int | None, path: Path) -> int:
    if wanted is not None:
        return get_connection(db, wanted).id
    connections = list_connections(db)
    if not connections:
        raise RecordingError(f"{path}: no connections recorded")
    return connections[0].id


def _sketch(db: sqlite3.Connection, connection_id: int, table: Signatures) -> ConnectionSketch:
    sketch = ConnectionSketch(table)
    for f in _frames(db, connection_id):
        sketch.add(
            seq=f.seq,
            frame_id=f.id,
            direction=f.direction,
            kind=f.kind,
            method=f.method,
            update_kind=f.update_kind,
            rpc_id=f.rpc_id,
            mono_ns=f.mono_ns,
        )
    sketch.finish()
    return sketch


@dataclass(slots=True)
class Side:
    """One side of the comparison: where it came from and its sketch."""

    path: Path
    connection_id: int
    sketch: ConnectionSketch

    def frame(self, index: int) -> dict[str, Any]:
        return {
            "seq": self.sketch.seqs[index],
            "frame": self.sketch.frame_ids[index],
            "what": describe_signature(self.sketch.signature(index)),
        }


def _member_json(d: Difference) -> dict[str, Any]:
    out: dict[str, Any] = {"path": d.path}
    if d.missing != "recorded":
        out["old"] = d.recorded
    if d.missing != "live":
        out["new"] = d.live
    return out


def _member_text(d: Difference) -> str:
    if d.missing == "recorded":
        return f"{d.path}: added {short(d.live)}"
    if d.missing == "live":
        return f"{d.path}: removed (was {short(d.recorded)})"
    return f"{d.path}: {short(d.recorded)} → {short(d.live)}"


@click.command("diff")
@click.argument("a_path", type=RECORDING_PATH, metavar="A")
@click.argument("b_path", type=RECORDING_PATH, metavar="B")
@click.option(
    "--connection",
    "-c",
    "connections",
    type=int,
    multiple=True,
    help="The connection of A, then of B (one value: the same id in both). "
    "Default: the first connection of each.",
)
@click.option(
    "--ignore",
    "ignores",
    multiple=True,
    metavar="PATH",
    help="Also ignore this member (dotted path as in replay: `params.cwd`, "
    "`update.content.*.text`; relative to params unless it starts with "
    "params/result/error). Repeatable.",
)
@click.option(
    "--timing-threshold",
    type=click.FloatRange(min=0),
    default=1000.0,
    show_default=True,
    metavar="MS",
    help="Report an aligned exchange (a turn for session/prompt) that got slower by more "
    "than MS milliseconds.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document for scripts.")
def diff_command(
    a_path: Path,
    b_path: Path,
    connections: tuple[int, ...],
    ignores: tuple[str, ...],
    timing_threshold: float,
    as_json: bool,
) -> None:
    """Compare two recorded connections; exit 1 when they differ, 0 when equal.

    \b
    Frames are aligned by (direction, kind, method, update variant) with a longest
    common subsequence; JSON-RPC ids, sessionIds, entity ids (messageId, toolCallId...)
    and timestamps are ignored. Prints the frames only B has (added), only A has
    (removed), aligned frames whose JSON differs (changed, member by member), and
    exchanges that got slower than --timing-threshold. A and B may be the same file
    with two --connection values. Without --connection: the first connection of each.
    Past 20k x 20k differing frames the alignment is greedy (linear) and says so.
    Examples:
      acp-proxy diff yesterday.db today.db
      acp-proxy diff session.db session.db -c 1 -c 2 --ignore prompt.*.text
      acp-proxy diff a.db b.db --json | jq .summary
    """
    if len(connections) > 2:
        raise click.UsageError("--connection at most twice (one for A, one for B)")
    try:
        paths = [parse_path(p) for p in ignores]
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--ignore") from None
    wanted_a = connections[0] if connections else None
    wanted_b = connections[-1] if connections else None
    table = Signatures()
    threshold_ns = int(timing_threshold * 1_000_000)
    with recording(a_path) as db_a, recording(b_path) as db_b:
        a = Side(a_path, 0, ConnectionSketch(table))
        b = Side(b_path, 0, ConnectionSketch(table))
        a.connection_id = _pick_connection(db_a, wanted_a, a_path)
        b.connection_id = _pick_connection(db_b, wanted_b, b_path)
        a.sketch = _sketch(db_a, a.connection_id, table)
        b.sketch = _sketch(db_b, b.connection_id, table)
        alignment = align(a.sketch.sigs, b.sketch.sigs)
        changes = list(
            compare_aligned(
                alignment,
                (f.raw for f in _frames(db_a, a.connection_id)),
                (f.raw for f in _frames(db_b, b.connection_id)),
                paths,
            )
        )
    slower = timing_regressions(alignment, a.sketch, b.sketch, threshold_ns)
    removed = [
        i for tag, i1, i2, _j1, _j2 in alignment.opcodes if tag == "delete" for i in range(i1, i2)
    ]
    added = [
        j for tag, _i1, _i2, j1, j2 in alignment.opcodes if tag == "insert" for j in range(j1, j2)
    ]
    differ = bool(removed or added or changes or slower)
    if as_json:
        _print_json(a, b, alignment.exact, alignment.note, removed, added, changes, slower, differ)
    else:
        _print_text(a, b, alignment.note, alignment.opcodes, changes, slower, differ)
    if differ:
        sys.exit(1)


def _summary(removed: int, added: int, changed: int, slower: int, differ: bool) -> dict[str, Any]:
    return {
        "removed": removed,
        "added": added,
        "changed": changed,
        "slower": slower,
        "equal": not differ,
    }


def _print_json(
    a: Side,
    b: Side,
    exact: bool,
    note: str | None,
    removed: list[int],
    added: list[int],
    changes: list[Change],
    slower: list[TimingRegression],
    differ: bool,
) -> None:
    doc: dict[str, Any] = {
        "a": {"recording": str(a.path), "connection": a.connection_id, "frames": len(a.sketch)},
        "b": {"recording": str(b.path), "connection": b.connection_id, "frames": len(b.sketch)},
        "alignment": {"exact": exact, "lcs_cells_limit": LCS_CELLS, "note": note},
        "removed": [a.frame(i) for i in removed],
        "added": [b.frame(j) for j in added],
        "changed": [
            {
                "a": a.frame(c.a),
                "b": b.frame(c.b),
                "members": [_member_json(d) for d in c.members],
            }
            for c in changes
        ],
        "timing": [
            {
                "what": t.what,
                "method": t.method,
                "a": a.frame(t.a),
                "b": b.frame(t.b),
                "a_ms": t.a_ns / 1e6,
                "b_ms": t.b_ns / 1e6,
            }
            for t in slower
        ],
        "summary": _summary(len(removed), len(added), len(changes), len(slower), differ),
    }
    click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())


def _print_text(
    a: Side,
    b: Side,
    note: str | None,
    opcodes: list[Opcode],
    changes: list[Change],
    slower: list[TimingRegression],
    differ: bool,
) -> None:
    click.echo(
        f"--- {a.path} connection {a.connection_id} ({len(a.sketch)} frames)\n"
        f"+++ {b.path} connection {b.connection_id} ({len(b.sketch)} frames)"
    )
    if note:
        click.echo(f"note: {note}")
    by_a = {c.a: c for c in changes}
    removed = added = 0
    for tag, i1, i2, j1, j2 in opcodes:
        if tag == "delete":
            for i in range(i1, i2):
                removed += 1
                what = describe_signature(a.sketch.signature(i))
                click.echo(f"- removed  #{a.sketch.seqs[i]}  {what}")
        elif tag == "insert":
            for j in range(j1, j2):
                added += 1
                what = describe_signature(b.sketch.signature(j))
                click.echo(f"+ added    #{b.sketch.seqs[j]}  {what}")
        else:
            for i in range(i1, i2):
                change = by_a.get(i)
                if change is None:
                    continue
                what = describe_signature(a.sketch.signature(i))
                click.echo(f"~ changed  #{a.sketch.seqs[i]} → #{b.sketch.seqs[change.b]}  {what}")
                for d in change.members:
                    click.echo(f"      {_member_text(d)}")
    for t in slower:
        click.echo(
            f"! slower   #{a.sketch.seqs[t.a]} → #{b.sketch.seqs[t.b]}  {t.what} {t.method}: "
            f"{fmt_duration(t.a_ns / 1e9)} → {fmt_duration(t.b_ns / 1e9)}"
        )
    verdict = "differ" if differ else "equal"
    click.echo(
        f"summary: {added} added, {removed} removed, {len(changes)} changed, "
        f"{len(slower)} slower: {verdict}"
    )
