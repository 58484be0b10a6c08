"""Click commands, one module per family; :mod:`acp_proxy.cli` assembles them."""
