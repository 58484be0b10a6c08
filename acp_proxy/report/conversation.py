"""A recording as a conversation a person can read: the text ``acp-proxy show`` prints.

Frames are streamed from the recording through :class:`~acp_proxy.acp.model.ConnectionModel`;
in text mode each session's timeline is printed and forgotten at every turn boundary, so
memory stays flat however long the recording is (:func:`print_conversation`).
:func:`print_json` prints the reconstructed state (one document; it holds one connection's
state at a time), :func:`print_raw` every frame as recorded. Lines fit the
:class:`~acp_proxy.console.Terminal` (message text wrapped, the rest cut with ``…``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

import orjson

from acp_proxy.acp.model import ConnectionModel
from acp_proxy.acp.timeline import Entity, Event, Exchange, Item, SessionTimeline
from acp_proxy.console import Terminal, arrow, cells, wrap
from acp_proxy.report.text import fmt_frame_what, fmt_time
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.rows import ConnectionRow, display_name
from acp_proxy.store.transport_events import PlacedEvent, placed_events
from acp_proxy.wire.frame import Frame

MAX_BUFFERED_ITEMS = 2000
"""A session without turn boundaries is printed in slices of at most this many items."""

INDENT = "    "


def _json(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:  # integers beyond 64 bits, which JSON allows
        return json.dumps(value, default=repr)


def _short(value: Any, limit: int = 200) -> str:
    text = value if isinstance(value, str) else _json(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ms(ns: int | None) -> str:
    if ns is None:
        return "pending"
    ms = ns / 1e6
    return f"{ms:.1f}ms" if ms < 1000 else f"{ms / 1000:.2f}s"


def _indent_block(text: str, prefix: str = INDENT + "  ") -> list[str]:
    return [prefix + line for line in text.rstrip("\n").split("\n")] if text else []


def _content_lines(blocks: list[Any] | None) -> list[str]:
    """Content blocks as text: text verbatim, other blocks as a short tag."""
    out: list[str] = []
    pending_text: list[str] = []  # consecutive text blocks (streamed chunks) read as one
    for block in blocks or ():
        inner = block.get("content") if isinstance(block, dict) else None
        if isinstance(block, dict) and block.get("type") == "content" and isinstance(inner, dict):
            block = inner
        if (
            isinstance(block, dict)
            and block.get("type") == "text"
            and isinstance(block.get("text"), str)
        ):
            pending_text.append(block["text"])
            continue
        if pending_text:
            out.extend("".join(pending_text).split("\n"))
            pending_text = []
        out.extend(_block_lines(block))
    if pending_text:
        out.extend("".join(pending_text).split("\n"))
    return out


def _block_lines(block: Any) -> list[str]:
    if not isinstance(block, dict):
        return [_short(block)]
    btype = block.get("type")
    if btype == "text" and isinstance(block.get("text"), str):
        return str(block["text"]).split("\n")
    if btype == "content":  # a tool call content item wrapping a content block
        return _block_lines(block.get("content"))
    if btype == "diff":
        return [f"[diff {block.get('path')}]"]
    if btype == "terminal":
        return [f"[terminal {block.get('terminalId')}]"]
    if btype == "resource_link":
        return [f"[link {block.get('uri')}]"]
    if btype == "resource":
        res = block.get("resource")
        uri = res.get("uri") if isinstance(res, dict) else None
        return [f"[resource {uri}]"]
    if btype in ("image", "audio"):
        return [f"[{btype} {block.get('mimeType', '')}]".replace(" ]", "]")]
    return [_short(block)]


def _print_line(line: str) -> None:
    sys.stdout.write(line + "\n")


class Renderer:
    """Turns timeline items into styled lines (plain when colour is off) that fit the
    terminal, and writes them with ``write`` (one line, no newline)."""

    def __init__(self, terminal: Terminal, write: Callable[[str], None] = _print_line) -> None:
        self.terminal = terminal
        self.colour = terminal.colour
        self.write = write
        self.protocol_version: int | None = None

    def s(self, text: str, fg: str | None = None, **style: bool) -> str:
        return self.terminal.style(text, fg, **style)

    def echo(self, line: str = "") -> None:
        self.write(self.terminal.fit(line))

    def body(
        self, prefix: str, lines: Iterable[str], style: dict[str, Any] | None = None
    ) -> list[str]:
        """Message text under an item: each line after ``prefix``, wrapped to the terminal's
        width (text a person reads is wrapped, not cut), styled as ``style`` says."""
        room = None if self.terminal.width is None else self.terminal.width - cells(prefix)
        out: list[str] = []
        for line in lines:
            parts = wrap(line, room)
            out.extend(prefix + (self.s(p, **style) if style else p) for p in parts)
        return out

    def connection_header(self, row: ConnectionRow) -> None:
        parts = [f"connection {row.id}", row.transport, fmt_time(row.started_at)]
        if row.protocol_version is not None:
            parts.append(f"protocol v{row.protocol_version}")
        agent = display_name(row.agent_info) or (
            " ".join(row.agent_command) if row.agent_command else None
        )
        if agent:
            parts.append(f"agent: {agent}")
        client = display_name(row.client_info)
        if client:
            parts.append(f"client: {client}")
        if row.label:
            parts.append(f"label: {row.label}")
        parts.append(row.state_reason)  # running, exit 0, ended (unknown end)...
        self.echo(self.s("== " + " · ".join(parts), bold=True))

    def session_header(self, sid: str) -> None:
        self.echo(self.s(f"-- session {sid}", fg="cyan", bold=True))

    def items(self, items: list[Item]) -> None:
        for item in items:
            for line in self.item_lines(item):
                self.echo(line)

    def item_lines(self, item: Item) -> list[str]:
        if isinstance(item, Entity):
            lines = self.entity_lines(item)
        elif isinstance(item, Exchange):
            lines = self.exchange_lines(item)
        else:
            lines = self.event_lines(item)
        if item.replayed and lines:
            lines[0] += self.s("  (replayed)", dim=True)
        return lines

    def _seq(self, seq: int | None) -> str:
        return self.s(f"{seq if seq is not None else '':>6} ", dim=True)

    def entity_lines(self, e: Entity) -> list[str]:
        head = self._seq(e.first_seq)
        ident = "" if e.synthetic_id or not e.id else self.s(f" [{e.id}]", dim=True)
        more = self.s(" (continued)", dim=True) if e.continued else ""
        body = _content_lines(e.content)
        if e.type == "user_message":
            first = head + self.s("user", fg="green", bold=True) + ident + more
            return [first, *self.body(INDENT + "  ", body)]
        if e.type == "agent_message":
            first = head + self.s("agent", fg="blue", bold=True) + ident + more
            return [first, *self.body(INDENT + "  ", body)]
        if e.type == "agent_thought":
            first = head + self.s("thought", fg="magenta", italic=True) + ident + more
            return [first, *self.body(INDENT + "  " + self.s("│ ", dim=True), body, {"dim": True})]
        if e.type == "tool_call":
            f = e.fields
            status = str(f.get("status", "?"))
            colour = {"completed": "green", "failed": "red", "in_progress": "yellow"}.get(status)
            title = f.get("title") or f.get("name")
            label = f" {title}" if title else ""
            label += f" ({f['kind']})" if f.get("kind") else ""
            first = (
                head
                + self.s("tool", fg="yellow", bold=True)
                + ident
                + f"{label} "
                + self.s(status, fg=colour)
                + more
            )
            lines = [first]
            for loc in f.get("locations") or ():
                if isinstance(loc, dict):
                    lines.append(INDENT + "  @ " + str(loc.get("path")))
            lines.extend(INDENT + "  " + self.s("> ", dim=True) + line for line in body)
            return lines
        if e.type == "terminal":
            f = e.fields
            exit_status = f.get("exitStatus")
            state = "running"
            if isinstance(exit_status, dict):
                code = exit_status.get("exitCode")
                sig = exit_status.get("signal")
                state = (
                    f"exit {code}" if code is not None else (f"killed {sig}" if sig else "exited")
                )
            first = head + self.s("terminal", fg="yellow", bold=True) + ident
            first += f" $ {f.get('command', '')} " + self.s(state, dim=True) + more
            out_text = e.output_text()
            return [
                first,
                *(
                    INDENT + "  " + self.s("| ", dim=True) + ln
                    for ln in out_text.rstrip("\n").split("\n")
                    if out_text
                ),
            ]
        if e.type == "plan":
            plan = e.fields.get("plan")
            first = head + self.s("plan", fg="cyan", bold=True) + ident + more
            if e.removed:
                return [first + self.s(" removed", dim=True)]
            lines = [first]
            if isinstance(plan, dict) and isinstance(plan.get("entries"), list):
                marks = {"completed": "[x]", "in_progress": "[~]"}
                for entry in plan["entries"]:
                    if isinstance(entry, dict):
                        mark = marks.get(str(entry.get("status")), "[ ]")
                        prio = f" ({entry['priority']})" if entry.get("priority") else ""
                        lines.append(f"{INDENT}  {mark} {entry.get('content', '')}{prio}")
            elif isinstance(plan, dict) and plan.get("type") == "markdown":
                lines.extend(_indent_block(str(plan.get("content", ""))))
            elif isinstance(plan, dict) and plan.get("type") == "file":
                lines.append(f"{INDENT}  file {plan.get('uri')}")
            else:
                lines.append(INDENT + "  " + _json(plan))
            return lines
        if e.type == "compaction":
            f = e.fields
            first = head + self.s("compaction", fg="cyan", bold=True) + ident
            first += " " + str(f.get("status")) + more
            lines = [first]
            if f.get("error"):
                lines.append(INDENT + "  " + self.s("error: " + str(f["error"]), fg="red"))
            lines.extend(INDENT + "  " + line for line in body)
            return lines
        return [head + e.type + ident]

    def exchange_lines(self, ex: Exchange) -> list[str]:
        head = self._seq(ex.seq) + self.s(f"{arrow(ex.direction)} {ex.method}", bold=True)
        head += self.s(f" #{ex.id}", dim=True)
        if not ex.answered:
            return [head + "  " + self.s("(no response)", fg="red")]
        if ex.extra.get("reordered"):
            head += "  " + self.s("(response recorded first)", dim=True)
        else:
            head += "  " + self.s(_ms(ex.latency_ns), fg="cyan")
        if ex.extra.get("late"):
            head += self.s("  (answer to the request above)", dim=True)
        resp = ex.response if isinstance(ex.response, dict) else {}
        lines: list[str] = []
        if "error" in resp:
            err = resp.get("error")
            msg = err.get("message") if isinstance(err, dict) else err
            code = err.get("code") if isinstance(err, dict) else None
            head += "  " + self.s(f"error {code}: {msg}", fg="red")
        else:
            head += "  " + self.s(self._result_summary(ex, resp.get("result")), dim=False)
        if (
            ex.method == "session/prompt"
            and isinstance(ex.params, dict)
            and self.protocol_version != 2
        ):
            lines.extend(
                self.body(
                    INDENT + "  " + self.s("you: ", fg="green"),
                    _content_lines(ex.params.get("prompt")),
                )
            )
        if ex.method == "session/request_permission" and isinstance(ex.params, dict):
            call = ex.params.get("toolCall")
            if isinstance(call, dict):
                lines.append(
                    INDENT + f"  for tool {call.get('toolCallId')} {call.get('title', '')}"
                )
        if "problem" in ex.extra:
            lines.append(INDENT + "  " + self.s(str(ex.extra["problem"]), fg="red"))
        return [head, *lines]

    def _result_summary(self, ex: Exchange, result: Any) -> str:
        if ex.method == "session/prompt" and isinstance(result, dict):
            bits = []
            if "stopReason" in result:
                bits.append(f"stopReason={result['stopReason']}")
            if "messageId" in result:
                bits.append(f"messageId={result['messageId']}")
            if bits:
                return " ".join(bits)
        if ex.method == "session/request_permission" and isinstance(result, dict):
            outcome = result.get("outcome")
            if isinstance(outcome, dict):
                chosen = outcome.get("optionId")
                return f"outcome={outcome.get('outcome')}" + (f" {chosen}" if chosen else "")
        if ex.method == "initialize" and isinstance(result, dict):
            return f"protocolVersion={result.get('protocolVersion')}"
        if "sessionId" in ex.extra:
            return f"sessionId={ex.extra['sessionId']}"
        return "ok" if result in (None, {}) else _short(result, 120)

    def event_lines(self, ev: Event) -> list[str]:
        head = self._seq(ev.seq)
        p = ev.payload if isinstance(ev.payload, dict) else {}
        if ev.kind == "notice":
            sev = str(p.get("severity", "?"))
            colour = {"error": "red", "warning": "yellow"}.get(sev, "cyan")
            line = head + self.s(f"notice {sev}", fg=colour, bold=True)
            line += self.s(" (live-only)", dim=True) + f" {p.get('title', '')}"
            lines = [line]
            if p.get("description"):
                lines.append(INDENT + "  " + str(p["description"]))
            return lines
        if ev.kind == "state_update":
            state = str(p.get("state"))
            text = f"state {state}"
            if p.get("stopReason") is not None:
                text += f" ({p['stopReason']})"
            line = head + self.s(
                text, fg="red" if p.get("stopReason") == "error" else None, dim=True
            )
            err = p.get("error")
            if isinstance(err, dict):
                line += "  " + self.s(f"error {err.get('code')}: {err.get('message')}", fg="red")
            return [line]
        if ev.kind == "usage_update":
            text = f"usage {p.get('used')}/{p.get('size')} tokens"
            cost = p.get("cost")
            if isinstance(cost, dict):
                text += f", {cost.get('amount')} {cost.get('currency')}"
            return [head + self.s(text, dim=True)]
        if ev.kind == "current_mode_update":
            return [head + self.s(f"mode {p.get('currentModeId')}", dim=True)]
        if ev.kind == "available_commands_update":
            cmds = p.get("availableCommands")
            names = (
                [c.get("name") for c in cmds if isinstance(c, dict)]
                if isinstance(cmds, list)
                else []
            )
            return [head + self.s("commands " + " ".join(f"/{n}" for n in names), dim=True)]
        if ev.kind in ("config_option_update", "session_info_update"):
            rest = {k: v for k, v in p.items() if k != "sessionUpdate"}
            return [head + self.s(f"{ev.kind.removesuffix('_update')} {_short(rest)}", dim=True)]
        if ev.kind == "unknown":
            label = f"unknown update {ev.variant}" if ev.variant else "unknown update"
            line = head + self.s(label, fg="magenta", bold=True)
            if "problem" in ev.extra:
                line += self.s(f" ({ev.extra['problem']})", fg="red")
            return [line, INDENT + "  " + _json(ev.payload)]
        if ev.kind == "notification":
            to = arrow(ev.extra.get("direction"))
            method = ev.extra.get("method")
            return [head + self.s(f"{to} {method}", bold=True) + "  " + _short(ev.payload, 120)]
        if ev.kind == "invalid":
            to = arrow(ev.extra.get("direction"))
            line = head + self.s(f"{to} invalid frame ({ev.extra.get('reason')})", fg="red")
            return [line, INDENT + "  " + _short(ev.payload, 300)]
        if ev.kind == "transport":
            text = str(ev.extra.get("text") or ev.variant)
            return [self.s(f"{'':>6} · {text}", fg="bright_black" if self.colour else None)]
        if ev.kind == "orphan_response":
            line = head + self.s(f"response #{ev.extra.get('id')} to no known request", fg="red")
            return [line, INDENT + "  " + _short(ev.payload, 300)]
        return [head + ev.kind + " " + _short(ev.payload)]


F = TypeVar("F", bound=Frame)


def with_events(frames: Iterable[F], events: list[PlacedEvent]) -> Iterator[F | PlacedEvent]:
    """The frames with each event right after the frame it follows (in recording order)."""
    pending = iter(events)
    ev = next(pending, None)
    while ev is not None and ev.after_seq <= 0:
        yield ev
        ev = next(pending, None)
    for f in frames:
        yield f
        while ev is not None and ev.after_seq <= f.seq:
            yield ev
            ev = next(pending, None)
    while ev is not None:
        yield ev
        ev = next(pending, None)


def feed_event(model: ConnectionModel, ev: PlacedEvent) -> list[str | None]:
    """Hand one recorded transport event to ``model`` at its place."""
    return model.transport_event(
        ev.kind,
        ev.detail,
        session_id=ev.session,
        with_last_frame=ev.carries_message,
        afterSeq=ev.after_seq,
        ts=ev.ts,
        text=ev.text,
    )


class TextShow:
    """Streams one connection's frames and prints each session at its boundaries."""

    def __init__(self, renderer: Renderer, session_filter: str | None) -> None:
        self.r = renderer
        self.session_filter = session_filter
        self.current: str | None = None
        self.printed_any = False

    def wants(self, sid: str | None) -> bool:
        return self.session_filter is None or sid == self.session_filter

    def flush(self, tl: SessionTimeline, *, force: bool = False) -> None:
        if not tl.items:
            return
        items = tl.drain(settled_only=not force)
        if not items:
            return
        if not self.wants(tl.session_id) or (self.session_filter and tl.session_id is None):
            return
        if tl.session_id is not None and tl.session_id != self.current:
            self.r.session_header(tl.session_id)
            self.current = tl.session_id
        elif tl.session_id is None and self.current is not None:
            self.r.echo(self.r.s("-- connection", dim=True))
            self.current = None
        self.r.items(items)

    def run(
        self,
        model: ConnectionModel,
        frames: Iterable[Frame],
        events: list[PlacedEvent] | None = None,
    ) -> None:
        for f in with_events(frames, events or []):
            boundaries = feed_event(model, f) if isinstance(f, PlacedEvent) else model.feed(f)
            self.r.protocol_version = model.protocol_version
            for sid in boundaries:
                tl = model.connection if sid is None else model.sessions.get(sid)
                if tl is not None:
                    self.flush(tl)
            # bound memory for sessions that never reach a boundary
            if model.frames % 256 == 0:
                for tl in model.timelines():
                    if len(tl.items) > MAX_BUFFERED_ITEMS:
                        self.flush(tl, force=True)
        model.finish()
        for tl in model.timelines():
            self.flush(tl, force=True)


