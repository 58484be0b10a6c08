"""``acp-proxy tail DB``: follow a recording in the terminal as it is recorded.

Every poll asks the store for the frames committed since the last one through the
inspector's live push (:func:`acp_proxy.web.store.follow_frames` over
:class:`~acp_proxy.store.live_tail.LiveTail`), so with several writers (a fleet recording
into one PostgreSQL database) every frame is printed once, in commit order per connection.
With ``--conversation`` each connection's frames feed a
:class:`~acp_proxy.acp.model.ConnectionModel` and messages are printed as ``show`` prints
them. A lost database (a PostgreSQL restart) is one line, and the tail goes on where it
was when the database is back.
"""

from __future__ import annotations

import re
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

from acp_proxy.acp.model import ConnectionModel
from acp_proxy.commands.common import RECORDING_ARG, terminal_options
from acp_proxy.console import Terminal
from acp_proxy.console import fit as fit_width
from acp_proxy.report.conversation import Renderer, TextShow, feed_event, with_events
from acp_proxy.store.engine import RecordingUrl, location_name
from acp_proxy.store.live_tail import LiveTail
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError
from acp_proxy.store.transport_events import PlacedEvent, placed_events
from acp_proxy.web import store, views

POLL_SECONDS = 0.2
"""How often the store is asked for new frames (a frame shows within about this long)."""

RETRY_SECONDS = 1.0
"""How often a lost or not yet created store is tried again."""

ENDS_EVERY = 5
"""With ``--conversation`` or ``--errors``, every this many polls the open connections are
asked whether they ended (what an ended connection still holds, and the findings of the
end-of-connection rules, are printed then)."""

BATCH = 500
"""The most frames one query returns (a poll repeats until it has them all)."""

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)([smhd])$")
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def parse_since(text: str | None, now: float) -> float | None:
    """``--since``: a duration back from now (``30s``, ``10m``, ``2h``, ``1d``) or ``all``,
    as a wall-clock time (``None``: only what is recorded from now on)."""
    if text is None:
        return None
    if text == "all":
        return float("-inf")
    match = _DURATION.match(text.strip())
    if match is None:
        raise click.BadParameter(f"{text!r}: give a duration (30s, 10m, 2h, 1d) or 'all'")
    return now - float(match.group(1)) * _UNITS[match.group(2)]


def fit(line: str, width: int) -> str:
    """One line of at most ``width`` characters (control characters shown escaped)."""
    line = line.replace("\r", "\\r").replace("\n", "\\n").replace("\t", " ")
    return fit_width(line, max(1, width))


@dataclass
class _Connection:
    """What the tail knows of one connection: whether it is shown, and its conversation."""

    shown: bool
    model: ConnectionModel | None = None
    show: TextShow | None = None
    fed_seq: int = 0
    finished: bool = False
    events_fed: int = 0


@dataclass
class TailOptions:
    """The filters and the output mode of one ``tail``."""

    connection_id: int | None = None
    session_id: str | None = None
    method: str | None = None
    host: str | None = None
    errors: bool = False
    conversation: bool = False
    since: float | None = None


