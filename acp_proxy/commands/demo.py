"""``acp-proxy demo``: the bundled demo agent and scripted client, through the real proxy.

The scripted client (:mod:`acp_proxy.demo.client`) launches
``acp-proxy --record DB -- python -m acp_proxy.demo.agent`` exactly as an editor would,
plays a conversation (and reconnects to take the session back), then this command prints
what was recorded and which commands to try next.
"""

from __future__ import annotations

import shlex
import sys
import tempfile
import textwrap
from collections import Counter
from pathlib import Path

import click

from acp_proxy.commands.common import OptionConflict, fmt_exit, recording
from acp_proxy.demo.client import ClientError, run_scenario
from acp_proxy.store.engine import database_errors, open_database
from acp_proxy.store.reader import RecordingReader
from acp_proxy.store.schema import RecordingError, connect

DEMO_AGENT_MODULE = "acp_proxy.demo.agent"


def _is_demo_only(path: Path) -> bool:
    """Whether ``path`` is a recording made only by ``acp-proxy demo`` (safe to replace)."""
    try:
        db = open_database(path)
    except RecordingError:
        return False
    try:
        rows = RecordingReader(db).connections()
    except database_errors():
        return False
    finally:
        db.close()
    return all(DEMO_AGENT_MODULE in (r.agent_command or []) for r in rows)


def _remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def _check_writable(db: Path) -> None:
    """Open ``db`` for recording once, up front: a place the demo cannot write is one line.

    (Otherwise the proxy would warn "recording disabled" and forward anyway, as it should
    for an editor, and the demo would print its whole transcript before finding nothing.)
    """
    try:
        conn = connect(db, create=True, timeout=5.0)
    except RecordingError as exc:
        raise click.ClickException(f"cannot record the demo: {exc}") from None
    except OSError as exc:
        raise click.ClickException(
            f"cannot record the demo: cannot create {db}: {exc.strerror or exc}"
        ) from None
    conn.close()


def _prepare(db: Path, keep: bool, force: bool) -> None:
    if keep and force:
        raise OptionConflict("--keep (add to the recording) and --force (replace it) conflict")
    if db.is_dir():
        raise click.ClickException(f"{db} is a directory; give --db a file name")
    if not db.parent.is_dir():
        raise click.ClickException(f"cannot create {db}: {db.parent} is not a directory")
    if not db.exists() or db.stat().st_size == 0:
        return
    if keep:
        with recording(db):
            return
    if force or _is_demo_only(db):
        _remove(db)
        return
    raise click.ClickException(
        f"{db} already exists and is not a recording made by 'acp-proxy demo'; "
        "use --keep to add to it, --force to replace it, or --db for another file"
    )


def _agent_command(state: Path, delay: float) -> list[str]:
    command = [sys.executable, "-m", DEMO_AGENT_MODULE, "--state", str(state)]
    if delay > 0:
        command += ["--delay", f"{delay:g}"]
    return command


def _summary(db_path: Path, first_id: int) -> None:
    with recording(db_path) as db:
        rows = [r for r in RecordingReader(db).connections() if r.id > first_id]
        ids = [r.id for r in rows]
        if not ids:
            raise click.ClickException(f"nothing was recorded in {db_path}")
        reader = RecordingReader(db)
        click.echo(f"\nRecorded into {db_path}:")
        for r in rows:
            per_dir = reader.direction_counts(r.id)
            click.echo(
                f"  connection {r.id}  {r.label or '-':<14} protocol v{r.protocol_version or '?'}"
                f"  {r.frame_count} frames ({per_dir.get('c2a', 0)} client->agent,"
                f" {per_dir.get('a2c', 0)} agent->client)  exit {fmt_exit(r.exit_status)}"
            )
        methods: Counter[str] = Counter()
        for m in reader.method_counts(ids):
            sent = m["requests"] + m["notifications"]
            if sent and not str(m["method"]).startswith("("):
                methods[m["method"]] += sent
        _wrapped("methods:", [f"{m} x{n}" for m, n in sorted(methods.items())])
        variants = sorted((u["variant"], u["count"]) for u in reader.update_counts(ids))
        _wrapped("updates:", [f"{k} x{n}" for k, n in variants])
        click.echo(f"  stderr:   {reader.stderr_count(ids)} lines of the agent's log, recorded too")
    _next_steps(db_path, ids[0], ids[-1])


def _wrapped(title: str, items: list[str]) -> None:
    text = textwrap.fill(
        ", ".join(items),
        width=100,
        initial_indent=f"  {title:<10}",
        subsequent_indent=" " * 12,
        break_on_hyphens=False,
    )
    click.echo(text)


