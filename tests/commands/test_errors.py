"""Consistent errors through the real executable: one line, the same exit code, no traceback.

A directory given as the recording reads the same for every command that takes one; an
unusable ``--record`` never stops the proxy (forwarding wins); conflicting options and
places the demo cannot write fail up front in one line; export to stdout writes nothing
from a damaged recording.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ECHO_AGENT, incident_lines, proxy_exe, run_proxy
from tests.peers import PEERS
from tests.transport.ws.helpers import ws_server

LINE = b'{"jsonrpc":"2.0","id":1,"method":"_ping"}\n'
RESPONDER = [sys.executable, str(PEERS / "responder_agent.py")]


def one_line(done: subprocess.CompletedProcess[bytes], code: int = 1) -> str:
    """The only stderr line of a failed command."""
    err = done.stderr.decode()
    assert done.returncode == code, (done.returncode, err)
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


@pytest.mark.parametrize(
    "args",
    [
        ["ls", "{d}"],
        ["show", "{d}"],
        ["stats", "{d}"],
        ["dump", "{d}"],
        ["check", "{d}"],
        ["reindex", "{d}"],
        ["export", "{d}"],
        ["web", "{d}", "--listen", "127.0.0.1:0"],
        ["replay", "{d}"],
        ["import", "{f}", "{d}"],
        ["diff", "{d}", "{d}"],
        ["search", "{d}", "text"],
    ],
    ids=lambda args: args[0],
)
def test_a_directory_as_the_recording_is_one_line_exit_1(tmp_path: Path, args: list[str]) -> None:
    directory = tmp_path / "recordings"
    directory.mkdir()
    export = tmp_path / "e.jsonl"
    export.write_bytes(b"")
    argv = [a.format(d=directory, f=export) for a in args]
    line = one_line(run_proxy(argv))
    assert line == f"Error: {directory} is a directory, not a recording"


def test_a_directory_as_the_export_file_is_one_line(tmp_path: Path) -> None:
    line = one_line(run_proxy(["import", str(tmp_path), str(tmp_path / "x.db")]))
    assert line == f"Error: {tmp_path} is a directory, not an export file"
    assert not (tmp_path / "x.db").exists()


def test_a_directory_as_the_export_output_is_one_line(tmp_path: Path) -> None:
    db = tmp_path / "r.db"
    assert run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=LINE).returncode == 0
    line = one_line(run_proxy(["export", str(db), "-o", str(tmp_path)]))
    assert line == f"Error: {tmp_path} is a directory, not an export file"


def _unusable_records(tmp_path: Path) -> dict[str, Path]:
    directory = tmp_path / "a-directory"
    directory.mkdir()
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"this is not a database" * 100)
    return {
        "directory": directory,
        "missing parent": tmp_path / "no" / "such" / "x.db",
        "unwritable": Path("/proc/acp-proxy-test.db"),  # not even root can create it
        "corrupt": corrupt,
    }


@pytest.mark.parametrize("kind", ["directory", "missing parent", "unwritable", "corrupt"])
@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_unusable_record_path_warns_and_keeps_forwarding(
    tmp_path: Path, kind: str, how: str
) -> None:
    record = _unusable_records(tmp_path)[kind]
    if how == "option":
        done = run_proxy(["--record", str(record), "--", *ECHO_AGENT], stdin=LINE)
    else:
        done = run_proxy(["--", *ECHO_AGENT], stdin=LINE, env={"ACP_PROXY_RECORD": str(record)})
    err = done.stderr.decode()
    assert done.returncode == 0, err
    assert done.stdout == LINE  # the agent ran and every byte crossed
    assert "Traceback" not in err and "Usage:" not in err
    disabled = [line for line in err.splitlines() if "recording disabled" in line]
    assert len(disabled) == 1 and "forwarding continues" in disabled[0], err
    if kind == "corrupt":
        assert record.read_bytes() == b"this is not a database" * 100


def test_ws_and_connect_with_unusable_record_paths_still_serve(tmp_path: Path) -> None:
    paths = _unusable_records(tmp_path)
    with ws_server(["--record", str(paths["directory"]), "--", *RESPONDER]) as srv:
        done = subprocess.run(
            [*proxy_exe(), "connect", srv.url, "--record", str(paths["missing parent"])],
            input=LINE,
            capture_output=True,
            timeout=60,
        )
        assert done.returncode == 0, done.stderr
        assert b'"id":1' in done.stdout  # answered through ws and the bridge
        assert done.stderr.decode().count("recording disabled") == 1
    assert srv.stderr_text.count("recording disabled") == 1, srv.stderr_text
    assert "Usage:" not in srv.stderr_text


def test_ui_with_a_directory_as_the_recording_warns_and_proxies(tmp_path: Path) -> None:
    done = run_proxy(
        ["--record", str(tmp_path), "--ui", "127.0.0.1:0", "--", *ECHO_AGENT], stdin=LINE
    )
    assert done.returncode == 0 and done.stdout == LINE
    assert b"inspector not started" in done.stderr and b"Traceback" not in done.stderr


def test_demo_keep_and_force_conflict(tmp_path: Path) -> None:
    done = run_proxy(["demo", "--db", str(tmp_path / "d.db"), "--keep", "--force"])
    assert "--keep" in one_line(done, code=2) and "--force" in one_line(done, code=2)
    assert done.stdout == b"" and not (tmp_path / "d.db").exists()


@pytest.mark.parametrize("where", ["/proc/acp-demo.db", "{tmp}/no/such/dir/demo.db"])
def test_demo_that_cannot_write_fails_up_front_in_one_line(tmp_path: Path, where: str) -> None:
    db = where.format(tmp=tmp_path)
    done = run_proxy(["demo", "--db", db], timeout=120)
    line = one_line(done)
    assert line.startswith("Error: ") and db in line
    assert done.stdout == b""  # no transcript before the error


def _damaged_recording(tmp_path: Path) -> Path:
    db = tmp_path / "damaged.db"
    lines = b"".join(
        b'{"jsonrpc":"2.0","method":"_n","params":{"n":%d,"pad":"%s"}}\n' % (i, b"x" * 300)
        for i in range(3000)
    )
    done = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=lines)
    assert done.returncode == 0 and done.stdout == lines
    size = db.stat().st_size
    with db.open("r+b") as fh:  # wreck pages in the last third (the frames' b-tree)
        fh.seek(size * 2 // 3)
        fh.write(b"\xff" * 32768)
    return db


def test_export_of_a_damaged_recording_writes_nothing_to_stdout(tmp_path: Path) -> None:
    db = _damaged_recording(tmp_path)
    done = run_proxy(["export", str(db), "--no-redact"])
    line = one_line(done)
    assert line.startswith(f"Error: {db}: the recording is damaged")
    assert done.stdout == b""
    to_file = run_proxy(["export", str(db), "-o", str(tmp_path / "out.jsonl")])
    one_line(to_file)
    assert not (tmp_path / "out.jsonl").exists()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


NO_OVERRIDE = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
]
"""As root: run without the capabilities that let root ignore file permissions."""


def _as_user(argv: list[str]) -> list[str]:
    """``argv`` run so that file permissions apply (root drops its override capabilities)."""
    if os.geteuid() != 0:
        return argv
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: permissions do not apply to root")
    return [*NO_OVERRIDE, *argv]


def _on_read_only_mount(directory: Path, argv: list[str]) -> list[str]:
    """``argv`` run in a private mount namespace where ``directory`` is mounted read-only."""
    probe = subprocess.run(["unshare", "-m", "true"], capture_output=True)
    if shutil.which("unshare") is None or probe.returncode != 0:
        pytest.skip("no private mount namespace here (unshare -m)")
    script = 'mount --bind "$1" "$1" && mount -o remount,ro,bind "$1" && shift && exec "$@"'
    return ["unshare", "-m", "sh", "-c", script, "sh", str(directory), *argv]


def _recorded(tmp_path: Path) -> tuple[Path, Path]:
    """A recording of one ping and its export."""
    db = tmp_path / "good.db"
    assert run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=LINE).returncode == 0
    export = tmp_path / "good.jsonl"
    done = run_proxy(["export", str(db), "--no-redact", "-o", str(export)])
    assert done.returncode == 0, done.stderr
    return db, export


@pytest.mark.parametrize("command", ["copy", "import"])
@pytest.mark.parametrize("place", ["no permission", "read-only mount"])
def test_copy_or_import_where_nobody_may_write_is_one_line(
    tmp_path: Path, command: str, place: str
) -> None:
    db, export = _recorded(tmp_path)
    target = tmp_path / "target"
    target.mkdir()
    argv = [*proxy_exe(), command, str(db if command == "copy" else export), str(target / "c.db")]
    if place == "no permission":
        target.chmod(0o555)
        argv = _as_user(argv)
        reason = "Permission denied"
    else:
        argv = _on_read_only_mount(target, argv)
        reason = "Read-only file system"
    try:
        done = subprocess.run(argv, capture_output=True, timeout=60)
    finally:
        target.chmod(0o755)
    assert one_line(done) == f"Error: cannot create {target / 'c.db'}: {reason}"
    assert list(target.iterdir()) == []


@pytest.mark.parametrize("args", [["ls"], ["show"], ["stats"], ["check"], ["export"], ["dump"]])
def test_a_recording_the_user_may_not_read_says_permission_denied(
    tmp_path: Path, args: list[str]
) -> None:
    db, _ = _recorded(tmp_path)
    db.chmod(0o000)
    try:
        done = subprocess.run(
            _as_user([*proxy_exe(), *args, str(db)]), capture_output=True, timeout=60
        )
    finally:
        db.chmod(0o600)
    assert one_line(done) == f"Error: cannot read {db}: Permission denied"


def test_a_recording_in_a_directory_the_user_may_not_enter_says_so(tmp_path: Path) -> None:
    db, _ = _recorded(tmp_path)
    tmp_path.chmod(0o000)
    try:
        done = subprocess.run(_as_user([*proxy_exe(), "ls", str(db)]), capture_output=True)
    finally:
        tmp_path.chmod(0o755)
    assert one_line(done) == f"Error: cannot read {db}: Permission denied"


ACCEPTED = "a recording is a SQLite file or a postgresql:// or postgres:// URL"


@pytest.mark.parametrize("url", ["mysql://me:secret@db.internal/acp", "http://example.test/x"])
@pytest.mark.parametrize("args", [["ls", "{u}"], ["show", "{u}"], ["copy", "{u}", "{f}"]])
def test_an_unknown_scheme_is_one_line_naming_the_accepted_ones(
    tmp_path: Path, url: str, args: list[str]
) -> None:
    argv = [a.format(u=url, f=tmp_path / "x.db") for a in args]
    line = one_line(run_proxy(argv))
    scheme = url.split("://")[0]
    assert line == f"Error: unknown scheme {scheme}://: {ACCEPTED}"
    assert "secret" not in line


@pytest.mark.parametrize("how", ["option", "environment"])
def test_an_unknown_scheme_to_record_into_disables_recording_and_forwards(how: str) -> None:
    url = "mysql://me:secret@db.internal/acp"
    if how == "option":
        done = run_proxy(["--record", url, "--", *ECHO_AGENT], stdin=LINE)
    else:
        done = run_proxy(["--", *ECHO_AGENT], stdin=LINE, env={"ACP_PROXY_RECORD": url})
    assert done.returncode == 0 and done.stdout == LINE
    assert incident_lines(done.stderr) == [
        b"acp-proxy: recording disabled: unknown scheme mysql://: "
        + ACCEPTED.encode()
        + b"; forwarding continues"
    ]


def test_recording_into_a_file_the_user_may_not_write_is_disabled_at_once(
    tmp_path: Path,
) -> None:
    db, _ = _recorded(tmp_path)
    db.chmod(0o444)
    try:
        done = subprocess.run(
            _as_user([*proxy_exe(), "--record", str(db), "--", *ECHO_AGENT]),
            input=LINE,
            capture_output=True,
            timeout=60,
        )
    finally:
        db.chmod(0o600)
    assert done.returncode == 0 and done.stdout == LINE
    disabled = [line for line in incident_lines(done.stderr) if b"recording disabled" in line]
    assert disabled == [
        b"acp-proxy: recording disabled: cannot write %s: Permission denied; forwarding continues"
        % str(db).encode()
    ]