@dataclass
class Tail:
    """Follows one store and prints what matches (see the module docstring)."""

    where: Path | RecordingUrl
    opts: TailOptions
    colour: bool
    tail: LiveTail | None = None
    connections: dict[int, _Connection] = field(default_factory=dict)
    findings_seen: dict[int, int] = field(default_factory=dict)
    was_missing: bool = False
    polls: int = 0

    def __post_init__(self) -> None:
        self.renderer = Renderer(Terminal(colour=self.colour))

    def s(self, text: str, **style: Any) -> str:
        return click.style(text, **style) if self.colour else text

    def echo(self, line: str) -> None:
        click.echo(line, color=self.colour)

    def poll(self) -> None:
        """Print everything committed since the last poll."""
        with store.read_connection(self.where) as reader:
            if self.tail is None:
                # a store created after the tail started: all of it is new
                fresh = self.opts.since is not None or self.was_missing
                start = 0 if fresh else reader.max_frame_id()
                self.tail = LiveTail(horizon=start)
            flt = store.FrameFilter(
                connection_id=self.opts.connection_id,
                session_id=None if self.opts.conversation else self.opts.session_id,
                method=None if self.opts.conversation else self.opts.method,
            )
            while True:
                page = store.follow_frames(
                    reader, flt, self.tail, reader.max_frame_id(), limit=BATCH
                )
                changed: set[int] = set()
                for frame in page["frames"]:
                    if self.opts.since is not None and frame["ts"] < self.opts.since:
                        continue
                    if not self._connection(reader, frame["connection_id"]).shown:
                        continue
                    changed.add(frame["connection_id"])
                    if not self.opts.conversation:
                        self._frame(frame)
                if self.opts.conversation:
                    for cid in sorted(changed):
                        self._converse(reader, cid)
                if self.opts.errors:
                    for cid in sorted(changed):
                        self._findings(reader, cid)
                if not page["has_more_after"]:
                    break
            self.polls += 1
            if (self.opts.conversation or self.opts.errors) and self.polls % ENDS_EVERY == 0:
                self._ended(reader)

    def _connection(self, reader: RecordingReader, cid: int) -> _Connection:
        known = self.connections.get(cid)
        if known is not None:
            return known
        row = reader.connection(cid, sizes=False)
        shown = self.opts.host is None or row.host == self.opts.host
        known = _Connection(shown)
        if shown and self.opts.conversation:
            known.model = ConnectionModel(cid)
            known.show = TextShow(self.renderer, self.opts.session_id)
            self.renderer.connection_header(row)
        self.connections[cid] = known
        return known

    def _frame(self, f: dict[str, Any]) -> None:
        unpaired = f["kind"] == "response" and f["pair"] is not None and f["pair"]["id"] is None
        if self.opts.errors and not (f["error"] or f["kind"] == "invalid" or unpaired):
            return
        width = shutil.get_terminal_size((100, 24)).columns
        arrow = "->" if f["direction"] == "c2a" else "<-"
        clock = (
            time.strftime("%H:%M:%S", time.localtime(f["ts"])) + f".{int(f['ts'] % 1 * 1000):03d}"
        )
        head = f"{clock} c{f['connection_id']} {f['seq']:>5} {arrow} {f['label']}"
        pair = f["pair"]
        if pair is not None and pair["role"] == "response" and pair["latency_ms"] is not None:
            head += f" {pair['latency_ms']:.1f}ms"
        note = "error" if f["error"] else ("no request" if unpaired else "")
        said = "(no request) " if note == "no request" else ""  # an error's label says error
        plain = fit(f"{head}  {said}{f['preview']}", width)
        if not self.colour:
            self.echo(plain)
            return
        # colour the parts of the fitted line that are still there
        rest = plain[len(head) :] if plain.startswith(head) else ""
        shown_head = head if rest or plain == head else plain
        styled = self.s(shown_head[: len(clock)], dim=True) + self.s(
            shown_head[len(clock) :],
            fg="red" if note else ("green" if f["direction"] == "c2a" else "blue"),
            bold=True,
        )
        self.echo(styled + (self.s(rest, fg="red") if note else rest))

    def _converse(self, reader: RecordingReader, cid: int) -> None:
        conn = self.connections[cid]
        assert conn.model is not None and conn.show is not None
        model, show = conn.model, conn.show
        frames = list(reader.wire_frames(cid, after_seq=conn.fed_seq))
        events = placed_events(reader, cid)[conn.events_fed :]  # transport events, as show
        for frame in with_events(frames, events):
            if isinstance(frame, PlacedEvent):
                conn.events_fed += 1
                boundaries = feed_event(model, frame)
            else:
                conn.fed_seq = frame.seq
                boundaries = model.feed(frame)
            self.renderer.protocol_version = model.protocol_version
            for sid in boundaries:
                tl = model.connection if sid is None else model.sessions.get(sid)
                if tl is not None:
                    show.flush(tl)

    def _ended(self, reader: RecordingReader) -> None:
        for cid, conn in self.connections.items():
            if not conn.shown or conn.finished or reader.connection(cid, sizes=False).running:
                continue
            conn.finished = True
            if self.opts.errors:  # the end-of-connection rules (a request never answered...)
                self._findings(reader, cid)
            if conn.model is None or conn.show is None:
                continue
            self._converse(reader, cid)  # frames committed before the end
            conn.model.finish()
            for tl in conn.model.timelines():
                conn.show.flush(tl, force=True)

    def _findings(self, reader: RecordingReader, cid: int) -> None:
        found = views.findings(self.where, reader, cid)["findings"]
        width = shutil.get_terminal_size((100, 24)).columns
        for item in found[self.findings_seen.get(cid, 0) :]:
            seqs = ",".join(str(s) for s in item["seqs"][:5])
            line = fit(
                f"finding c{cid} {seqs}: {item.get('tier')} {item.get('rule')}: "
                f"{item.get('reason')}",
                width,
            )
            colour = "red" if item.get("tier") == "error" else "yellow"
            self.echo(self.s(line, fg=colour))
        self.findings_seen[cid] = len(found)


