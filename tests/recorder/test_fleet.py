"""A fleet recording into one PostgreSQL: two proxy hosts and a database host, as namespaces.

The test makes a private LAN (:mod:`tests.netns`): ``db`` (10.77.0.1) runs a real PostgreSQL,
``hostA`` and ``hostB`` each run ``acp-proxy ws --record postgresql://...@10.77.0.1`` in front
of an SDK agent, with SDK peers on the same host driving sessions through it. Each host has
its own host name (``gethostname()`` in its UTS namespace), which the recorder stores.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ECHO_AGENT, incident_lines, proxy_exe
from tests.helpers import listening_url
from tests.netns import Host, Lab, unavailable
from tests.peers import PEERS
from tests.pg_server import PASSWORD, USER, PgServer, find_bindir

ROOT = Path(__file__).resolve().parents[2]
SDK_AGENT = [sys.executable, str(PEERS / "sdk_echo_agent.py")]
CLIENT = [sys.executable, "-m", "tests.peers.fleet_client"]
TOKEN = "fleet-token-0123456789"
PG_PORT = 5432  # every host is a namespace of its own: the usual port is free there
WS_PORT = 8765
URL_RE = re.compile(rb"listening on (ws://\S+)")
TIMEOUT = 120.0

pytestmark = pytest.mark.slow


@dataclass
class Fleet:
    """The lab: the database host and its server, and the two proxy hosts."""

    lab: Lab
    db: Host
    hosts: list[Host]
    pg: PgServer

    def database(self) -> str:
        """A new empty database; its URL as every host reaches it (TCP, password)."""
        return self.pg.database()

    def rows(self, url: str, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        """Query the database from the test itself, over the server's Unix socket."""
        import psycopg

        dbname = url.rsplit("/", 1)[1]
        with psycopg.connect(
            host=str(self.pg.data), port=self.pg.port, user=USER, dbname=dbname
        ) as conn:
            return [tuple(r) for r in conn.execute(sql, params).fetchall()]


@pytest.fixture(scope="module")
def fleet() -> Iterator[Fleet]:
    why = unavailable()
    if why is not None:
        pytest.skip(why)
    if find_bindir() is None:
        pytest.skip("PostgreSQL is not installed (Debian: apt-get install postgresql)")
    # Not under pytest's basetemp: a pytest starting meanwhile makes /tmp/pytest-of-USER 0700
    # again, and the server's user could not start it after the restart.
    base = Path(tempfile.mkdtemp(prefix="acp-fleet-"))
    try:
        with Lab() as lab:
            db = lab.add("db")
            hosts = [lab.add("hostA"), lab.add("hostB")]
            pg = PgServer(base / "pg", listen=db.ip, port=PG_PORT, prefix=db.prefix)
            pg.init()
            pg.start()
            try:
                yield Fleet(lab, db, hosts, pg)
            finally:
                if pg.running():
                    pg.stop("immediate")
    finally:
        shutil.rmtree(base, ignore_errors=True)


@dataclass
class Proxy:
    """``acp-proxy ws`` running on a host; its stderr lines as they come."""

    host: Host
    proc: subprocess.Popen[bytes]
    url: str
    stderr: list[bytes] = field(default_factory=list)

    @property
    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode("utf-8", "replace")

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.proc.wait(TIMEOUT)


