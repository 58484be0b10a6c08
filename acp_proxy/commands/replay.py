"""``acp-proxy replay RECORDING``: serve a recording as an agent, or diff a real agent."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import click

from acp_proxy.commands.common import RECORDING_PATH, ignore_paths, single_option, slower_limit
from acp_proxy.commands.metrics_options import metrics_options
from acp_proxy.commands.tls_options import server_tls, tls_server_options
from acp_proxy.console import warn
from acp_proxy.formats.source import open_replay_frames
from acp_proxy.replay.engine import ReplayEngine, ReplayOptions
from acp_proxy.replay.load import ScriptError, select_script
from acp_proxy.replay.match import DEFAULT_IGNORES
from acp_proxy.store.schema import RecordingError


@click.command(
    "replay",
    context_settings={"allow_interspersed_args": True},
)
@click.argument("recording_path", type=RECORDING_PATH, metavar="RECORDING")
@single_option(
    "--connection",
    "-c",
    "connection_id",
    type=int,
    help="Replay only this recorded connection (default: all, in order).",
)
@single_option(
    "--session",
    "-s",
    "session_id",
    help="Replay only the connections in which this sessionId appears.",
)
@click.option(
    "--match",
    "match",
    type=click.Choice(["loose", "sequential", "strict"]),
    default="loose",
    show_default=True,
    help="loose: any unconsumed recorded request with the same method and params "
    "(repeats first-in-first-out); sequential: never go back in the recording; "
    "strict: exactly the next recorded client message.",
)
@click.option(
    "--pace",
    type=click.Choice(["fast", "recorded"]),
    default="fast",
    show_default=True,
    help="Send at once, or with the recorded gaps between frames.",
)
@click.option(
    "--max-delay",
    type=float,
    default=None,
    help="With --pace recorded: never wait longer than this many seconds (>= 0).",
)
@click.option(
    "--ignore",
    "ignores",
    multiple=True,
    metavar="PATH",
    help="Ignore this member when matching (e.g. params.cwd, prompt.*.text); "
    "repeatable. params.cwd is ignored by default.",
)
@click.option("--no-default-ignores", is_flag=True, help="Do not ignore params.cwd.")
@click.option(
    "--advertise-load",
    is_flag=True,
    help="Answer initialize with agentCapabilities.loadSession: true.",
)
@click.option(
    "--answer-timeout",
    type=float,
    default=60.0,
    show_default=True,
    help="Seconds to wait for the client's answer to a replayed agent request.",
)
@click.option(
    "--client",
    "client_mode",
    is_flag=True,
    help="Play the recorded CLIENT against a real agent (after --) and report how "
    "the agent's messages differ from the recording; exit 1 on differences.",
)
@click.option(
    "--step-timeout",
    type=float,
    default=10.0,
    show_default=True,
    help="With --client: how long to wait for the agent to catch up at each step.",
)
@click.option(
    "--fail-slower",
    "fail_slower",
    metavar="PCT%|MS",
    help="With --client: also exit 1 when the agent answered a request more slowly than "
    "recorded by more than PCT percent (50%) or MS milliseconds (500); initialize never "
    "counts. Without it, slower answers (by 1 s or more) are reported only.",
)
@click.option(
    "--listen",
    metavar="HOST:PORT",
    help="Serve over WebSocket at ws://HOST:PORT/acp (one fresh replay per connection) "
    "instead of stdio.",
)
@metrics_options
@tls_server_options
@click.argument("agent_command", nargs=-1, metavar="[-- AGENT [ARGS]...]")
def replay_command(
    recording_path: Path,
    connection_id: int | None,
    session_id: str | None,
    match: str,
    pace: str,
    max_delay: float | None,
    ignores: tuple[str, ...],
    no_default_ignores: bool,
    advertise_load: bool,
    answer_timeout: float,
    client_mode: bool,
    step_timeout: float,
    agent_command: tuple[str, ...],
    listen: str | None = None,
    tls_cert: str | None = None,
    tls_key: str | None = None,
    fail_slower: str | None = None,
    metrics: tuple[str, int] | None = None,
    metrics_token: str | None = None,
) -> None:
    """Serve RECORDING (a .db or an export file) over stdio as a deterministic agent.

    Each client request is answered with the matching recorded response (ids rewritten,
    sessionIds mapped), preceded and followed by the recorded agent frames. Unmatched
    requests get a JSON-RPC error naming the nearest recorded candidate and the
    differences (also on stderr).

    session/load and session/resume: when the recording holds the agent's own answer to a
    matching request, exactly those frames are sent (history and response, byte for byte,
    ids and sessionIds mapped). Only when it holds none (e.g. a recording of session/new and
    prompts, replayed to test a client's resume) is the history synthesized from the recorded
    session (session/load, session/resume with replayFrom). One stderr line says which.

    \b
    Examples:
      acp-proxy replay session.db                      # editors launch this as the agent
      acp-proxy replay session.db --match strict --ignore prompt.*.text
      acp-proxy replay session.db --client -- python my_agent.py   # agent regression
    """
    _check_options(
        max_delay=max_delay,
        pace=pace,
        answer_timeout=answer_timeout,
        step_timeout=step_timeout,
        client_mode=client_mode,
        listen=listen,
    )
    if listen is None and (tls_cert or tls_key):
        raise OptionError("--tls-cert and --tls-key need --listen")
    if listen is None and metrics is not None:
        raise OptionError("--metrics needs --listen (a replay over stdio ends with its client)")
    tls = server_tls(tls_cert, tls_key)
    paths = [*([] if no_default_ignores else DEFAULT_IGNORES), *ignores]
    parsed = ignore_paths(paths)
    limit = slower_limit(fail_slower)
    if fail_slower is not None and not client_mode:
        raise click.UsageError("--fail-slower needs --client")
    if client_mode and not agent_command:
        raise click.UsageError("--client needs the agent command after --")
    if agent_command and not client_mode:
        raise click.UsageError(
            "unexpected arguments after the recording (an agent command needs --client)"
        )
    try:
        store = open_replay_frames(recording_path)
        script = select_script(
            store, connection_id=connection_id, session_id=session_id, source=str(recording_path)
        )
    except (RecordingError, ScriptError) as exc:
        raise click.ClickException(str(exc)) from None
    if client_mode:
        from acp_proxy.transport.stdio.agent_check import run_check

        try:
            connections = []
            for cid in script.step_connections:  # those in which the client asked something
                frames = script.connection_frames(cid)
                if any(f.direction == "c2a" and f.kind in ("request", "batch") for f in frames):
                    connections.append(frames)
            code = run_check(
                connections,
                agent_command,
                ignores=parsed,
                step_timeout=step_timeout,
                fail_slower=limit,
            )
        except RecordingError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            code = 130
        sys.exit(code)
    from acp_proxy.transport.stdio.replay import serve_stdio

    options = ReplayOptions(
        match=match,  # type: ignore[arg-type]
        pace=pace,  # type: ignore[arg-type]
        ignore=paths,
        advertise_load=advertise_load,
        max_delay=max_delay,
    )
    if listen is not None:
        from acp_proxy.commands.ws import serve_replay_listen

        serve_replay_listen(
            listen,
            lambda: ReplayEngine(script, options),
            answer_timeout=answer_timeout,
            tls=tls,
            metrics=metrics,
            metrics_token=metrics_token,
        )
        return
    engine = ReplayEngine(script, options)
    if sys.stdin.isatty():
        warn(
            f"replay: serving {recording_path} as an agent on stdin/stdout; waiting for a "
            "client's JSON-RPC lines (Ctrl-D ends)"
        )
    try:
        code = serve_stdio(engine, answer_timeout=answer_timeout)
    except RecordingError as exc:  # damage met while reading the recording lazily
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


class OptionError(click.ClickException):
    """An invalid or conflicting option: one ``Error: ...`` line, exit status 2."""

    exit_code = 2


def _check_options(
    *,
    max_delay: float | None,
    pace: str,
    answer_timeout: float,
    step_timeout: float,
    client_mode: bool,
    listen: str | None,
) -> None:
    """Refuse what would be accepted silently and then ignored or misread."""
    for name, value in (
        ("--max-delay", max_delay),
        ("--answer-timeout", answer_timeout),
        ("--step-timeout", step_timeout),
    ):
        if value is not None and (math.isnan(value) or value < 0):
            raise OptionError(f"{name} must be a number of seconds >= 0, not {value:g}")
    if max_delay is not None and pace != "recorded":
        raise OptionError("--max-delay only applies with --pace recorded")
    if client_mode and listen is not None:
        raise OptionError("--client and --listen cannot be combined")
