"""What travels from the recorder's journal to its writer: typed items, and their wire format.

Both sides of the recorder speak in the items defined here. The proxy side
(:mod:`~acp_proxy.recorder.journal`) queues them; the writer side
(:mod:`~acp_proxy.recorder.writer.rows`) turns them into rows. In between, with the process backend,
the :mod:`~acp_proxy.recorder.shipper` encodes a batch of them for the writer process
(:mod:`~acp_proxy.recorder.writer.main`), which decodes it. This module imports neither side.

The wire format of one batch: a 16-byte header (two little-endian 8-byte lengths: the
:mod:`marshal` part, then the out-of-band part), a :mod:`marshal` list of plain tuples
``(tag, key, *fields)`` in which the connection is replaced by a small integer key, then
the out-of-band bytes: the data of every chunk or whole message bigger than
:data:`OUT_OF_BAND_BYTES`, in item order, whose place in the tuple holds its length. A huge
frame is so written from the forwarded buffer itself and read into one buffer of its
size, never copied through :mod:`marshal`.

Back from the writer process, on its stdout, come :class:`Progress` lines
(:func:`progress_line`, :func:`parse_progress`) and, when they change, its measures for
``--metrics`` (:func:`measures_line`, :func:`parse_measures`); the location of a
PostgreSQL recording travels in the environment (:data:`LOCATION_ENV`).
"""

from __future__ import annotations

import io
import marshal
import os
from collections.abc import Callable
from typing import Any, NamedTuple, TypeAlias


class Chunk(NamedTuple):
    """A piece of a newline-framed byte stream; ``done``: how many bytes complete lines."""

    conn: Any
    stream: str
    ts: float
    mono_ns: int
    data: Any  # bytes, or a spool reference while its bytes wait on disk
    done: int


class Whole(NamedTuple):
    """One whole message (a WebSocket message, or a whole stderr line), as a transport hands it
    over: the counterpart of :class:`Chunk` for transports that frame messages themselves.

    Not a :class:`~acp_proxy.wire.frame.Frame` (and not named one): ``conn`` is the proxy's
    connection handle, not an id, there is no sequence number yet (the writer assigns both),
    and ``data`` may be a spool reference while its bytes wait on disk. The writer's
    :mod:`~acp_proxy.recorder.writer.rows` turns it into a frame row.
    """

    conn: Any
    stream: str
    ts: float
    mono_ns: int
    data: Any  # bytes, or a spool reference
    binary: bool


class Gap(NamedTuple):
    """Bytes of ``stream`` were dropped here; ``partial``: they ended inside a line."""

    conn: Any
    stream: str
    partial: bool


class End(NamedTuple):
    """End of ``stream``: its last line is complete; ``inside``: it had no newline yet."""

    conn: Any
    stream: str
    ts: float
    mono_ns: int
    inside: bool


class Control(NamedTuple):
    """A change to the connection row: ``open``, ``update``, ``event`` or ``close``."""

    conn: Any
    op: str
    fields: dict[str, Any]


class Drops(NamedTuple):
    """Losses the journal counted since it last said so, to add to the connection row."""

    conn: Any
    frames: int
    nbytes: int


class Fin(NamedTuple):
    """The proxy's last batch: it ends cleanly (without it, end of input means it died)."""

    conn: Any = None


Item: TypeAlias = Chunk | Whole | Gap | End | Control | Drops | Fin

KINDS: tuple[type[Any], ...] = (Chunk, Whole, Gap, End, Control, Drops, Fin)
TAGS: dict[type[Any], int] = {kind: tag for tag, kind in enumerate(KINDS)}
CHUNK, FRAME, GAP, END, CONTROL, DROPS, FIN = range(len(KINDS))

LOCATION_ENV = "ACP_PROXY_WRITER_URL"
"""How a PostgreSQL URL reaches the writer process: its environment, never its command line
(which every user of the machine can read), since the URL may hold the password."""

REDACT_RULES_ENV = "ACP_PROXY_WRITER_REDACT"
"""How ``--redact``'s rule set reaches the writer process (JSON, always set; empty: none)."""


STDERR = "stderr"
"""The stream name of the agent's stderr (frames use the directions ``c2a``/``a2c``)."""

OUT_OF_BAND_BYTES = 1024 * 1024
"""Chunk or whole-message data bigger than this travels after the marshal part, not inside it."""

HEADER_BYTES = 16


class Losses:
    """Frames (and their bytes) that were not recorded, for one connection row."""

    __slots__ = ("frames", "nbytes")

    def __init__(self) -> None:
        self.frames = 0
        self.nbytes = 0

    def add(self, frames: int, nbytes: int) -> None:
        """Count more losses (the one way a count changes)."""
        self.frames += frames
        self.nbytes += nbytes

    def pair(self) -> tuple[int, int]:
        return (self.frames, self.nbytes)


def frames_in(item: Item) -> tuple[int, int]:
    """(frames, bytes) a chunk, frame or end item brings to a connection's recording.

    A chunk brings the lines it ends and all its bytes; an end inside a line brings that
    last line (its bytes came with the chunks).
    """
    if isinstance(item, Chunk):
        return item.data.count(b"\n"), len(item.data)
    if isinstance(item, Whole):
        return 1, len(item.data)
    if isinstance(item, End):
        return (1 if item.inside else 0), 0
    return 0, 0