def _next_steps(db_path: Path, first_id: int, last_id: int) -> None:
    from acp_proxy.commands import COMMAND_NAMES

    db = shlex.quote(str(db_path))
    hints = [
        ("ls", f"acp-proxy ls {db}", "the connections, frame counts, durations, exit codes"),
        ("dump", f"acp-proxy dump {db} -c {last_id}", "every frame of the last connection"),
        ("show", f"acp-proxy show {db}", "the conversation rebuilt from the updates"),
        ("check", f"acp-proxy check {db}", "protocol rules checked against the recording"),
        (
            "replay",
            f"acp-proxy replay {db} -c {first_id} --client -- "
            f"{shlex.quote(sys.executable)} -m {DEMO_AGENT_MODULE}",
            "replay the recorded client against a fresh agent",
        ),
        ("replay", f"acp-proxy replay {db}", "serve the recording to an editor as an agent"),
        ("web", f"acp-proxy web {db}", "browse the recording in a browser"),
    ]
    available = [(cmd, why) for name, cmd, why in hints if name in COMMAND_NAMES]
    if not available:
        return
    width = min(44, max(len(cmd) for cmd, _ in available))
    click.echo("\nNext, try:")
    for cmd, why in available:
        if len(cmd) > width:
            click.echo(f"  {cmd}\n  {' ' * width}   # {why}")
        else:
            click.echo(f"  {cmd.ljust(width)}   # {why}")


@click.command("demo")
@click.option(
    "--db",
    "db_path",
    type=click.Path(path_type=Path),
    default=Path("acp-demo.db"),
    show_default=True,
    help="Recording to write.",
)
@click.option(
    "--protocol",
    type=click.Choice(["1", "2", "both"]),
    default="both",
    show_default=True,
    help="ACP protocol version the client asks for.",
)
@click.option("--keep", is_flag=True, help="Add the demo connections to an existing recording.")
@click.option("--force", is_flag=True, help="Replace --db even if it is not a demo recording.")
@click.option(
    "--delay",
    type=click.FloatRange(min=0),
    default=0.0,
    show_default=True,
    help="Seconds the demo agent pauses between the steps of a turn.",
)
@click.option(
    "--cwd",
    "project_dir",
    metavar="PATH",
    help="Project directory the client announces in session/new (default: the current one). "
    "A fixed value makes recordings comparable across machines.",
)
@click.option("--quiet", "-q", is_flag=True, help="Print only the summary, not the transcript.")
def demo_command(
    db_path: Path,
    protocol: str,
    keep: bool,
    force: bool,
    delay: float,
    project_dir: str | None,
    quiet: bool,
) -> None:
    """Record a scripted conversation with the bundled demo agent, then show what to do next.

    A scripted client starts `acp-proxy --record DB -- python -m acp_proxy.demo.agent`
    (the real proxy, as an editor would), sends two prompts (one permission allowed, one
    turn cancelled), then reconnects with a new agent process and takes the session back
    (v1 session/load, v2 session/resume with replay from the start) for a third prompt
    whose permission is rejected. Each protocol version gives two connections.

    The demo agent is deterministic (ids from counters, no timestamps) and stdlib-only;
    run it yourself with `python -m acp_proxy.demo.agent --help`.

    DB handling: a missing file is created; an existing recording made only by
    `acp-proxy demo` is replaced; anything else is left alone unless you pass --keep
    (append to it) or --force (replace it).

    \b
    Examples:
      acp-proxy demo
      acp-proxy demo --db /tmp/v1.db --protocol 1 --quiet
    """
    _prepare(db_path, keep, force)
    _check_writable(db_path)
    first_id = 0
    if keep and db_path.exists() and db_path.stat().st_size > 0:
        with recording(db_path) as db:
            first_id = max((r.id for r in RecordingReader(db).connections()), default=0)
    versions = [1, 2] if protocol == "both" else [int(protocol)]

    def out(line: str) -> None:
        if not quiet:
            click.echo(line)

    for version in versions:
        with tempfile.TemporaryDirectory(prefix="acp-demo-") as tmp:
            command = [
                sys.executable,
                "-m",
                "acp_proxy",
                "--record",
                str(db_path),
                "--label",
                f"demo v{version}",
                "--",
                *_agent_command(Path(tmp) / "state.json", delay),
            ]
            out(f"### protocol v{version}: the scripted client talks to the demo agent")
            try:
                run_scenario(command, protocol=version, reconnect=True, out=out, cwd=project_dir)
            except ClientError as exc:
                raise click.ClickException(f"the demo failed: {exc}") from None
            out("")
    _summary(db_path, first_id)
