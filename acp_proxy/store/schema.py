"""The recording database: schema, versioned migrations and opening a file safely.

The schema version lives in ``PRAGMA user_version``; :data:`MIGRATIONS` are applied in
order inside one transaction each. The raw bytes (``frames.raw``) are the one truth;
every other ``frames`` column is derived and can be rebuilt by ``acp-proxy reindex``.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from urllib.parse import quote

SCHEMA_VERSION = 3

MIGRATIONS: list[str] = [
    # 1: the initial schema
    """
    CREATE TABLE connections (
        id INTEGER PRIMARY KEY,
        started_at REAL NOT NULL,          -- unix time (seconds)
        ended_at REAL,
        transport TEXT NOT NULL,           -- stdio | websocket | ws-upstream | connect | replay
        agent_command TEXT,                -- JSON array of argv
        cwd TEXT,
        pid INTEGER,                       -- the agent process id
        proxy_pid INTEGER,
        exit_status INTEGER,               -- agent exit code; negative: killed by that signal
        protocol_version INTEGER,          -- from initialize
        client_info TEXT,                  -- JSON, from initialize params
        agent_info TEXT,                   -- JSON, from initialize result
        label TEXT,
        peer TEXT,                         -- remote address (WebSocket)
        headers TEXT,                      -- JSON object of handshake headers worth keeping
        frames_dropped INTEGER NOT NULL DEFAULT 0,
        bytes_dropped INTEGER NOT NULL DEFAULT 0,
        meta TEXT                          -- JSON object, free-form
    );
    CREATE TABLE frames (
        id INTEGER PRIMARY KEY,
        connection_id INTEGER NOT NULL REFERENCES connections(id),
        seq INTEGER NOT NULL,              -- 1, 2, ... per connection, both directions
        ts REAL NOT NULL,                  -- wall clock, unix seconds
        mono_ns INTEGER NOT NULL,          -- monotonic clock, nanoseconds
        direction TEXT NOT NULL,           -- c2a (client to agent) | a2c (agent to client)
        size INTEGER NOT NULL,
        binary INTEGER NOT NULL DEFAULT 0, -- 1: a WebSocket binary message
        kind TEXT,                         -- request | response | notification | batch | invalid
        rpc_id TEXT,                       -- the id as its exact JSON text
        method TEXT,                       -- for responses: the method of the answered request
        session_id TEXT,
        update_kind TEXT,                  -- params.update.sessionUpdate
        entity_type TEXT,
        entity_id TEXT,
        -- exactly the bytes that crossed, terminator included. The last column (files made
        -- before it moved here have it after direction; every query names its columns): a
        -- huge frame is inserted as zeroblob(n) and written in pieces, and SQLite builds
        -- a row around a zeroblob without materialising it only when it ends the row.
        raw BLOB NOT NULL,
        UNIQUE (connection_id, seq)
    );
    CREATE INDEX frames_method ON frames (method);
    CREATE INDEX frames_session ON frames (session_id, connection_id, seq);
    CREATE INDEX frames_rpc_id ON frames (connection_id, rpc_id);
    CREATE INDEX frames_update_kind ON frames (update_kind);
    CREATE TABLE stderr_lines (
        id INTEGER PRIMARY KEY,
        connection_id INTEGER NOT NULL REFERENCES connections(id),
        seq INTEGER NOT NULL,              -- 1, 2, ... per connection
        ts REAL NOT NULL,
        mono_ns INTEGER NOT NULL,
        raw BLOB NOT NULL,
        UNIQUE (connection_id, seq)
    );
    CREATE TABLE events (
        id INTEGER PRIMARY KEY,
        connection_id INTEGER REFERENCES connections(id),
        ts REAL NOT NULL,
        kind TEXT NOT NULL,                -- e.g. recorder_drop, websocket_close, signal
        detail TEXT                        -- JSON
    );
    """,
    # 2: cheaper indexes for the recorder's hot path (docs/performance.md, "The store's and
    #    readers' choices"): rpc_id only where there is one (most frames are notifications), and
    #    method + update_kind in one index, which still serves lookups by method, facet
    #    counts of either column (a covering scan) and update_kind filters.
    """
    DROP INDEX IF EXISTS frames_method;
    DROP INDEX IF EXISTS frames_update_kind;
    DROP INDEX IF EXISTS frames_rpc_id;
    CREATE INDEX frames_rpc_id ON frames (connection_id, rpc_id) WHERE rpc_id IS NOT NULL;
    CREATE INDEX frames_method_update ON frames (method, update_kind);
    """,
    # 3: honest connection states and provenance.
    #    last_seen_at: wall clock of the recorder's last heartbeat for an open connection
    #      (written at the row's creation and then every HEARTBEAT_SECONDS while it is open);
    #      a row with no ended_at and a stale or missing heartbeat reads as ended, end
    #      unknown (acp_proxy.store.liveness).
    #    end_reason: how the row was closed (see liveness.END_REASONS).
    #    host: the host name the connection was recorded on.
    #    digest: a content digest of the connection's frames (import deduplication).
    """
    ALTER TABLE connections ADD COLUMN last_seen_at REAL;
    ALTER TABLE connections ADD COLUMN end_reason TEXT;
    ALTER TABLE connections ADD COLUMN host TEXT;
    ALTER TABLE connections ADD COLUMN digest TEXT;
    """,
]


class RecordingError(Exception):
    """A recording cannot be opened or read; the message is meant for the user."""


def create_private_file(path: Path) -> None:
    """Create ``path`` with mode 0600 if it does not exist (SQLite reuses the mode for -wal)."""
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    except FileExistsError:
        return
    os.close(fd)


def connect(
    path: str | os.PathLike[str],
    *,
    create: bool,
    timeout: float = 30.0,
    readonly: bool = False,
) -> sqlite3.Connection:
    """Open a recording for writing (``create=True``) or reading, migrating it if needed.

    ``readonly=True`` (every command that only reads) opens the file through
    :func:`open_readonly`: it never migrates, writes or creates a file beside the recording;
    every schema version so far is readable.
    Raises :class:`RecordingError` with a user-facing message for a missing file, a file
    that is not a SQLite database, or a recording from a newer acp-proxy.
    """
    p = Path(path)
    verb = "create" if create else "read"
    try:
        if create:
            if p.parent and not p.parent.exists():
                raise RecordingError(f"cannot create {p}: directory {p.parent} does not exist")
            if p.exists() and p.is_dir():
                raise RecordingError(f"cannot record to {p}: it is a directory")
            create_private_file(p)
            verb = "write"
            with p.open("r+b"):  # a file we may not write is refused now, not at the 1st frame
                pass
        elif not p.exists():
            raise RecordingError(f"no such recording: {p}")
        elif p.is_dir():
            raise RecordingError(f"{p} is a directory, not a recording")
    except OSError as exc:  # permission denied, a read-only file system: where, and why
        raise RecordingError(_os_error(p, exc, verb)) from None
    try:
        if readonly:
            conn = open_readonly(p, timeout)
        else:
            conn = sqlite3.connect(
                p, timeout=timeout, isolation_level=None, check_same_thread=False
            )
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            migrate(conn, readonly=not create)
        if create:
            conn.execute("PRAGMA journal_mode = WAL")
            conn.execute("PRAGMA synchronous = NORMAL")
    except sqlite3.OperationalError as exc:
        if "locked" in str(exc) or "busy" in str(exc):
            raise RecordingError(f"{p} is locked by another process ({exc})") from exc
        denied = _access_error(p, writing=not readonly)
        if denied is not None:
            raise RecordingError(denied) from None
        raise RecordingError(f"{p} is not a usable acp-proxy recording: {exc}") from exc
    except sqlite3.DatabaseError as exc:
        raise RecordingError(f"{p} is not a usable acp-proxy recording: {exc}") from exc
    except RecordingError as exc:
        if str(p) in str(exc):
            raise
        raise RecordingError(f"{p}: {exc}") from None
    return conn


def _os_error(path: Path, exc: OSError, verb: str) -> str:
    """``cannot VERB PATH: REASON`` (and the place refused when it is not PATH): one line."""
    reason = exc.strerror or str(exc)
    place = exc.filename if isinstance(exc.filename, str) else str(path)
    where = "" if place == str(path) else f" ({place})"
    return f"cannot {verb} {path}: {reason}{where}"


def _access_error(path: Path, *, writing: bool) -> str | None:
    """Why SQLite could not open ``path`` when the system refuses it (permission denied,
    a read-only file system), naming the file or directory; None when it does not."""
    try:
        with path.open("r+b" if writing else "rb"):
            pass
    except OSError as exc:
        return _os_error(path, exc, "write" if writing else "read")
    if writing and not os.access(path.parent, os.W_OK):
        return f"cannot write {path}: Permission denied (its directory {path.parent})"
    return None


def _is_wal(path: Path) -> bool:
    """Whether the file's header says WAL mode (bytes 18-19 of a SQLite header are 2)."""
    try:
        with path.open("rb") as f:
            header = f.read(20)
    except OSError:
        return False
    return (
        len(header) == 20 and header[:16] == b"SQLite format 3\x00" and header[18:20] == b"\x02\x02"
    )


