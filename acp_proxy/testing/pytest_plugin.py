"""pytest plugin: run tests against a recorded agent, re-recording on demand.

Registered through the ``pytest11`` entry point, so it is active wherever acp-proxy is
installed; it only adds an option, two ini keys, a marker and fixtures, and imports nothing
heavy until a test asks for a fixture.

::

    @pytest.mark.acp_agent("python", "my_agent.py")
    async def test_hello(acp_agent):
        async with acp_agent.connect() as client:
            await client.initialize()
            session = await client.new_session()
            assert await session.prompt("hi") == "end_turn"

Record modes (``--acp-record-mode`` or the ``acp_record_mode`` ini key), as in
pytest-recording:

- ``none`` (default): always replay; a missing recording fails the test.
- ``once``: replay when the recording exists, otherwise run the real agent through the
  recording proxy and create it.
- ``new``: run the real agent and append a new connection to the recording (older
  connections are kept, e.g. sessions that a later test loads).
- ``all``: delete the recording and record it again.

The recording of a test is ``<test file dir>/acp_recordings/<module>/<test name>.jsonl``
(the export format: text, diffable, fit for version control) unless the marker says
``recording="path"`` (relative to the test file; a ``.db`` path keeps the SQLite file
instead). A ``.jsonl`` recording is made by recording into a temporary SQLite file next to
it and exporting that when the test ends (secrets redacted unless the ``acp_record_redact``
ini key is false). Extra ``acp-proxy replay`` options go in ``replay_args=[...]``.

``recording`` may also be a ``postgresql://`` URL (``$VARS`` in it are expanded, so the URL,
or its password, can come from the environment; ``PG*`` variables and ``~/.pgpass`` work
too): the test replays from the team's database, usually one connection or session of it
(``replay_args=["--session", "sess_..."]``). Modes ``once`` and ``new`` record into that
database through ``--record URL``; ``all`` is refused (it would delete the shared store).
"""

from __future__ import annotations

import os
import re
import shutil
import sys
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from acp_proxy.testing.client import AcpTestClient

MODES = ("none", "once", "new", "all")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("acp-proxy", "ACP record/replay (acp-proxy)")
    group.addoption(
        "--acp-record-mode",
        choices=MODES,
        default=None,
        help="none: replay only (default); once: record missing recordings; "
        "new: record and append; all: re-record everything.",
    )
    parser.addini("acp_record_mode", "default --acp-record-mode", default="none")
    parser.addini(
        "acp_record_redact",
        "redact secrets when writing .jsonl recordings",
        type="bool",
        default=True,
    )
    parser.addini(
        "acp_recordings_dir",
        "directory (next to each test file) for recordings",
        default="acp_recordings",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "acp_agent(*argv, recording=None, replay_args=()): the real agent command used by "
        "the acp_agent fixture when recording.",
    )


def _proxy_exe() -> list[str]:
    exe = shutil.which("acp-proxy")
    return [exe] if exe else [sys.executable, "-m", "acp_proxy"]


@dataclass(slots=True)
class AcpAgent:
    """What the fixture gives a test: the command to launch, and whether it replays."""

    mode: str  # "replay" | "record"
    recording: Path
    """Where the recording is (for a ``postgresql://`` store, its URL without password)."""
    command: list[str]
    agent_command: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)

    @property
    def replaying(self) -> bool:
        return self.mode == "replay"

    @asynccontextmanager
    async def connect(self, **kwargs: Any) -> AsyncIterator[AcpTestClient]:
        """An :class:`~acp_proxy.testing.client.AcpTestClient` on :attr:`command`."""
        from acp_proxy.testing.client import AcpTestClient

        kwargs.setdefault("env", self.env)
        async with AcpTestClient.spawn(self.command, **kwargs) as client:
            yield client


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_") or "test"


@pytest.fixture
def acp_record_mode(request: pytest.FixtureRequest) -> str:
    """The record mode in effect for this test."""
    mode = request.config.getoption("--acp-record-mode") or request.config.getini("acp_record_mode")
    if mode not in MODES:
        raise pytest.UsageError(f"acp_record_mode must be one of {', '.join(MODES)}")
    return str(mode)


@pytest.fixture
def acp_agent_command(request: pytest.FixtureRequest) -> list[str] | None:
    """The real agent command (from the ``acp_agent`` marker); override to compute it."""
    marker = request.node.get_closest_marker("acp_agent")
    if marker is None or not marker.args:
        return None
    return [str(a) for a in marker.args]


