"""The environment variables that switch the writer process's live work on, read without it.

Live OTLP export and the live conformance check (``--metrics``) are the writer process's
business (:mod:`acp_proxy.recorder.writer.otlp_live`, :mod:`acp_proxy.recorder.writer.measures`);
the forwarding process sets or asks these names only (:func:`otlp_asked`: is live export
wanted at all?) before its first byte, without importing the exporter or the checker.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

LIVE_CHECK_ENV = "ACP_PROXY_LIVE_CHECK"
"""``1``: the writer runs the conformance checker on each connection (``--metrics``)."""

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
