"""``acp-proxy ls``: rows that can be told apart, honest states, values that never crash it."""

from __future__ import annotations

import socket
import sqlite3
import time
from pathlib import Path

import orjson

from tests.conftest import ECHO_AGENT, run_proxy

INIT = (
    b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1,'
    b'"clientInfo":{"name":"zed","title":"Zed","version":"0.190.1"}}}\n'
)


def _record(db: Path, *flags: str, stdin: bytes = INIT) -> None:
    done = run_proxy(["--record", str(db), *flags, "--", *ECHO_AGENT], stdin=stdin)
    assert done.returncode == 0, done.stderr


def _update(db: Path, sql: str, args: tuple[object, ...] = ()) -> None:
    conn = sqlite3.connect(db)
    try:
        conn.execute(sql, args)
        conn.commit()
    finally:
        conn.close()


def _ls(db: Path | str, *flags: str) -> list[dict[str, str]]:
    done = run_proxy(["ls", str(db), *flags])
    assert done.returncode == 0 and b"Traceback" not in done.stderr, done.stderr
    lines = done.stdout.decode().splitlines()
    header = lines[0].split()
    starts = [lines[0].index(h) for h in header]
    rows = []
    for line in lines[1:]:
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], len(line)], strict=True)]
        rows.append(dict(zip(header, cells, strict=True)))
    return rows


def test_ls_shows_client_and_label_so_rows_differ(db_path: Path) -> None:
    _record(db_path, "--label", "window 1")
    _record(db_path, "--label", "window 2")
    _record(db_path)
    rows = _ls(db_path)
    assert [r["label"] for r in rows] == ["window 1", "window 2", "-"]
    assert all(r["client"] == "Zed 0.190.1" for r in rows)
    assert all(r["ended"] == "exit 0" for r in rows)
    host = rows[0]["host"]  # the recorder writes the host it runs on
    assert host == socket.gethostname()[:24] and all(r["host"] == host for r in rows)
    _update(db_path, "UPDATE connections SET host = 'build-box' WHERE id = 2")
    _update(db_path, "UPDATE connections SET host = NULL WHERE id = 3")
    assert [r["host"] for r in _ls(db_path)] == [host, "build-box", "-"]
    _update(db_path, "UPDATE connections SET host = NULL")
    assert "host" not in _ls(db_path)[0]  # no host known: no column


def test_ls_says_how_a_connection_ended_never_running_without_a_recorder(
    db_path: Path,
) -> None:
    for _ in range(4):
        _record(db_path)
    now = time.time()
    # 1: a proxy killed before it closed its row, no heartbeat at all
    _update(
        db_path,
        "UPDATE connections SET ended_at = NULL, exit_status = NULL, end_reason = NULL, "
        "last_seen_at = NULL WHERE id = 1",
    )
    # 2: the same, with a heartbeat long gone stale
    _update(
        db_path,
        "UPDATE connections SET ended_at = NULL, exit_status = NULL, end_reason = NULL, "
        "last_seen_at = ? WHERE id = 2",
        (now - 3600,),
    )
    # 3: a recorder still beating: running
    _update(
        db_path,
        "UPDATE connections SET ended_at = NULL, exit_status = NULL, end_reason = NULL, "
        "last_seen_at = ? WHERE id = 3",
        (now + 600,),
    )
    # 4: closed by the recorder after the proxy died
    _update(db_path, "UPDATE connections SET end_reason = 'proxy-lost' WHERE id = 4")
    rows = _ls(db_path)
    assert [r["ended"] for r in rows] == [
        "ended (unknown end)",
        "ended (unknown end)",
        "running",
        "ended (unknown end)",
    ]
    assert rows[0]["duration"] == "-"  # unknown: no end time at all
    done = run_proxy(["ls", str(db_path), "--json"])
    states = [orjson.loads(line)["state"] for line in done.stdout.splitlines()]
    assert states == ["unknown-end", "unknown-end", "running", "unknown-end"]


def test_readers_survive_any_stored_value(db_path: Path) -> None:
    _record(db_path)
    _record(db_path)
    _update(
        db_path,
        "UPDATE connections SET started_at = -1e308, ended_at = 1e308, exit_status = 'x', "
        "last_seen_at = 'x', end_reason = NULL WHERE id = 1",
    )
    _update(db_path, "UPDATE connections SET started_at = 'soon' WHERE id = 2")
    shown = run_proxy(["show", str(db_path)])  # fmt_time of commands/common.py
    assert shown.returncode == 0 and b"Traceback" not in shown.stderr, shown.stderr
    _update(db_path, "UPDATE frames SET mono_ns = 'late' WHERE connection_id = 2 AND seq = 2")
    for args in (["ls"], ["ls", "--json"], ["dump"], ["dump", "--full"]):
        done = run_proxy([*args, str(db_path)])
        assert done.returncode == 0, (args, done.stderr)
        assert b"Traceback" not in done.stderr
    rows = _ls(db_path)
    assert rows[0]["started"].startswith("?") and rows[1]["started"].startswith("?")
    assert rows[0]["ended"] == "ended" and rows[0]["duration"] == "?"
    assert rows[1]["ended"] == "exit 0" and rows[1]["duration"] == "-"


def test_ls_prints_a_lone_surrogate_as_its_escape(db_path: Path) -> None:
    _record(db_path)
    # JSON text holding a lone surrogate escape (a JavaScript peer can send one)
    _update(
        db_path,
        "UPDATE connections SET client_info = ? WHERE id = 1",
        ('{"name":"\\ud800","version":"1"}',),
    )
    rows = _ls(db_path)
    assert rows[0]["client"] == "\\ud800 1"
    done = run_proxy(["ls", "--json", str(db_path)])
    assert done.returncode == 0 and b"Traceback" not in done.stderr
    assert orjson.loads(done.stdout)["client_info"]["name"] == "\\ud800"


def hosts_and_last(store: Path | str) -> None:
    """Three connections, the second on another host: ``--host`` and ``--last`` choose."""
    ids = [r["#"] for r in _ls(store)]
    here = socket.gethostname()[:24]
    assert [r["#"] for r in _ls(store, "--host", "build-box")] == [ids[1]]
    assert [r["#"] for r in _ls(store, "--host", here)] == [ids[0], ids[2]]
    assert [r["#"] for r in _ls(store, "--last", "2")] == ids[1:]  # the newest, oldest first
    assert [r["#"] for r in _ls(store, "--host", here, "--last", "1")] == [ids[2]]
    assert _ls(store, "--last", "2")[0]["frames"] == _ls(store)[1]["frames"] == "2"
    done = run_proxy(["ls", str(store), "--host", "nowhere"])
    assert done.returncode == 0 and done.stdout.endswith(b": no connection recorded on nowhere\n")
    done = run_proxy(["ls", str(store), "--host", "build-box", "--json"])
    assert [orjson.loads(line)["host"] for line in done.stdout.splitlines()] == ["build-box"]
    done = run_proxy(["ls", str(store), "--last", "0"])
    assert done.returncode == 2 and b"Traceback" not in done.stderr


def test_ls_chooses_by_host_and_newest(db_path: Path) -> None:
    for _ in range(3):
        _record(db_path)
    _update(db_path, "UPDATE connections SET host = 'build-box' WHERE id = 2")
    hosts_and_last(db_path)