def open_readonly(path: Path, timeout: float = 30.0) -> sqlite3.Connection:
    """Open a recording strictly for reading, creating nothing beside it.

    SQLite's ``mode=ro`` on a WAL database creates ``-wal`` and ``-shm`` files (and leaves
    them behind) and fails in a read-only directory. So:

    * a WAL recording with a ``-wal`` file (a proxy is recording into it, or one died
      without checkpointing) is opened with ``mode=ro`` and sees every commit, live;
      when even that fails (a read-only directory or ``-shm``), it is opened
      ``immutable=1``, which shows the checkpointed frames only;
    * a WAL recording without a ``-wal`` file has no open connection at all: nothing is
      pending, and it is read as ``immutable=1`` (no locks, no files). Every web request
      opens afresh, so a proxy that starts recording into it later is seen live;
    * any other file is opened ``mode=ro`` (a rollback-journal database creates nothing).

    Raises :class:`RecordingError` (via :func:`check_readable`) for what is not a recording.
    """
    base = "file:" + quote(str(path.resolve()))
    wal = _is_wal(path)
    modes = ["?mode=ro"]
    if wal:
        modes = ["?mode=ro", "?mode=ro&immutable=1"]
        if not Path(str(path) + "-wal").exists():
            modes = ["?mode=ro&immutable=1"]
    for n, mode in enumerate(modes):
        try:
            conn = sqlite3.connect(
                base + mode,
                timeout=timeout,
                isolation_level=None,
                check_same_thread=False,
                uri=True,
            )
        except sqlite3.OperationalError:
            denied = _access_error(path, writing=False)
            if denied is not None:
                raise RecordingError(denied) from None
            raise
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
            check_readable(conn)
        except sqlite3.OperationalError as exc:
            conn.close()
            cannot_open = "unable to open" in str(exc) or "readonly" in str(exc)
            if n + 1 < len(modes) and cannot_open:
                continue
            denied = _access_error(path, writing=False) if cannot_open else None
            if denied is not None:
                raise RecordingError(denied) from None
            raise
        except BaseException:
            conn.close()
            raise
        return conn
    raise AssertionError("unreachable")