def _say(text: str) -> None:
    click.echo(f"acp-proxy tail: {text}", err=True)


def _missing(exc: RecordingError) -> bool:
    text = str(exc)
    return (
        text.startswith("no such recording")
        or "file is empty" in text
        or "holds no acp-proxy recording" in text  # a PostgreSQL database before its tables
    )


@click.command("tail")
@RECORDING_ARG
@click.option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option("--session", "-s", "session_id", help="Only this session.")
@click.option("--method", "-m", help="Only frames of this method (requests and their responses).")
@click.option("--host", help="Only connections recorded on this host.")
@click.option(
    "--errors", is_flag=True, help="Only findings, error responses, invalid and unpaired frames."
)
@click.option(
    "--conversation", is_flag=True, help="Print messages as `acp-proxy show` does, not frames."
)
@click.option(
    "--since",
    metavar="DURATION",
    help="Start this far back (30s, 10m, 2h, 1d, or 'all') instead of at the end.",
)
@terminal_options(wide=False, paged=False)
def tail_command(
    recording_path: Path,
    connection_id: int | None,
    session_id: str | None,
    method: str | None,
    host: str | None,
    errors: bool,
    conversation: bool,
    since: str | None,
    terminal: Terminal,
) -> None:
    """Follow DB as it is recorded: one line per frame, printed within 0.5 s of its commit.

    DB is a file or a postgresql:// URL, written by any number of proxies at once. A file
    not created yet is waited for; a database that goes away (a restart) is one line, and
    the tail goes on when it is back. Colour on a terminal (NO_COLOR or --color=never
    disables it). Ctrl-C stops it.

    \b
    Examples:
      acp-proxy tail session.db
      acp-proxy tail session.db --conversation --session sess_abc123
      acp-proxy tail postgresql://me@db.internal/acp --host build-7 --errors
    An agent named like a subcommand runs with --: acp-proxy --record s.db -- tail
    """
    opts = TailOptions(
        connection_id,
        session_id,
        method,
        host,
        errors,
        conversation,
        parse_since(since, time.time()),
    )
    where = store.location(recording_path)
    follower = Tail(where, opts, terminal.colour)
    name = location_name(recording_path)
    lost: str | None = None
    started = False
    try:
        while True:
            try:
                follower.poll()
            except RecordingError as exc:
                if not started and not isinstance(where, RecordingUrl) and not _missing(exc):
                    raise click.ClickException(str(exc)) from None
                follower.was_missing = follower.was_missing or (not started and _missing(exc))
                if lost is None:
                    lost = str(exc)
                    wait = "waiting for it" if _missing(exc) else "trying again every second"
                    _say(f"{lost}; {wait} (Ctrl-C stops)")
                time.sleep(RETRY_SECONDS)
                continue
            if lost is not None and started:
                _say(f"{name} is back; following again")
            lost, started = None, True
            sys.stdout.flush()
            time.sleep(POLL_SECONDS)
    except KeyboardInterrupt:
        sys.stdout.flush()
    except BrokenPipeError:
        sys.exit(0)
