"""The replay server: a recording served as a deterministic agent (sans-I/O engine).

Pure: no I/O, no processes. Entry points: :func:`~acp_proxy.replay.load.select_script`
makes a lazy :class:`~acp_proxy.replay.script.Script` of a recording read through a frame
store (the SQLite one is :class:`acp_proxy.store.replay_frames.ReplayFrames`);
:class:`~acp_proxy.replay.engine.ReplayEngine` serves it (see its module docstring for the
adapter API);
:mod:`acp_proxy.replay.agent_check` is the pure half of ``--client`` (the recorded client
played against a real agent). The adapters that move bytes or start processes live in
:mod:`acp_proxy.transport` (``stdio.replay``, ``ws.replay``, ``http.replay``,
``stdio.agent_check``).
"""

from acp_proxy.replay.engine import Note, ReplayEngine, ReplayOptions, Send, Wait
from acp_proxy.replay.load import ScriptError, select_script

__all__ = ["Note", "ReplayEngine", "ReplayOptions", "ScriptError", "Send", "Wait", "select_script"]
