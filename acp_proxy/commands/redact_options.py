"""The redaction options, one definition for every command that takes them.

``export`` redacts its exported copy by default (``--no-redact`` keeps every byte);
recording commands (``acp-proxy --record``, ``ws``, ``serve``, ``connect``) redact the
*stored* copy when asked, by ``--redact`` or :data:`REDACT_ENV`. Both take the same rules on
top of the built-in ones (:class:`~acp_proxy.formats.redact.RedactRules`): ``--redact-key``,
``--redact-path`` and ``--redact-value``. The command receives ``redact``: the rule set, or
None for no redaction.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from acp_proxy.commands.stdio_launch import REDACT_ENV

if TYPE_CHECKING:
    from acp_proxy.formats.redact import RedactRules


_ON = frozenset({"1", "on", "yes", "true", "default"})
_OFF = frozenset({"0", "off", "no", "false"})
_KINDS = {"key": 0, "path": 1, "value": 2}


def rules_from_env(text: str) -> tuple[bool, list[list[str]]]:
    """``ACP_PROXY_REDACT``'s value: (whether redaction is on, [keys, paths, values]).

    Raises ``ValueError`` naming the item it does not understand.
    """
    rules: list[list[str]] = [[], [], []]
    words = text.split()
    if not words or (len(words) == 1 and words[0].lower() in _OFF):
        return False, rules
    for word in words:
        kind, sep, rule = word.partition(":")
        if not sep and word.lower() in _ON:
            continue
        if not sep or kind not in _KINDS or not rule:
            raise ValueError(
                f"{REDACT_ENV}: {word!r} is not a rule (default, key:REGEX, path:PATH, "
                "value:REGEX, or 0 for off)"
            )
        rules[_KINDS[kind]].append(rule)
    return True, rules


def redact_options(*, stored: bool) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """``--redact/--no-redact``, ``--redact-key``, ``--redact-path``, ``--redact-value``.

    ``stored=True`` (recording): off unless ``--redact``, a rule option or
    :data:`REDACT_ENV` turns it on. ``stored=False`` (export): on unless ``--no-redact``.
    """
    copy = "stored" if stored else "exported"

    def decorate(command: Callable[..., None]) -> Callable[..., None]:
        @functools.wraps(command)
        def run(
            *args: Any,
            redact_on: bool | None,
            redact_keys: tuple[str, ...],
            redact_paths: tuple[str, ...],
            redact_values: tuple[str, ...],
            **kwargs: Any,
        ) -> None:
            rules = _resolve(stored, redact_on, redact_keys, redact_paths, redact_values)
            command(*args, redact=rules, **kwargs)

        if stored:
            on_help = (
                "Replace secrets (api keys, tokens, passwords, authorization, env values of "
                "MCP servers and terminals, bearer headers) with [REDACTED] in the stored "
                "copy; forwarding stays byte-exact. Also ACP_PROXY_REDACT=1 (docs/fleet.md)."
            )
        else:
            on_help = (
                "Replace secrets (tokens, api keys, env values, auth headers) with [REDACTED] "
                "in the exported copy. --no-redact keeps every frame byte-exact."
            )
        run = click.option(
            "--redact-value",
            "redact_values",
            multiple=True,
            metavar="REGEX",
            help=f"Also replace what this expression matches, anywhere ({copy} copy; repeatable).",
        )(run)
        run = click.option(
            "--redact-path",
            "redact_paths",
            multiple=True,
            metavar="PATH",
            help="Also replace every string under this dotted path (as replay --ignore: "
            "params.prompt drops the prompts' text; repeatable).",
        )(run)
        run = click.option(
            "--redact-key",
            "redact_keys",
            multiple=True,
            metavar="REGEX",
            help="Also treat the values of keys matching this expression as secrets "
            "(case-insensitive; repeatable).",
        )(run)
        return click.option(
            "--redact/--no-redact",
            "redact_on",
            default=None,
            help=on_help + ("" if stored else "  [default: redact]"),
        )(run)

    return decorate


def _resolve(
    stored: bool,
    on: bool | None,
    keys: tuple[str, ...],
    paths: tuple[str, ...],
    values: tuple[str, ...],
) -> RedactRules | None:
    given = bool(keys or paths or values)
    if on is False:
        if given:
            raise click.UsageError("--no-redact and a --redact-* rule contradict each other")
        return None
    rules: list[list[str]] = [[], [], []]
    enabled = on is True or given or not stored
    if stored:
        try:
            from_env, rules = rules_from_env(os.environ.get(REDACT_ENV, ""))
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        enabled = enabled or from_env
    if not enabled:
        return None
    from acp_proxy.formats.redact import RedactRules  # its patterns: only when redacting

    try:
        return RedactRules.of([*rules[0], *keys], [*rules[1], *paths], [*rules[2], *values])
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