@contextmanager
def proxy_on(host: Host, args: list[str]) -> Iterator[Proxy]:
    """Run ``acp-proxy ARGS`` on ``host`` until the block ends (a server printing its URL)."""
    proc = host.popen(
        [*proxy_exe(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    url, lines = listening_url(proc, URL_RE)
    proxy = Proxy(host, proc, url, lines)
    reader = threading.Thread(
        target=lambda: lines.extend(iter(proc.stderr.readline, b"")),  # type: ignore[union-attr]
        daemon=True,
    )
    reader.start()
    try:
        yield proxy
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(TIMEOUT)
        reader.join(10)


@contextmanager
def ws_proxies(fleet: Fleet, ws_args: list[str]) -> Iterator[tuple[Proxy, Proxy]]:
    """``acp-proxy ws WS_ARGS`` on each of the two proxy hosts, on its LAN address."""
    a, b = (["ws", "--listen", f"{h.ip}:{WS_PORT}", *ws_args] for h in fleet.hosts[:2])
    with proxy_on(fleet.hosts[0], a) as proxy_a, proxy_on(fleet.hosts[1], b) as proxy_b:
        yield proxy_a, proxy_b


class Peers:
    """``fleet_client.py sdk`` on a host: SDK peers taking prompt rounds from the test."""

    def __init__(self, host: Host, url: str, names: list[str]) -> None:
        self.host = host
        self.proc = host.popen(
            [*CLIENT, "sdk", url, TOKEN, ",".join(names)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
        )

    def _ok(self) -> None:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if line != b"ok\n":
            self.proc.kill()
            _, err = self.proc.communicate(timeout=TIMEOUT)
            raise AssertionError(f"peers on {self.host.name}: {line!r} {err.decode()[-2000:]}")

    def started(self) -> None:
        self._ok()

    def send(self, text: str) -> None:
        """Start a prompt round: every peer sends one session/prompt (``text`` in it)."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def wait(self) -> None:
        """Until every peer of the round has its answer."""
        self._ok()

    def finish(self) -> list[dict[str, Any]]:
        out, err = self.proc.communicate(b"", timeout=TIMEOUT)
        assert self.proc.returncode == 0, err.decode()[-2000:]
        report: list[dict[str, Any]] = json.loads(out.splitlines()[-1])
        return report


def incidents(proxy: Proxy) -> list[bytes]:
    """The proxy's own incident lines on stderr (not its "listening on" line)."""
    return [line for line in incident_lines(b"".join(proxy.stderr)) if b"listening on" not in line]


def rounds(peers: list[Peers], text: str) -> None:
    """One prompt round on every host at once."""
    for p in peers:
        p.send(text)
    for p in peers:
        p.wait()


def stored_connections(fleet: Fleet, url: str) -> dict[int, dict[str, Any]]:
    """Per recorded connection: host, and its frames (seq, direction, raw) in seq order."""
    found: dict[int, dict[str, Any]] = {}
    for cid, host, dropped in fleet.rows(
        url, "SELECT id, host, frames_dropped FROM connections ORDER BY id"
    ):
        found[cid] = {"host": host, "dropped": dropped, "frames": []}
    for cid, seq, direction, raw in fleet.rows(
        url, "SELECT connection_id, seq, direction, raw FROM frames ORDER BY connection_id, seq"
    ):
        found[cid]["frames"].append((seq, direction, bytes(raw)))
    return found


def reader(fleet: Fleet, args: list[str]) -> subprocess.CompletedProcess[bytes]:
    """``acp-proxy ARGS`` run on hostA: a reader reaching the database over the LAN."""
    return fleet.hosts[0].run([*proxy_exe(), *args], timeout=TIMEOUT)


PEERS = 3
CONNECTIONS = 2 * (PEERS + 1)  # and one late peer per host
CUT_SECONDS = 3.0


def test_two_hosts_record_into_one_database_through_a_restart(fleet: Fleet, tmp_path: Path) -> None:
    url = fleet.database()
    names = {h.name: [f"{h.name}-{n}" for n in range(PEERS)] for h in fleet.hosts}
    ws_args = ["--record", url, "--token", TOKEN, "--heartbeat", "0", "--", *SDK_AGENT]
    with ws_proxies(fleet, ws_args) as (proxy_a, proxy_b):
        proxies = (proxy_a, proxy_b)
        peers = [Peers(proxy.host, proxy.url, names[proxy.host.name]) for proxy in proxies]
        for p in peers:
            p.started()
        rounds(peers, "before the outage")
        fleet.pg.stop()  # the database goes away with sessions open on both hosts
        down_at = time.monotonic()
        rounds(peers, "while the database is down")
        # New connections while it is down: their rows are created when it is back.
        late = [Peers(proxy.host, proxy.url, [f"{proxy.host.name}-late"]) for proxy in proxies]
        for p in late:
            p.started()
        peers += late
        rounds(peers, "still down")
        fleet.pg.start()
        gap = time.monotonic() - down_at
        rounds(peers, "after the restart")
        # A network cut between hostB and the database (the server stays up).
        fleet.lab.cut(fleet.hosts[1])
        rounds(peers, "hostB cut off")
        time.sleep(CUT_SECONDS)  # long enough for its writer to notice
        rounds(peers, "hostB still cut off")
        fleet.lab.mend(fleet.hosts[1])
        rounds(peers, "hostB back")
        reports = [r for p in peers for r in p.finish()]
        # The proxies write what waited once the database is back, then exit cleanly.
        assert proxy_a.stop() == 0, proxy_a.stderr_text
        assert proxy_b.stop() == 0, proxy_b.stderr_text
    for proxy in (proxy_a, proxy_b):
        print(f"{proxy.host.name}: {proxy.stderr_text}")
        assert PASSWORD not in proxy.stderr_text
        assert "Traceback" not in proxy.stderr_text
        # The outage is reported, once per incident (gone, back), never once per frame.
        assert len(incidents(proxy)) <= 4, proxy.stderr_text
    # hostB's writer meets the cut whatever the timing; a writer whose batches all fell
    # outside the restart has nothing to report (seen once in a fresh-clone run)
    assert sum(len(incidents(p)) for p in (proxy_a, proxy_b)) >= 1
    print(f"database down {gap:.1f} s")

    stored = stored_connections(fleet, url)
    assert len(stored) == CONNECTIONS
    by_sent: dict[tuple[bytes, ...], tuple[int, dict[str, Any]]] = {}
    for cid, conn in stored.items():
        seqs = [seq for seq, _, _ in conn["frames"]]
        assert seqs == list(range(1, len(seqs) + 1)), f"connection {cid}: {seqs}"
        assert conn["dropped"] == 0
        sent = tuple(raw for _, d, raw in conn["frames"] if d == "c2a")
        by_sent[sent] = (cid, conn)
    ids: dict[str, int] = {}
    for report in reports:
        sent = tuple(s.encode() for s in report["sent"])
        assert sent in by_sent, f"{report['name']}: what it sent is not stored"
        cid, conn = by_sent[sent]
        # Byte for byte what crossed: the client's frames and the agent's, in order.
        assert [raw for _, d, raw in conn["frames"] if d == "a2c"] == [
            r.encode() for r in report["received"]
        ]
        assert conn["host"] == report["name"].split("-")[0]
        ids[report["name"]] = cid
    assert len(set(ids.values())) == CONNECTIONS

    # The readers, on a host of the LAN, see both hosts apart and a clean recording.
    done = reader(fleet, ["check", url])
    assert done.returncode == 0, done.stdout.decode() + done.stderr.decode()
    done = reader(fleet, ["ls", url, "--json"])
    assert done.returncode == 0, done.stderr.decode()
    listed = [json.loads(line) for line in done.stdout.splitlines()]
    assert sorted(row["host"] for row in listed) == sorted(r["name"].split("-")[0] for r in reports)
    done = reader(fleet, ["ls", url])
    assert b"hostA" in done.stdout and b"hostB" in done.stdout
    assert PASSWORD.encode() not in done.stdout + done.stderr

    # A session replayed from the database gives its peer exactly the frames it got live, and
    # so does one first copied into a file (offline replay, docs/fleet.md).
    offline = tmp_path / "offline.db"
    done = reader(fleet, ["copy", url, "--connection", str(ids["hostB-1"]), str(offline)])
    assert done.returncode == 0, done.stderr.decode()
    assert PASSWORD.encode() not in done.stdout + done.stderr
    live = {r["name"]: r for r in reports}
    # (On each host the first session, open through the outage, and the one begun during
    # it; every other one was compared byte for byte with the database above.)
    replayed_from_db = ["hostA-0", "hostA-late", "hostB-0", "hostB-late"]
    replays = [(name, [url, "--connection", str(ids[name])]) for name in replayed_from_db]
    replays.append(("hostB-1", [str(offline)]))

    def replay_one(name: str, source: list[str]) -> dict[str, Any]:
        host = next(h for h in fleet.hosts if name.startswith(h.name))
        with proxy_on(host, ["replay", *source, "--listen", "127.0.0.1:0"]) as replay:
            again = Peers(host, replay.url, [name])
            again.started()
            for text in live[name]["lines"]:
                again.send(text)
                again.wait()
            (replayed,) = again.finish()
            assert replay.stop() == 0, replay.stderr_text
        return replayed

    with ThreadPoolExecutor(len(replays)) as pool:  # all at once: startup dominates
        results = list(pool.map(lambda job: replay_one(*job), replays))
    for (name, _), replayed in zip(replays, results, strict=True):
        assert replayed["sent"] == live[name]["sent"], name
        assert replayed["received"] == live[name]["received"], name


def test_an_editor_on_a_host_records_with_the_password_from_pgpass(
    fleet: Fleet, tmp_path: Path
) -> None:
    """docs/fleet.md's Zed entry: the URL names no password, ``PGPASSFILE`` supplies it."""
    url = fleet.database()
    dbname = url.rsplit("/", 1)[1]
    bare = fleet.pg.url(dbname, password=False)
    pgpass = tmp_path / "pgpass"
    pgpass.write_text(f"{fleet.db.ip}:{fleet.pg.port}:{dbname}:{USER}:{PASSWORD}\n")
    pgpass.chmod(0o600)
    host = fleet.hosts[1]
    lines = [b'{"jsonrpc":"2.0","id":%d,"method":"_editor/ping"}\n' % n for n in range(5)]
    proc = host.popen(
        [*proxy_exe(), "--record", bare, "--", *ECHO_AGENT],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={**os.environ, "PGPASSFILE": str(pgpass)},
    )
    out, err = proc.communicate(b"".join(lines), timeout=TIMEOUT)
    assert out == b"".join(lines)
    assert proc.returncode == 0, err
    assert incident_lines(err) == []
    stored = stored_connections(fleet, url)
    (conn,) = stored.values()
    assert conn["host"] == host.name
    assert [raw for _, d, raw in conn["frames"] if d == "c2a"] == lines
    assert [raw for _, d, raw in conn["frames"] if d == "a2c"] == lines
    row = fleet.rows(url, "SELECT * FROM connections")
    assert PASSWORD not in repr(row)


LIGHT_CONNECTIONS = 200
LIGHT_FRAMES = 25


def test_200_connections_on_each_of_two_hosts_into_one_database(fleet: Fleet) -> None:
    from tests.peers.fleet_client import light_frame

    url = fleet.database()
    ws_args = ["--record", url, "--token", TOKEN, "--heartbeat", "0", "--", "cat"]
    with ws_proxies(fleet, ws_args) as (proxy_a, proxy_b):
        clients = [
            proxy.host.popen(
                [
                    *CLIENT,
                    "light",
                    proxy.url,
                    TOKEN,
                    str(LIGHT_CONNECTIONS),
                    str(LIGHT_FRAMES),
                    proxy.host.name,
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                cwd=ROOT,
            )
            for proxy in (proxy_a, proxy_b)
        ]
        for client in clients:
            out, err = client.communicate(timeout=300)
            assert client.returncode == 0, err.decode()[-2000:]
            assert json.loads(out.splitlines()[-1]) == {
                "connections": LIGHT_CONNECTIONS,
                "frames": LIGHT_CONNECTIONS * LIGHT_FRAMES,
            }
        assert proxy_a.stop() == 0, proxy_a.stderr_text
        assert proxy_b.stop() == 0, proxy_b.stderr_text
    for proxy in (proxy_a, proxy_b):
        assert incidents(proxy) == [], proxy.stderr_text
    stored = stored_connections(fleet, url)
    assert len(stored) == 2 * LIGHT_CONNECTIONS
    seen: set[tuple[str, int]] = set()
    for cid, conn in stored.items():
        seqs = [seq for seq, _, _ in conn["frames"]]
        assert seqs == list(range(1, 2 * LIGHT_FRAMES + 1)), f"connection {cid}: {seqs}"
        assert conn["dropped"] == 0
        c2a = [raw for _, d, raw in conn["frames"] if d == "c2a"]
        a2c = [raw for _, d, raw in conn["frames"] if d == "a2c"]
        client = json.loads(c2a[0])["params"]["client"]
        expected = [light_frame(conn["host"], client, n).encode() for n in range(LIGHT_FRAMES)]
        assert c2a == expected and a2c == expected
        seen.add((conn["host"], client))
    assert seen == {(h.name, c) for h in fleet.hosts for c in range(LIGHT_CONNECTIONS)}
