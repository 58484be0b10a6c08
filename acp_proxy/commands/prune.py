"""``acp-proxy prune DB --older-than 30d``: delete whole connections that ended before a cut.

The rule and the work are :mod:`acp_proxy.store.retention` (one rule for both engines and
for docs/fleet.md's SQL); this module parses the age, opens the store for writing (which
migrates an old one, and on PostgreSQL converts it to daily partitions) and says what went.
"""

from __future__ import annotations

import time
from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_ARG, fmt_bytes, recording
from acp_proxy.store.retention import Pruned, parse_age, prune


class Age(click.ParamType):  # type: ignore[type-arg]
    """``30d``, ``12h``, ``90m``: seconds (a bad one is one usage line, exit 2)."""

    name = "duration"

    def convert(
        self, value: object, param: click.Parameter | None, ctx: click.Context | None
    ) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_age(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


@click.command("prune")
@RECORDING_ARG
@click.option(
    "--older-than",
    "age",
    type=Age(),
    required=True,
    metavar="DURATION",
    help="Prune connections that ended longer ago than this: 30d, 12h, 90m.",
)
@click.option("--dry-run", is_flag=True, help="Only count what would go; change nothing.")
@click.option("--host", default=None, metavar="H", help="Only connections recorded on host H.")
def prune_command(recording_path: Path, age: int, dry_run: bool, host: str | None) -> None:
    """Delete the connections that ended before a cut, with everything of theirs.

    A connection goes whole, with its frames, stderr lines, events and search index
    entries, in one transaction; one still recording is never pruned (one whose proxy
    was killed ends at its last heartbeat). On PostgreSQL a day's partition whose every
    row goes is dropped whole. The same rule as docs/fleet.md's SQL: ended before now
    minus DURATION.

    \b
    Examples:
      acp-proxy prune fleet.db --older-than 30d --dry-run
      acp-proxy prune postgresql://acp@db/acp --older-than 90d --host build-7
    """
    cut = time.time() - age
    with recording(recording_path, writable=True) as db:
        done = prune(db, cut, host=host, dry_run=dry_run)
    for line in summary(done, cut, dry_run=dry_run, host=host):
        click.echo(line)


def summary(done: Pruned, cut: float, *, dry_run: bool, host: str | None) -> list[str]:
    """What a prune removed, as lines (each within 100 columns but for partition names)."""
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(cut))
    which = f" of host {host}" if host is not None else ""
    if not done.connections:
        return [f"nothing to prune: no connection{which} ended before {when}"]
    verb = "would prune" if dry_run else "pruned"
    lines = [
        f"{verb} {done.connections} connection(s){which} that ended before {when}",
        f"  {done.frames} frame(s) ({fmt_bytes(done.bytes)}), {done.stderr_lines} stderr "
        f"line(s), {done.events} event(s), {done.search_docs} search document(s)",
    ]
    if done.partitions:
        dropped = "would be dropped" if dry_run else "dropped"
        lines.append(
            f"  {len(done.partitions)} partition(s) {dropped}: {', '.join(done.partitions)}"
        )
    return lines
