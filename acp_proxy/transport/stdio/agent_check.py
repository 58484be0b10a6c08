"""``replay --client``: play a recording's client side against a real agent and diff.

The adapter half: :func:`check_agent` starts the agent, feeds it what
:class:`~acp_proxy.replay.agent_check.ClientPlayer` (the pure half: what to send, when, and
the comparison) says, and collects the agent's frames; :func:`run_check` is the CLI loop
(one fresh agent per recorded connection, diffs on stdout).
"""

from __future__ import annotations

import queue
import sys
import textwrap
import threading
import time
from collections.abc import Sequence
from typing import Any

from acp_proxy.acp.diff import SlowerLimit
from acp_proxy.acp.jsonpaths import parse_path
from acp_proxy.console import warn
from acp_proxy.replay.agent_check import CheckResult, ClientPlayer
from acp_proxy.replay.match import DEFAULT_IGNORES, SessionMap
from acp_proxy.replay.script import Classified
from acp_proxy.transport.chunks import write_all
from acp_proxy.transport.process.agent import AgentStartError, spawn_agent
from acp_proxy.wire.framing import LineFramer


def check_agent(
    frames: list[Classified],
    argv: Sequence[str],
    *,
    ignores: list[tuple[str, ...]] | None = None,
    step_timeout: float = 10.0,
    grace: float = 5.0,
    sessions: SessionMap | None = None,
    earlier_sessions: dict[str, int] | None = None,
    fail_slower: SlowerLimit | None = None,
) -> CheckResult:
    """Run ``argv`` and play ``frames`` (one recorded connection) against it.

    ``sessions`` carries the recorded→live sessionId mapping across connections (a later
    connection loading a session created by an earlier one); ``earlier_sessions`` names the
    recorded sessions of the connections before (recorded sessionId -> connection), and
    grows by this connection's. Raises
    :class:`AgentStartError` if the agent cannot be started.
    """
    player = ClientPlayer(
        frames,
        ignores if ignores is not None else [parse_path(p) for p in DEFAULT_IGNORES],
        sessions if sessions is not None else SessionMap(),
    )
    if earlier_sessions is not None:
        player.earlier_sessions = earlier_sessions
    player.fail_slower = fail_slower
    agent = spawn_agent(argv, stderr=None, grace=grace)
    proc = agent.popen
    assert proc.stdin is not None and proc.stdout is not None
    inbox: queue.Queue[bytes | None] = queue.Queue()

    def reader(stdout: Any) -> None:
        framer = LineFramer()
        while True:
            try:
                data = stdout.read1(1 << 16) if hasattr(stdout, "read1") else stdout.read(1 << 16)
            except (OSError, ValueError):
                data = b""
            if not data:
                last = framer.close()
                if last is not None:
                    inbox.put(last)
                inbox.put(None)
                return
            for line in framer.feed(data):
                inbox.put(line)

    threading.Thread(target=reader, args=(proc.stdout,), daemon=True).start()
    agent_gone = False

    def pump(until: float) -> bool:
        """Take what the agent sent until ``until`` (monotonic) or one frame; False at EOF."""
        nonlocal agent_gone
        if agent_gone:
            return False
        try:
            item = inbox.get(timeout=max(0.0, until - time.monotonic()))
        except queue.Empty:
            return True
        if item is None:
            agent_gone = True
            return False
        player.feed(item, time.monotonic_ns())
        return True

    try:
        while True:
            raw, ready = player.next_send()
            if raw is None:
                break
            deadline = time.monotonic() + step_timeout
            while not ready and not player.lost_session and time.monotonic() < deadline:
                if not pump(deadline):
                    break
                raw, ready = player.next_send()
            if player.lost_session:
                break  # the agent lacks the session: the rest cannot replay (result.causes)
            if not ready:
                player.notes.append(
                    f"the agent did not catch up before {player.frames[player._pos].where}"
                )
            data = player.take(time.monotonic_ns())
            try:
                write_all(proc.stdin.fileno(), data)
            except OSError:
                player.notes.append("the agent closed its stdin early")
                break
            while True:  # drain whatever is already there
                try:
                    item = inbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    agent_gone = True
                    break
                player.feed(item, time.monotonic_ns())
        deadline = time.monotonic() + step_timeout
        while not player.settled() and not player.lost_session and time.monotonic() < deadline:
            if not pump(deadline):
                break
    finally:
        agent.stop()  # the close sequence, then whatever the agent left behind
        while True:
            try:
                item = inbox.get(timeout=1.0)
            except queue.Empty:
                break
            if item is None:
                break
            player.feed(item, time.monotonic_ns())
    result = player.result()
    if earlier_sessions is not None and frames:
        for sid in player.sessions_seen():
            earlier_sessions[sid] = frames[0].connection_id
    return result


def run_check(connections: list[list[Classified]], argv: Sequence[str], **kwargs: Any) -> int:
    """CLI helper: one fresh agent per recorded connection, diffs on stdout.

    Exit code 0 (no differences), 1 (differences), or the agent start error's code.
    """
    sessions = SessionMap()
    earlier: dict[str, int] = {}
    code = 0
    for frames in connections:
        if len(connections) > 1 and frames:
            sys.stdout.write(f"== connection {frames[0].connection_id}\n")
        try:
            result = check_agent(
                frames, argv, sessions=sessions, earlier_sessions=earlier, **kwargs
            )
        except AgentStartError as exc:
            warn(str(exc))
            return exc.exit_code
        for note in result.notes:
            warn(note)
        for t in result.slower:
            verdict = "past --fail-slower" if t.fails else "reported, not a failure"
            sys.stdout.write(
                f"slower: {t.request.method} at {t.request.where}: {_ms(t.recorded_ns)} → "
                f"{_ms(t.live_ns)} ({verdict})\n"
            )
        if result.ok:
            sys.stdout.write(
                f"no differences: the agent sent the {len(result.live)} recorded message(s)\n"
            )
            continue
        code = 1
        if not result.diff:
            failing = sum(t.fails for t in result.slower)
            sys.stdout.write(f"slower than recorded past --fail-slower: {failing} exchange(s)\n")
            continue
        sys.stdout.write("\n".join(result.diff) + "\n")
        for cause in result.causes:
            sys.stdout.write(textwrap.fill(f"why: {cause}", 100, subsequent_indent="  ") + "\n")
        sys.stdout.write(
            f"differences found: recorded {len(result.recorded)} agent message(s), "
            f"live {len(result.live)}\n"
        )
    return code


def _ms(ns: int) -> str:
    return f"{ns / 1e6:.0f}ms" if ns < 1_000_000_000 else f"{ns / 1e9:.2f}s"
