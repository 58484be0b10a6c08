"""ACP over WebSocket (aiohttp), one job per module; import the module that holds a name.

* :mod:`~acp_proxy.transport.ws.server`: the server (handshake, dispatch, :func:`serve`);
* :mod:`~acp_proxy.transport.ws.handshake`: what a mode is handed for one connection
  (:class:`Handshake`), the settings, the refusal every server answers with;
* :mod:`~acp_proxy.transport.ws.agent`: one connection bridged to one agent process;
* :mod:`~acp_proxy.transport.ws.upstream`: one connection relayed to an upstream WebSocket;
* :mod:`~acp_proxy.transport.ws.replay`: one connection answered by the replay engine;
* :mod:`~acp_proxy.transport.ws.connect`: ``acp-proxy connect``, stdio to a WebSocket;
* :mod:`~acp_proxy.transport.ws.sockets`: aiohttp WebSocket objects and close helpers they share;
* :mod:`~acp_proxy.transport.ws.rules`: the rules, as pure functions.

Built on aiohttp (server and client in one library, per-message size limit, ping/pong
heartbeat, close codes with reasons, ``decode_text=False`` so text payloads arrive as the
exact bytes that crossed). Nothing is imported here, so the pure rules load without aiohttp.
"""
