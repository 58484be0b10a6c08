"""Click commands, one module per family; :mod:`acp_proxy.cli` assembles them."""

from __future__ import annotations

# name -> "module:attribute". Commands are imported only when used, so that starting the
# proxy (what an editor does on every session) does not pay for the web server, the replay
# engine or sqlite-utils.
LAZY_COMMANDS: dict[str, str] = {
    "proxy": "acp_proxy.commands.proxy:proxy_command",
    "demo": "acp_proxy.commands.demo:demo_command",
    "ls": "acp_proxy.commands.inspect:ls_command",
    "dump": "acp_proxy.commands.inspect:dump_command",
    "show": "acp_proxy.commands.show:show_command",
    "check": "acp_proxy.commands.check:check_command",
    "diff": "acp_proxy.commands.diff:diff_command",
    "search": "acp_proxy.commands.search:search_command",
    "stats": "acp_proxy.commands.stats:stats_command",
    "export": "acp_proxy.commands.transfer:export_command",
    "import": "acp_proxy.commands.transfer:import_command",
    "copy": "acp_proxy.commands.copy:copy_command",
    "reindex": "acp_proxy.commands.reindex:reindex_command",
    "prune": "acp_proxy.commands.prune:prune_command",
    "replay": "acp_proxy.commands.replay:replay_command",
    "ws": "acp_proxy.commands.ws:ws_command",
    "serve": "acp_proxy.commands.serve:serve_command",
    "connect": "acp_proxy.commands.ws:connect_command",
    "web": "acp_proxy.commands.web:web_command",
    "mcp": "acp_proxy.commands.mcp:mcp_command",
    "tail": "acp_proxy.commands.tail:tail_command",
}
COMMAND_NAMES: tuple[str, ...] = tuple(LAZY_COMMANDS)
