"""The image's HEALTHCHECK: healthy while the proxy answers over HTTP.

The URL is ``$ACP_PROXY_HEALTH_URL`` (default ``http://127.0.0.1:8765/``, the port ``ws``
and ``serve`` listen on in the examples). A ``/healthz`` or ``/readyz`` URL (``--metrics``,
docs/operations.md) must answer 200, with ``$ACP_PROXY_METRICS_TOKEN`` as the bearer token
when it is set; any other URL passes on any HTTP answer (a 401 without a token, a 404 on
``/``): the process is alive and serving.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.parse
import urllib.request

url = os.environ.get("ACP_PROXY_HEALTH_URL", "http://127.0.0.1:8765/")
probe = urllib.parse.urlsplit(url).path.rstrip("/") in ("/healthz", "/readyz")
request = urllib.request.Request(url)
token = os.environ.get("ACP_PROXY_METRICS_TOKEN")
if probe and token:
    request.add_header("Authorization", f"Bearer {token}")
try:
    urllib.request.urlopen(request, timeout=4).close()
except urllib.error.HTTPError as exc:
    if probe:
        reason = exc.read().decode("utf-8", "replace").strip()
        sys.exit(f"unhealthy: {url}: {exc.code} {reason}")
except OSError as exc:
    sys.exit(f"unhealthy: {url}: {exc}")
