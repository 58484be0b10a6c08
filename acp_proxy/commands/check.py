"""``acp-proxy check``: conformance findings for a recording, as text or JSON (a CI gate).

A thin layer over :func:`acp_proxy.analysis.check.check_connection` (the inspector's
findings come from the same code): frames are streamed from the recording one connection at
a time, findings are grouped by connection, and the exit code is 1 when
any error-tier finding exists (whatever ``--min-tier`` hides), 0 otherwise.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click
import orjson

from acp_proxy.acp.conformance import frames_text
from acp_proxy.acp.rules import RULES, TIER_RANK, TIERS
from acp_proxy.analysis.check import ConnectionReport, check_connection
from acp_proxy.commands.common import RECORDING_PATH, recording, single_option, terminal_options
from acp_proxy.console import Terminal, wrap
from acp_proxy.report.findings import check_json, junit_xml, sarif_json
from acp_proxy.store.reader import RecordingReader

_COLOURS = {"error": "red", "warning": "yellow", "info": "cyan"}


def _fmt_seqs(seqs: tuple[int, ...]) -> str:
    if not seqs:
        return "-"
    return frames_text(seqs)


@click.command("check")
@click.argument(
    "recording_path",
    type=RECORDING_PATH,
    metavar="DB",
    required=False,
)
@single_option("--connection", "-c", "connection_id", type=int, help="Only this connection.")
@click.option(
    "--format",
    "output_format",
    type=click.Choice(["text", "json", "junit", "sarif"]),
    default="text",
    show_default=True,
    help="Report format: text, JSON, JUnit XML or SARIF 2.1.0 (docs/check.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Same as --format json.")
@click.option(
    "--min-tier",
    type=click.Choice(["info", "warning", "error"]),
    default="info",
    show_default=True,
    help="Hide findings below this tier (the exit code still counts errors).",
)
@click.option(
    "--max-per-rule",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Show at most this many findings per rule and connection; the rest are counted.",
)
@click.option("--rules", "list_rules", is_flag=True, help="List the rules and exit.")
@terminal_options()
def check_command(
    recording_path: Path | None,
    connection_id: int | None,
    output_format: str,
    as_json: bool,
    min_tier: str,
    max_per_rule: int,
    list_rules: bool,
    terminal: Terminal,
) -> None:
    """Check a recording against the ACP rules; exit code 1 when a MUST is broken.

    \b
    Tiers: error = a MUST is broken, warning = a SHOULD, info = worth knowing.
    Each finding names the rule, the connection and frame numbers (#seq, as in
    `acp-proxy dump`), and quotes the rule. Examples:
      acp-proxy check session.db
      acp-proxy check session.db --connection 2 --min-tier warning
      acp-proxy check session.db --json > check-report.json
      acp-proxy check session.db --format sarif > check.sarif
      acp-proxy check session.db --format junit > check-junit.xml
      acp-proxy check --rules
    """
    if list_rules:
        _print_rules(as_json or output_format == "json")
        return
    if recording_path is None:
        raise click.UsageError("missing argument DB (the recording to check)")
    threshold = TIER_RANK[min_tier]
    reports: list[ConnectionReport] = []
    with recording(recording_path) as db:
        reader = RecordingReader(db)
        if connection_id is not None:
            connections = [reader.connection(connection_id, sizes=False)]
        else:
            connections = reader.connections(sizes=False)
        for row in connections:
            reports.append(check_connection(reader, row, max_per_rule=max_per_rule))
    totals: dict[str, int] = {t: sum(r.counts.get(t, 0) for r in reports) for t in TIERS}
    frames = sum(r.frames for r in reports)
    if output_format in ("junit", "sarif"):
        render = junit_xml if output_format == "junit" else sarif_json
        click.echo(render(reports, recording_path, min_tier))
    elif as_json or output_format == "json":
        click.echo(check_json(reports, recording_path, min_tier))
    else:
        _print_text(terminal, reports, threshold, totals, frames)
    if totals["error"]:
        sys.exit(1)


def _print_text(
    terminal: Terminal,
    reports: list[ConnectionReport],
    threshold: int,
    totals: dict[str, int],
    frames: int,
) -> None:
    def style(text: str, tier: str) -> str:
        return terminal.style(text, _COLOURS[tier], bold=tier == "error")

    if not reports:
        click.echo("no connections recorded")
    for r in reports:
        counts = ", ".join(f"{r.counts.get(t, 0)} {t}" for t in TIERS)
        version = f"v{r.protocol_version}" if r.protocol_version is not None else "v?"
        click.echo(
            f"== connection {r.connection_id} ({r.transport}, {version}, {r.frames} frames): "
            f"{counts}"
        )
        shown = [f for f in r.findings if TIER_RANK[f.tier] >= threshold]
        shown.sort(key=lambda f: (f.seqs[-1] if f.seqs else 0, -TIER_RANK[f.tier]))
        if shown:
            width = max(len(f.rule) for f in shown)
            indent = " " * min(12 + width, 16)  # (on a terminal, long findings are wrapped)
            for f in shown:
                where = _fmt_seqs(f.seqs)
                session = f" [{f.session_id}]" if f.session_id else ""
                line = f"  {f.tier.ljust(7)} {f.rule.ljust(width)}  {where}{session}  {f.reason}"
                first, *more = wrap(line, terminal.width, indent)
                click.echo(f"  {style(f.tier.ljust(7), f.tier)}{first[9:]}")
                for part in [
                    *more,
                    *wrap(f"  {'':7} {'':{width}}  rule: {f.rule_text}", terminal.width, indent),
                ]:
                    click.echo(part)
        for rule_id, n in sorted(r.suppressed.items()):
            click.echo(
                f"  ... and {n} more {rule_id} finding(s) (raise --max-per-rule to see them)"
            )
    verdict = (
        terminal.style("FAIL", "red", bold=True)
        if totals["error"]
        else terminal.style("ok", "green")
    )
    click.echo(
        f"summary: {totals['error']} error(s), {totals['warning']} warning(s), "
        f"{totals['info']} info in {len(reports)} connection(s), {frames} frames: {verdict}"
    )


def _print_rules(as_json: bool) -> None:
    if as_json:
        rows = [{"rule": r.id, "tier": r.tier, "applies": r.applies, "text": r.text} for r in RULES]
        click.echo(orjson.dumps(rows, option=orjson.OPT_INDENT_2).decode())
        return
    width = max(len(r.id) for r in RULES)
    for r in RULES:
        click.echo(f"{r.tier:7} {r.id.ljust(width)}  {r.applies:3}  {r.text}")