def _portable(value: Any) -> Any:
    """``value`` as something :mod:`marshal` can carry (JSON-like data passes as is)."""
    if value is None or isinstance(value, (str, int, float, bytes, bool)):
        return value
    if isinstance(value, (list, tuple)):
        return [_portable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _portable(v) for k, v in value.items()}
    return str(value)


_NOBODY = object()
"""No connection (before :func:`encode_batch`'s first item)."""


def encode_batch(items: list[Item], keys: dict[Any, int]) -> list[bytes]:
    """One batch as the buffers to write, in order (header, marshal part, out-of-band data).

    ``keys`` maps connections to their keys; a connection seen the first time gets the
    next one.
    """
    out: list[tuple[Any, ...]] = []
    extra: list[bytes] = []
    conn: Any = _NOBODY
    key = 0
    for item in items:  # (once a recorded frame, in the proxy: kept lean)
        if item[0] is not conn:  # a batch is mostly runs of one connection's items
            conn = item[0]
            key = keys.get(conn) or keys.setdefault(conn, len(keys) + 1)
        kind = type(item)
        if isinstance(item, (Whole, Chunk)):
            data = item[4]
            if type(data) is not bytes:
                data = bytes(data)
            if len(data) > OUT_OF_BAND_BYTES:
                extra.append(data)
                data = len(data)
            out.append((TAGS[kind], key, item[1], item[2], item[3], data, item[5]))
        elif isinstance(item, Control):
            out.append((CONTROL, key, item[1], _portable(item[2])))
        else:
            out.append((TAGS[kind], key, *item[1:]))
    blob = marshal.dumps(out)
    size = sum(len(b) for b in extra)
    return [len(blob).to_bytes(8, "little") + size.to_bytes(8, "little"), blob, *extra]


def read_batch(fd: int, resolve: Callable[[int], Any]) -> list[Item] | None:
    """Read one batch from ``fd``; None at end of input (or a batch cut short by it).

    ``resolve`` turns a key back into what stands for the connection on this side.
    """
    header = _read_exact(fd, HEADER_BYTES)
    if header is None:
        return None
    blob = _read_exact(fd, int.from_bytes(header[:8], "little"))
    if blob is None:
        return None
    items: list[Item] = []
    for raw in marshal.loads(blob):
        tag = raw[0]
        if tag in (CHUNK, FRAME) and type(raw[5]) is int:
            data = _read_buffer(fd, raw[5])
            if data is None:
                return None
            raw = (*raw[:5], data, raw[6])
        items.append(KINDS[tag](resolve(raw[1]), *raw[2:]))
    return items


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks: list[bytes] = []
    while n:
        data = os.read(fd, min(n, 1 << 20))
        if not data:
            return None
        chunks.append(data)
        n -= len(data)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _read_buffer(fd: int, n: int) -> bytearray | None:
    """``n`` bytes read into one buffer of that size (no joining of pieces)."""
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    with io.FileIO(fd, closefd=False) as f:
        while got < n:
            count = f.readinto(view[got:])
            if not count:
                return None
            got += count
    view.release()
    return buf


class Progress(NamedTuple):
    """What the writer process reports to the proxy, one line on its stdout at a time."""

    frames_written: int
    batches: int  # committed
    index_cpu: float  # CPU seconds of the rows thread
    sqlite_cpu: float  # ... and of the sink thread (either engine)
    dropped: int  # frames the writer gave up on
    queued_bytes: int  # in its journal, not written yet
    unsaved: bool  # a batch is waiting for the store (locked, unreachable)
    in_doubt: int  # frames whose COMMIT the server never answered (maybe stored)
    store_away: bool = False  # the database server is away now (an outage is waited out)
    outages: int = 0  # times it went away


def progress_line(p: Progress) -> str:
    """``p`` as the writer writes it: ``p frames batches index_cpu sqlite_cpu dropped
    queued_bytes unsaved in_doubt store_away outages`` and a newline."""
    return (
        f"p {p.frames_written} {p.batches} {p.index_cpu:.3f} {p.sqlite_cpu:.3f} {p.dropped} "
        f"{p.queued_bytes} {int(p.unsaved)} {p.in_doubt} {int(p.store_away)} {p.outages}\n"
    )


def parse_progress(line: bytes) -> Progress | None:
    """The :class:`Progress` a line of the writer's stdout reports (None: not a progress line)."""
    parts = line.split()
    if len(parts) != 11 or parts[0] != b"p":
        return None
    return Progress(
        int(parts[1]),
        int(parts[2]),
        float(parts[3]),
        float(parts[4]),
        int(parts[5]),
        int(parts[6]),
        parts[7] == b"1",
        int(parts[8]),
        parts[9] == b"1",
        int(parts[10]),
    )


def measures_line(measures: dict[str, Any]) -> str:
    """The writer's measures (durations, findings, OTLP counts: plain JSON-able data) as
    the line it writes: ``m`` and compact JSON."""
    import json  # (here: the stdio proxy imports this module before it forwards)

    return f"m {json.dumps(measures, separators=(',', ':'))}\n"


def parse_measures(line: bytes) -> dict[str, Any] | None:
    """The measures a line of the writer's stdout carries (None: not a measures line)."""
    if not line.startswith(b"m "):
        return None
    import json  # (the first measures line: the proxy forwards by then)

    try:
        value = json.loads(line[2:])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None
