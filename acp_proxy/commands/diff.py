"""``acp-proxy diff A B``: what changed between two recorded connections (exit 1 if anything).

A thin layer over :mod:`acp_proxy.analysis.compare` (which streams both connections through
the pure alignment of :mod:`acp_proxy.acp.diff`): options, and the text output.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from acp_proxy.acp.diff import Signature, describe_signature
from acp_proxy.acp.jsonpaths import Difference, short
from acp_proxy.analysis.compare import Comparison, compare_connections, pick_connection
from acp_proxy.commands.common import (
    RECORDING_PATH,
    fmt_duration,
    ignore_paths,
    recording,
    slower_limit,
    terminal_options,
)
from acp_proxy.console import Terminal, arrow
from acp_proxy.store.schema import RecordingError


def _member_text(d: Difference) -> str:
    path = d.path if len(d.path) <= 60 else f"{d.path[:29]}…{d.path[-30:]}"  # 900 deep
    if d.missing == "recorded":
        return f"{path}: added {short(d.live)}"
    if d.missing == "live":
        return f"{path}: removed (was {short(d.recorded)})"
    return f"{path}: {short(d.recorded)} → {short(d.live)}"


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
    "than MS milliseconds (reported only: see --fail-slower).",
)
@click.option(
    "--fail-slower",
    "fail_slower",
    metavar="PCT%|MS",
    help="Also exit 1 when an exchange or turn got slower by more than PCT percent of A's "
    "time (50%) or by more than MS milliseconds (500). initialize never counts.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON document for scripts.")
@terminal_options()
def diff_command(
    a_path: Path,
    b_path: Path,
    connections: tuple[int, ...],
    ignores: tuple[str, ...],
    timing_threshold: float,
    fail_slower: str | None,
    as_json: bool,
    terminal: Terminal,
) -> None:
    """Compare two recorded connections; exit 1 when they differ, 0 when equal.

    \b
    Equal frames are aligned first, then the rest by (direction, kind, method, update
    variant), each with a longest common subsequence, the client's frames apart from the
    agent's (how the two directions interleaved is not a difference); JSON-RPC ids,
    sessionIds, entity ids (messageId, toolCallId...), timestamps and _meta trace context
    are ignored. Prints the frames only B has (added), only A has (removed), aligned frames
    whose JSON differs (changed, member by member), and exchanges and turns (prompt to
    idle in v2, to the prompt's response in v1) that got slower than --timing-threshold:
    those are a difference only past --fail-slower. A and B may be the same file with two
    --connection values. Without --connection: the first connection of each. Past 20k x
    20k differing frames whole turns are aligned first, then the frames of those that differ;
    only if that is still too big is it greedy (linear), and says so. Frames read
    "-> request session/prompt" (-> client to agent, <- agent to client; --json keeps
    c2a/a2c). On a terminal: coloured, cut to its width (--wide: whole lines).
    Examples:
      acp-proxy diff yesterday.db today.db
      acp-proxy diff session.db session.db -c 1 -c 2 --ignore prompt.*.text
      acp-proxy diff a.db b.db --fail-slower 50%
      acp-proxy diff a.db b.db --json | jq .summary
    """
    if len(connections) > 2:
        raise click.UsageError("--connection at most twice (one for A, one for B)")
    paths = ignore_paths(ignores)
    limit = slower_limit(fail_slower)
    wanted_a = connections[0] if connections else None
    wanted_b = connections[-1] if connections else None
    with recording(a_path) as db_a, recording(b_path) as db_b:
        ids = []
        for db, wanted, path in ((db_a, wanted_a, a_path), (db_b, wanted_b, b_path)):
            try:
                ids.append(pick_connection(db, wanted))
            except RecordingError as exc:
                raise click.ClickException(f"{path}: {exc}") from None
        result = compare_connections(
            db_a,
            ids[0],
            db_b,
            ids[1],
            ignores=paths,
            threshold_ns=int(timing_threshold * 1_000_000),
            fail_slower=limit,
        )
    if as_json:
        doc = result.to_json(str(a_path), str(b_path))
        click.echo(orjson.dumps(doc, option=orjson.OPT_INDENT_2).decode())
    else:
        _print_text(terminal, a_path, b_path, result, failing=limit is not None)
    if result.differ:
        sys.exit(1)


def _signature(sig: Signature) -> str:
    """A frame's signature as text output reads it: ``-> request session/prompt``."""
    return f"{arrow(sig[0])} {describe_signature(sig).partition(' ')[2]}"


def _print_text(
    terminal: Terminal, a_path: Path, b_path: Path, result: Comparison, *, failing: bool
) -> None:
    def echo(line: str, fg: str | None = None) -> None:
        click.echo(terminal.fit(terminal.style(line, fg)), color=terminal.colour)

    a, b = result.a, result.b
    click.echo(
        f"--- {a_path} connection {result.a_connection} ({len(a)} frames)\n"
        f"+++ {b_path} connection {result.b_connection} ({len(b)} frames)"
    )
    if result.alignment.note:
        click.echo(f"note: {result.alignment.note}")
    by_a = {c.a: c for c in result.changes}
    for i, j in result.alignment.rows:
        if j is None:
            assert i is not None
            echo(f"- removed  #{a.seqs[i]}  {_signature(a.signature(i))}", "red")
        elif i is None:
            echo(f"+ added    #{b.seqs[j]}  {_signature(b.signature(j))}", "green")
        elif (change := by_a.get(i)) is not None:
            what = _signature(a.signature(i))
            echo(f"~ changed  #{a.seqs[i]} → #{b.seqs[j]}  {what}", "yellow")
            for d in change.members:
                echo(f"      {_member_text(d)}")
    for t in result.slower:
        mark = "!" if t.fails else " "
        echo(
            f"{mark} slower   #{a.seqs[t.a]} → #{b.seqs[t.b]}  {t.what} {t.method}: "
            f"{fmt_duration(t.a_ns / 1e9)} → {fmt_duration(t.b_ns / 1e9)}"
            + ("" if t.fails else " (reported, not a failure)"),
            "red" if t.fails else None,
        )
    verdict = "differ" if result.differ else "equal"
    if not result.slower:
        past = ""
    elif failing:
        past = f" ({len(result.failing_slower)} past --fail-slower)"
    else:
        past = " (reported only)"
    click.echo(
        f"summary: {len(result.added)} added, {len(result.removed)} removed, "
        f"{len(result.changes)} changed, {len(result.slower)} slower{past}: {verdict}"
    )