def _summary(r: Renderer, model: ConnectionModel, session_filter: str | None) -> None:
    turns = [*model.turns, *model.tracker.unfinished()]
    for sid, tl in model.sessions.items():
        if session_filter is not None and sid != session_filter:
            continue
        mine = [t for t in turns if t.session_id == sid]
        done = [t.duration_ns for t in mine if t.duration_ns is not None]
        text = f"session {sid}: {len(mine)} turn{'s' if len(mine) != 1 else ''}"
        if done:
            text += f", {_ms(sum(done))} in turns"
        unfinished = len(mine) - len(done)
        if unfinished:
            text += f", {unfinished} unfinished"
        if tl.facts.state is not None:
            text += f", last state {tl.facts.state}"
        text += f", {tl.update_count} updates"
        r.echo(r.s("   " + text, dim=True))


def print_conversation(
    r: Renderer,
    reader: RecordingReader,
    rows: list[ConnectionRow],
    session_id: str | None,
    *,
    raw: bool = False,
) -> None:
    """Each connection of ``rows``: its header, then its conversation (or with ``raw`` its
    frames as recorded) and a summary line per session; only ``session_id``'s when given."""
    for row in rows:
        r.connection_header(row)
        if raw:
            print_raw(r, reader, row.id, session_id)
            continue
        model = ConnectionModel(row.id)
        TextShow(r, session_id).run(
            model, reader.wire_frames(row.id), placed_events(reader, row.id)
        )
        _summary(r, model, session_id)


