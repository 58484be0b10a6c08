"""Every reader on a ``postgresql://`` URL: the same output as on the same recording in SQLite.

The committed demo recordings (real traffic) are imported into a SQLite file by the real
``acp-proxy import``, then copied row for row into a real PostgreSQL database
(:func:`tests.pg_mirror.mirror_to_pg`). Each read command runs through the real executable on
both and must print the same bytes (the location, where a command prints it, is the one
difference, and the URL is printed without its password).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import orjson
import pytest

from acp_proxy.store.pg import connect_pg
from tests.conftest import ECHO_AGENT, run_proxy
from tests.peers.sdk_clients import run_v1_client, run_v2_client
from tests.pg_mirror import mirror_to_pg
from tests.pg_server import PASSWORD, PgServer
from tests.replay.conftest import V1_PROMPTS, V2_PROMPTS, Recorded, replay_argv
from tests.replay.conftest import v1_recording as v1_recording
from tests.replay.conftest import v2_recording as v2_recording

RECORDINGS = Path(__file__).parents[2] / "recordings"


class Stores:
    """One recording twice: a SQLite file and a PostgreSQL database (URL with password)."""

    def __init__(self, db: Path, url: str, server: PgServer) -> None:
        self.db = db
        self.url = url
        self.server = server
        self.shown = url.replace(f":{PASSWORD}@", "@")  # the URL as output shows it

    def run(self, args: list[str], on: str) -> subprocess.CompletedProcess[bytes]:
        location = str(self.db) if on == "sqlite" else self.url
        return run_proxy([a.replace("{db}", location) for a in args])


@pytest.fixture(scope="module")
def stores(tmp_path_factory: pytest.TempPathFactory, pg_server: PgServer) -> Stores:
    """The two demo recordings (4 connections, stderr lines, events) in both stores."""
    db = tmp_path_factory.mktemp("pgread") / "demo.db"
    for name in ("v1-load.jsonl", "v2-resume-replay.jsonl"):
        done = run_proxy(["import", str(RECORDINGS / name), str(db)])
        assert done.returncode == 0, done.stderr
    url = pg_server.database()
    mirror_to_pg(db, url)
    return Stores(db, url, pg_server)


def _session_id(stores: Stores) -> str:
    done = stores.run(["show", "{db}", "--json", "-c", "3"], on="sqlite")
    return str(orjson.loads(done.stdout)["connections"][0]["sessions"][0]["sessionId"])


READS = [
    ["ls", "{db}"],
    ["ls", "{db}", "--json"],
    ["dump", "{db}"],
    ["dump", "{db}", "--full", "--stderr"],
    ["dump", "{db}", "-c", "3"],
    ["show", "{db}"],
    ["show", "{db}", "--json"],
    ["show", "{db}", "--raw", "-c", "2"],
    ["check", "{db}"],
    ["check", "{db}", "--min-tier", "warning", "-c", "1"],
    ["stats", "{db}"],
    ["stats", "{db}", "--json"],
    ["stats", "{db}", "-c", "4", "--json"],
    ["diff", "{db}", "{db}", "-c", "1", "-c", "1"],
    ["diff", "{db}", "{db}", "-c", "1", "-c", "3", "--json"],
]


@pytest.mark.parametrize("args", READS, ids=[" ".join(a[:1] + a[2:]) for a in READS])
def test_a_read_on_a_url_prints_what_it_prints_on_the_file(stores: Stores, args: list[str]) -> None:
    on_file = stores.run(args, on="sqlite")
    on_pg = stores.run(args, on="pg")
    assert b"Traceback" not in on_pg.stderr, on_pg.stderr.decode()
    assert on_pg.returncode == on_file.returncode, on_pg.stderr.decode()
    assert on_file.stdout.strip(), on_file.stderr  # the comparison is of something
    assert PASSWORD.encode() not in on_pg.stdout + on_pg.stderr
    shown = on_pg.stdout.replace(stores.shown.encode(), str(stores.db).encode())
    assert shown == on_file.stdout


def test_show_of_one_session_on_a_url(stores: Stores) -> None:
    args = ["show", "{db}", "--session", _session_id(stores)]
    on_file, on_pg = stores.run(args, on="sqlite"), stores.run(args, on="pg")
    assert on_pg.returncode == 0, on_pg.stderr
    assert on_pg.stdout == on_file.stdout and on_pg.stdout


@pytest.mark.parametrize("fmt", ["json", "sarif", "junit"])
def test_check_reports_name_the_url_without_its_password(stores: Stores, fmt: str) -> None:
    args = ["check", "{db}", "--format", fmt]
    on_file, on_pg = stores.run(args, on="sqlite"), stores.run(args, on="pg")
    assert on_pg.returncode == on_file.returncode == 0, on_pg.stderr
    assert PASSWORD.encode() not in on_pg.stdout
    assert stores.shown.encode() in on_pg.stdout
    assert on_pg.stdout.replace(stores.shown.encode(), str(stores.db).encode()) == on_file.stdout


def test_diff_between_a_file_and_a_url_is_equal(stores: Stores) -> None:
    done = run_proxy(["diff", str(stores.db), stores.url, "-c", "3", "-c", "3"])
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[1].startswith(f"+++ {stores.shown} connection 3".encode())
    assert done.stdout.rstrip().endswith(b": equal")
    assert PASSWORD.encode() not in done.stdout


def test_ls_tells_hosts_apart(tmp_path: Path, pg_url: str) -> None:
    from tests.helpers import insert_frames

    init = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}\n'
    db = tmp_path / "hosts.db"
    for target in (db, pg_url):
        for host in ("alpha.internal", "beta.internal"):
            insert_frames(target, [("c2a", init)], connection={"host": host}, index=True)
    outputs = []
    for target in (str(db), pg_url):
        done = run_proxy(["ls", target])
        assert done.returncode == 0, done.stderr
        lines = done.stdout.decode().splitlines()
        assert "host" in lines[0].split()
        assert "alpha.internal" in lines[1] and "beta.internal" in lines[2]
        as_json = run_proxy(["ls", target, "--json"])
        hosts = [orjson.loads(line)["host"] for line in as_json.stdout.splitlines()]
        assert hosts == ["alpha.internal", "beta.internal"]
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]


def test_reindex_on_a_url_rewrites_the_derived_columns(stores: Stores, pg_server: PgServer) -> None:
    url = pg_server.database()
    mirror_to_pg(stores.db, url)
    name = url.rsplit("/", 1)[1]
    pg_server.psql(
        "UPDATE frames SET kind = NULL, rpc_id = NULL, method = NULL, session_id = NULL, "
        "update_kind = NULL, entity_type = NULL, entity_id = NULL; "
        "UPDATE connections SET protocol_version = NULL, agent_info = NULL, client_info = NULL",
        name,
    )
    before = run_proxy(["dump", url])
    assert before.stdout != stores.run(["dump", "{db}"], on="sqlite").stdout  # the premise
    done = run_proxy(["reindex", url])
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().strip().endswith("row(s) changed")
    assert PASSWORD.encode() not in done.stderr
    for args in (["dump", "{db}"], ["ls", "{db}", "--json"], ["stats", "{db}", "--json"]):
        got = run_proxy([a.replace("{db}", url) for a in args])
        assert got.stdout == stores.run(args, on="sqlite").stdout, args


def test_reindex_of_an_unchanged_url_changes_nothing(stores: Stores) -> None:
    done = run_proxy(["reindex", stores.url])
    assert done.returncode == 0, done.stderr
    assert done.stderr.decode().strip().endswith(": 0 row(s) changed")


def _one_line(done: subprocess.CompletedProcess[bytes]) -> str:
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert b"Traceback" not in done.stderr
    assert PASSWORD.encode() not in done.stdout + done.stderr
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


@pytest.mark.parametrize("command", ["ls", "dump", "show", "check", "stats", "reindex", "replay"])
def test_a_wrong_password_is_one_line(stores: Stores, command: str) -> None:
    url = stores.url.replace(PASSWORD, "not-the-password")
    line = _one_line(run_proxy([command, url], timeout=60))
    assert "password authentication failed" in line
    assert "not-the-password" not in line


@pytest.mark.parametrize("command", ["ls", "dump", "show", "stats", "web"])
def test_an_unreachable_database_is_one_line(command: str) -> None:
    from tests.pg_server import free_port

    url = f"postgresql://acp:{PASSWORD}@127.0.0.1:{free_port()}/acp"
    args = [command, url] + (["--listen", "127.0.0.1:0"] if command == "web" else [])
    line = _one_line(run_proxy(args, timeout=60))
    assert line.startswith("Error: cannot connect to postgresql://acp@127.0.0.1:")


def test_a_database_without_a_recording_is_one_line(pg_url: str) -> None:
    for command in ("ls", "check", "replay", "reindex"):
        line = _one_line(run_proxy([command, pg_url]))
        assert line.endswith("the database holds no acp-proxy recording"), line


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["dump", "{db}", "-c", "99"], "Error: no connection 99 in this recording"),
        (["show", "{db}", "-s", "nope"], "Error: no session 'nope' in this recording"),
        (["check", "{db}", "-c", "99"], "Error: no connection 99 in this recording"),
        (["stats", "{db}", "-c", "99"], "Error: no connection 99 in this recording"),
        (["replay", "{db}", "-c", "99"], "no connection 99"),
        (["replay", "{db}", "--session", "nope"], "nope"),
    ],
)
def test_what_is_not_in_the_database_is_one_line(
    stores: Stores, args: list[str], message: str
) -> None:
    on_pg = _one_line(stores.run(args, on="pg"))
    on_file = _one_line(stores.run(args, on="sqlite"))
    assert message in on_pg
    assert on_pg == on_file.replace(str(stores.db), stores.shown)


# -- replay from a URL: SDK clients see what they saw live --------------------------------


async def test_replay_of_a_connection_from_a_url(
    v1_recording: Recorded,
    pg_server: PgServer,
) -> None:
    url = pg_server.database()
    mirror_to_pg(v1_recording.path, url)
    replayed = await run_v1_client(replay_argv(url, "--connection", "1"), V1_PROMPTS, "/else")  # type: ignore[arg-type]
    assert replayed.results == v1_recording.observed.results
    assert replayed.updates == v1_recording.observed.updates
    assert replayed.agent_requests == v1_recording.observed.agent_requests


async def test_replay_of_a_session_from_a_url(
    v2_recording: Recorded,
    pg_server: PgServer,
) -> None:
    url = pg_server.database()
    mirror_to_pg(v2_recording.path, url)
    argv = replay_argv(url, "--session", v2_recording.session_id)  # type: ignore[arg-type]
    replayed = await run_v2_client(argv, V2_PROMPTS, "/elsewhere")
    assert replayed.results == v2_recording.observed.results
    assert replayed.updates == v2_recording.observed.updates


def test_what_the_proxy_records_into_a_url_reads_as_the_file(tmp_path: Path, pg_url: str) -> None:
    """The real writer (``--record URL``) and the readers together: the same traffic
    recorded into a file and into PostgreSQL reads the same (times aside)."""
    from tests.conftest import ECHO_AGENT

    lines = b"".join(
        b'{"jsonrpc":"2.0","id":%d,"method":"session/prompt","params":{"sessionId":"s"}}\n' % n
        for n in range(1, 6)
    )
    db = tmp_path / "proxy.db"
    for target in (str(db), pg_url):
        done = run_proxy(["--record", target, "--", *ECHO_AGENT], stdin=lines)
        assert done.returncode == 0 and done.stdout == lines, done.stderr
    for args in (["dump", "{db}", "--full"], ["check", "{db}"], ["stats", "{db}"]):
        on_file = run_proxy([a.replace("{db}", str(db)) for a in args])
        on_pg = run_proxy([a.replace("{db}", pg_url) for a in args])
        assert on_pg.returncode == on_file.returncode, on_pg.stderr
        strip = re.compile(rb"^ +(\d+) +[\d.]+s ", re.M)  # dump's time column
        assert strip.sub(rb"\1 ", on_pg.stdout) == strip.sub(rb"\1 ", on_file.stdout), args
    listed = orjson.loads(run_proxy(["ls", pg_url, "--json"]).stdout)
    assert listed["frame_count"] == 10 and listed["host"]
    assert run_proxy(["ls", pg_url]).stdout.splitlines()[0].split()[9] == b"host"


def test_ls_chooses_by_host_and_newest_on_a_url(pg_url: str) -> None:
    from tests.commands.test_ls import INIT, hosts_and_last

    for _ in range(3):
        done = run_proxy(["--record", pg_url, "--", *ECHO_AGENT], stdin=INIT)
        assert done.returncode == 0, done.stderr
    db = connect_pg(pg_url, create=False)
    db.execute("UPDATE connections SET host = 'build-box' WHERE id = 2")
    db.close()
    hosts_and_last(pg_url)
