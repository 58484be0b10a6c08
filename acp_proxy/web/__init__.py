"""The live web inspector: a read-only aiohttp server over a recording, with static assets.

:mod:`acp_proxy.web.store` holds the SQL (fresh read-only connections, keyset pagination),
:mod:`acp_proxy.web.views` the session and findings views built by the pure ACP core,
:mod:`acp_proxy.web.server` the HTTP/WebSocket layer, and
:func:`~acp_proxy.web.server.start_in_thread` serves it from a thread for proxies that show the
inspector while they record (``--ui``).
"""
