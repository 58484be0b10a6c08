"""Running the stdio proxy, for the click command and for the launch an editor makes.

An editor launches ``acp-proxy [--record X] [--label L] -- AGENT [ARGS]...`` for every agent
session and waits for the agent's first answer (docs/performance.md, "Start-up"). :func:`launch`
reads that one command line by hand, so the agent is started without importing click (about
20 ms) or the other commands' options; any other command line (another option, ``--help``,
``--version``, a subcommand, a repeated option, a value that looks like an option, no ``--``)
is left to click, unchanged, as is a launch that :data:`REDACT_ENV` or click's shell
completion variable changes. Both ways run :func:`run_stdio_proxy` with
:func:`record_location`'s ``--record``: one home for the defaults and the behaviour.

Kept light (``tests/recorder/test_import_budget.py``): the standard library's ``os`` and
``contextlib`` at import, the proxy's modules once it is known to be the proxy.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from acp_proxy.formats.redact import RedactRules
    from acp_proxy.recorder.handle import Recorder

RECORD_ENV = "ACP_PROXY_RECORD"
"""``--record``'s environment variable (an empty value counts as unset, as for click)."""

REDACT_ENV = "ACP_PROXY_REDACT"
"""Recording commands: redact the stored copy. ``1`` (or ``default``) for the built-in rules,
plus rules separated by spaces: ``key:REGEX``, ``path:PATH``, ``value:REGEX``
(``ACP_PROXY_REDACT='default path:params.prompt'``); ``0`` or empty: off."""

COMPLETE_ENV = "_ACP_PROXY_COMPLETE"
"""click's shell completion for ``acp-proxy`` (``_{PROG_NAME}_COMPLETE``): click's to answer."""

_FAST_OPTIONS = ("--record", "--label")


def record_location(value: str | Path) -> Path | str | None:
    """``--record``'s value: a SQLite file (a ``Path``) or a ``postgresql://`` URL (as given).

    Deliberately unchecked: for the proxy forwarding wins, so a URL of an unknown scheme
    (``mysql://``) is one ``recording disabled: ...; forwarding continues`` line here and
    None, and every unusable path or database is that line from the recorder; the agent
    runs anyway.
    """
    from pathlib import Path

    from acp_proxy.console import warn
    from acp_proxy.store.location import RecordingUrl, parse_location, unknown_scheme

    if isinstance(value, Path):
        return value
    wrong = unknown_scheme(str(value))
    if wrong is not None:
        warn(f"recording disabled: {wrong}; forwarding continues")
        return None
    where = parse_location(str(value))
    return where.url if isinstance(where, RecordingUrl) else where


def run_stdio_proxy(
    agent_command: Sequence[str],
    record: Path | str | None,
    *,
    label: str | None = None,
    grace: float | None = None,
    queue_bytes: int | None = None,
    spool_bytes: int | None = None,
    redact: RedactRules | None = None,
    around_recorder: Callable[[], AbstractContextManager[None]] | None = None,
    with_recorder: Callable[[Recorder], None] | None = None,
) -> int:
    """Run ``agent_command`` behind the stdio proxy, recording into ``record`` (None: not);
    return the exit code the proxy exits with (the agent's).

    ``grace``, ``queue_bytes`` and ``spool_bytes`` left None are the defaults
    (:data:`~acp_proxy.transport.process.agent.DEFAULT_GRACE_SECONDS`,
    :data:`~acp_proxy.recorder.handle.DEFAULT_QUEUE_BYTES`,
    :data:`~acp_proxy.recorder.handle.DEFAULT_SPOOL_BYTES`). The recorder (its writer process)
    is started once the agent is starting, inside ``around_recorder()`` (the environment
    its writer inherits), then handed to ``with_recorder``; it is closed at the end.
    """
    from acp_proxy.transport.process.agent import DEFAULT_GRACE_SECONDS
    from acp_proxy.transport.stdio.proxy import StdioProxy

    started: list[Recorder] = []

    def start_recorder() -> Recorder:
        # Called once the agent is starting: its interpreter loads while the writer
        # process is started and this process gets ready to forward.
        from acp_proxy.recorder.handle import DEFAULT_QUEUE_BYTES, DEFAULT_SPOOL_BYTES, Recorder

        with around_recorder() if around_recorder is not None else nullcontext():
            recorder = Recorder(
                record,
                queue_bytes=DEFAULT_QUEUE_BYTES if queue_bytes is None else queue_bytes,
                spool_bytes=DEFAULT_SPOOL_BYTES if spool_bytes is None else spool_bytes,
                backend="process",
                open_first=False,  # the writer process opens the file: see Recorder
                redact=redact,
            )
        started.append(recorder)
        if with_recorder is not None:
            with_recorder(recorder)
        return recorder

    wait = DEFAULT_GRACE_SECONDS if grace is None else grace
    try:
        return StdioProxy(agent_command, start_recorder, grace=wait, label=label).run()
    finally:
        for recorder in started:
            recorder.close()


def fast_command_line(args: Sequence[str]) -> tuple[str | None, str | None, list[str]] | None:
    """``(record, label, agent command)`` of ``[--record X] [--label L] -- AGENT [ARGS]...``
    (``--record=X`` and ``--label=L`` too; ``record`` from :data:`RECORD_ENV` when not given),
    or None for any other command line, or when the environment asks for more than that."""
    if os.environ.get(COMPLETE_ENV) is not None or os.environ.get(REDACT_ENV, "").split():
        return None
    given: dict[str, str] = {}
    at = 0
    while at < len(args) and args[at] != "--":
        name, equals, value = args[at].partition("=")
        if name not in _FAST_OPTIONS or name in given:
            return None
        if not equals:
            at += 1
            if at == len(args):
                return None
            value = args[at]
        if not value or value.startswith("-"):
            return None
        given[name] = value
        at += 1
    agent = list(args[at + 1 :])
    if not agent:
        return None
    record = given.get("--record") or os.environ.get(RECORD_ENV) or None
    return record, given.get("--label"), agent


def launch(args: Sequence[str]) -> int | None:
    """Run the stdio proxy for the plain launch (:func:`fast_command_line`) and return its
    exit code; None, having done nothing, for any other command line."""
    parsed = fast_command_line(args)
    if parsed is None:
        return None
    record, label, agent = parsed
    return run_stdio_proxy(
        agent, record_location(record) if record is not None else None, label=label
    )
