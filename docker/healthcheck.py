"""The image's HEALTHCHECK: healthy while the server's port answers an HTTP GET.

Any HTTP answer counts (a 401 without a token, a 404 on ``/``): the process is alive and
serving. The URL is ``$ACP_PROXY_HEALTH_URL`` (default ``http://127.0.0.1:8765/``, the port
``ws`` and ``serve`` listen on in the examples). It moves to ``/healthz`` when the proxy has
a health endpoint of its own.
"""

from __future__ import annotations

import os
import sys
import urllib.error
import urllib.request

url = os.environ.get("ACP_PROXY_HEALTH_URL", "http://127.0.0.1:8765/")
try:
    urllib.request.urlopen(url, timeout=4).close()
except urllib.error.HTTPError:
    pass
except OSError as exc:
    sys.exit(f"unhealthy: {url}: {exc}")
