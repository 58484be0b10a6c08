"""Every fake peer of the tests: scripted agents and clients, SDK peers, fake servers.

Tests run one as a script (``[sys.executable, str(PEERS / "echo_agent.py")]``) or import it
as ``tests.peers.NAME``; run as scripts, peers import their siblings from ``sys.path[0]``.
"""

from pathlib import Path

PEERS = Path(__file__).parent
"""This folder: where the tests find a peer to launch by path."""
