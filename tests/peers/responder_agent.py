"""A tiny stdlib stdio agent: answers every request with its exact line, echoes the rest.

Request ``{"id": X, "method": ...}`` -> ``{"jsonrpc":"2.0","id":X,"result":{"got": LINE}}``
where LINE is the line it read (terminator included); any other line is echoed unchanged.
"""

import json
import sys

for line in sys.stdin.buffer:
    try:
        msg = json.loads(line)
    except ValueError:
        msg = None
    if isinstance(msg, dict) and "id" in msg and "method" in msg:
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": {"got": line.decode()}}
        sys.stdout.write(json.dumps(out, separators=(",", ":")) + "\n")
    else:
        sys.stdout.buffer.write(line)
    sys.stdout.flush()