def print_raw(r: Renderer, reader: RecordingReader, connection_id: int, sid: str | None) -> None:
    """One connection's frames as recorded: seq, time, direction and kind, then the JSON."""
    t0: int | None = None
    ts0: float | None = None
    events = placed_events(reader, connection_id)
    if sid is not None:
        events = [e for e in events if e.session == sid]
    for f in with_events(reader.frames(connection_id=connection_id, session_id=sid), events):
        if isinstance(f, PlacedEvent):
            offset = f.ts - ts0 if ts0 is not None else 0.0
            r.echo(r._seq(None) + r.s(f"{offset:9.3f}s ·  {f.text}", dim=True))
            continue
        if t0 is None:
            t0, ts0 = f.mono_ns, f.ts
        offset = (f.mono_ns - t0) / 1e9
        what = f"{offset:9.3f}s {arrow(f.direction)} {fmt_frame_what(f)}"
        r.echo(r._seq(f.seq) + r.s(what, bold=True))
        r.echo(INDENT + "  " + f.raw.decode("utf-8", "backslashreplace").rstrip("\r\n"))


def print_json(reader: RecordingReader, rows: list[ConnectionRow], sid: str | None) -> None:
    """The reconstructed state of each connection of ``rows`` as one JSON document."""
    out = sys.stdout  # click.get_text_stream is deprecated (click 8.5)
    out.write('{"connections": [')
    for n, row in enumerate(rows):
        model = ConnectionModel(row.id)
        events = placed_events(reader, row.id)
        for f in with_events(reader.wire_frames(row.id), events):
            if isinstance(f, PlacedEvent):
                feed_event(model, f)
            else:
                model.feed(f)
        model.finish()
        data = model.to_json({sid} if sid is not None else None)
        data["transport"] = row.transport
        data["startedAt"] = row.started_at
        data["state"] = row.state
        data["stateReason"] = row.state_reason
        data["transportEvents"] = [
            e.to_json() for e in events if sid is None or e.session in (sid, None)
        ]
        if sid is not None:
            data["items"] = []
        out.write(("," if n else "") + "\n" + _json(data))
    out.write("\n]}\n")
    out.flush()