@pytest.fixture
def acp_recording_path(request: pytest.FixtureRequest) -> Path:
    """Where this test's recording lives (a ``postgresql://`` URL as a
    :class:`~acp_proxy.store.engine.RecordingUrl`)."""
    base = Path(str(request.node.path)).parent
    marker = request.node.get_closest_marker("acp_agent")
    if marker is not None and marker.kwargs.get("recording"):
        wanted = os.path.expandvars(str(marker.kwargs["recording"]))
        from acp_proxy.store.engine import RecordingUrl, parse_location

        location = parse_location(wanted)
        if isinstance(location, RecordingUrl):
            return location  # type: ignore[return-value]  # a str, not a Path
        return base / wanted
    directory = request.config.getini("acp_recordings_dir")
    module = _slug(Path(str(request.node.path)).stem)
    return base / str(directory) / module / f"{_slug(request.node.name)}.jsonl"


def _remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        with_suffix = Path(str(path) + suffix)
        if with_suffix.exists():
            os.unlink(with_suffix)


def _import_jsonl(jsonl: Path, db_path: Path) -> None:
    from acp_proxy.formats.jsonl_import import import_export
    from acp_proxy.store.schema import connect

    db = connect(db_path, create=True)
    try:
        import_export(jsonl, db)
    finally:
        db.close()


def _export_jsonl(db_path: Path, jsonl: Path, redact: bool) -> None:
    from acp_proxy.formats.jsonl import export_recording
    from acp_proxy.store.schema import connect

    db = connect(db_path, create=False, readonly=True)
    partial = jsonl.with_name(jsonl.name + ".partial")
    try:
        with partial.open("wb") as out:
            export_recording(db, out, redact=redact)
        os.replace(partial, jsonl)
    finally:
        db.close()


@pytest.fixture
def acp_agent(
    request: pytest.FixtureRequest,
    acp_record_mode: str,
    acp_agent_command: list[str] | None,
    acp_recording_path: Path,
) -> Iterator[AcpAgent]:
    """The agent for this test: ``acp-proxy replay`` or the real agent being recorded."""
    marker = request.node.get_closest_marker("acp_agent")
    replay_args: Sequence[str] = marker.kwargs.get("replay_args", ()) if marker else ()
    path = acp_recording_path
    if not isinstance(path, Path):
        yield from _database_agent(path, acp_record_mode, acp_agent_command, replay_args)
        return
    exists = path.exists()
    record = acp_record_mode in ("new", "all") or (acp_record_mode == "once" and not exists)
    if not record:
        if not exists:
            pytest.fail(
                f"no ACP recording at {path} (record it with --acp-record-mode=once)",
                pytrace=False,
            )
        command = [*_proxy_exe(), "replay", str(path), *replay_args]
        yield AcpAgent("replay", path, command, acp_agent_command)
        return
    if not acp_agent_command:
        pytest.fail(
            f"recording {path} needs the real agent: add @pytest.mark.acp_agent(*argv) or "
            "override the acp_agent_command fixture",
            pytrace=False,
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix != ".jsonl":
        if acp_record_mode == "all" and exists:
            _remove_db(path)
        command = [*_proxy_exe(), "--record", str(path), "--", *acp_agent_command]
        yield AcpAgent("record", path, command, acp_agent_command)
        return
    scratch = path.with_name(path.name + ".recording.db")
    _remove_db(scratch)
    if acp_record_mode == "new" and exists:
        _import_jsonl(path, scratch)
    command = [*_proxy_exe(), "--record", str(scratch), "--", *acp_agent_command]
    try:
        yield AcpAgent("record", path, command, acp_agent_command)
        if scratch.exists():
            redact = bool(request.config.getini("acp_record_redact"))
            _export_jsonl(scratch, path, redact)
    finally:
        _remove_db(scratch)


def _database_agent(
    where: Any, mode: str, agent_command: list[str] | None, replay_args: Sequence[str]
) -> Iterator[AcpAgent]:
    """The agent of a test whose recording is a PostgreSQL store (a ``RecordingUrl``)."""
    from acp_proxy.store.reader import RecordingReader
    from acp_proxy.store.schema import RecordingError

    if mode == "all":
        pytest.fail(
            f"acp_record_mode=all would delete the recordings in {where}: record with "
            "once or new, clean up the database yourself",
            pytrace=False,
        )
    try:
        with RecordingReader.open(where) as reader:
            exists = bool(reader.connection_ids())
    except RecordingError as exc:
        if mode == "none" or "holds no acp-proxy recording" not in str(exc):
            pytest.fail(f"cannot replay from {where}: {exc}", pytrace=False)
        exists = False
    if mode == "none" or (mode == "once" and exists):
        if not exists:
            pytest.fail(f"no ACP recording in {where}", pytrace=False)
        command = [*_proxy_exe(), "replay", where.url, *replay_args]
        yield AcpAgent("replay", where, command, agent_command)
        return
    if not agent_command:
        pytest.fail(
            f"recording into {where} needs the real agent: add @pytest.mark.acp_agent(*argv)",
            pytrace=False,
        )
    command = [*_proxy_exe(), "--record", where.url, "--", *agent_command]
    yield AcpAgent("record", where, command, agent_command)
