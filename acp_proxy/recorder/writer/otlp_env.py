"""The environment variables that switch live OTLP export on, read without the exporter.

The forwarding process only asks :func:`otlp_asked` (is live export wanted at all?) before
its first byte; the settings themselves and the SDK are the writer process's business
(:mod:`acp_proxy.recorder.writer.otlp_live`, which re-exports these names).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

ENDPOINT_ENV = "ACP_PROXY_OTLP_ENDPOINT"
"""``--otlp-endpoint`` as the writer process sees it."""

HEADERS_ENV = "ACP_PROXY_OTLP_HEADERS"
"""``--otlp-header`` pairs (a JSON object) as the writer process sees it."""

CONTENT_ENV = "ACP_PROXY_OTLP_CONTENT"
"""Set to ``1`` to put content (prompt text, tool output...) into live spans."""

STANDARD_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
"""The SDK's own variables that switch live export on as well."""


def otlp_off(env: Mapping[str, str]) -> bool:
    """``OTEL_SDK_DISABLED=true`` or ``OTEL_TRACES_EXPORTER=none``: live export is off."""
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return True
    return env.get("OTEL_TRACES_EXPORTER", "").strip().lower() == "none"


def otlp_asked(env: Mapping[str, str] | None = None) -> bool:
    """Whether ``env`` (default: this process's) asks for live export (an endpoint is set
    and export is not turned off): exactly when ``settings_from_env`` returns settings."""
    env = os.environ if env is None else env
    if otlp_off(env):
        return False
    return bool(env.get(ENDPOINT_ENV)) or any(env.get(name) for name in STANDARD_ENDPOINT_ENVS)