def check_readable(conn: sqlite3.Connection) -> int:
    """Refuse (:class:`RecordingError`) a file that is not a recording this version can read."""
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise RecordingError(
            f"this recording has schema version {version}; this acp-proxy understands up to "
            f"{SCHEMA_VERSION} (upgrade acp-proxy)"
        )
    tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
    if not tables:
        raise RecordingError("the file is empty, not a recording")
    if not {"frames", "connections"} <= tables:
        raise RecordingError("the database has tables but none of acp-proxy's")
    return version


def migrate(conn: sqlite3.Connection, *, readonly: bool = False) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the version found before.

    Migrations are additive, so an older recording opened for reading is migrated too.
    ``readonly`` only refuses to turn an empty file into a recording.
    """
    version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    if version > SCHEMA_VERSION:
        raise RecordingError(
            f"this recording has schema version {version}; this acp-proxy understands up to "
            f"{SCHEMA_VERSION} (upgrade acp-proxy)"
        )
    if version == SCHEMA_VERSION:
        return version
    if version == 0:
        tables = {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}
        if readonly and not tables:
            raise RecordingError("the file is empty, not a recording")
        if tables and "frames" not in tables:
            raise RecordingError("the database has tables but none of acp-proxy's")
    conn.execute("BEGIN IMMEDIATE")
    try:
        current = int(conn.execute("PRAGMA user_version").fetchone()[0])
        for number in range(current, SCHEMA_VERSION):
            for statement in _statements(MIGRATIONS[number]):
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {number + 1}")
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    return version


def _statements(script: str) -> list[str]:
    out: list[str] = []
    buf = ""
    for line in script.splitlines():
        code = line.split("--", 1)[0]
        buf += code + "\n"
        if sqlite3.complete_statement(buf):
            if buf.strip():
                out.append(buf.strip())
            buf = ""
    if buf.strip():
        out.append(buf.strip())
    return out
