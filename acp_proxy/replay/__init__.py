"""The replay server: a recording served as a deterministic agent (sans-I/O engine).

Entry points: :func:`~acp_proxy.replay.load.load_script` reads a recording into a
:class:`~acp_proxy.replay.script.Script`; :class:`~acp_proxy.replay.engine.ReplayEngine`
serves it (see its module docstring for the adapter API);
:func:`~acp_proxy.replay.stdio.serve_stdio` is the stdio adapter;
:mod:`acp_proxy.replay.agent_check` plays the client side against a real agent.
"""

from acp_proxy.replay.engine import Note, ReplayEngine, ReplayOptions, Send, Wait
from acp_proxy.replay.load import load_script

__all__ = ["Note", "ReplayEngine", "ReplayOptions", "Send", "Wait", "load_script"]
