"""Analyses of recorded connections shared by the CLI and the inspector.

They read through :mod:`acp_proxy.store` and compute with :mod:`acp_proxy.acp`: neither a part of
the store (they hold no SQL) nor of a command (the inspector runs them too), so a layer of their
own, beside :mod:`acp_proxy.formats`.
"""
