"""A minimal stdio peer for the benchmark (stdlib only).

Reads newline-delimited JSON-RPC requests on stdin:

- ``bench/ping`` is answered at once (round-trip latency);
- ``bench/flood`` with ``{"count": N}`` first writes N ``session/update`` notifications of
  kind ``agent_message_chunk`` (about 300 bytes each), then the response (throughput).
  With ``"rate": R`` as well it paces them at R frames/s (a steady load, not a burst).

It exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys
import time

CHUNK_TEXT = "The quick brown fox jumps over the lazy dog. " * 2 + "Lorem ipsum dolor."


def chunk_frame(n: int) -> bytes:
    """One ~300-byte agent_message_chunk notification, numbered ``n``."""
    return (
        '{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"sess_bench_0001",'
        f'"update":{{"sessionUpdate":"agent_message_chunk","messageId":"msg_{n // 50:08d}",'
        f'"content":{{"type":"text","text":"{CHUNK_TEXT}{n:08d}"}}}}}}}}\n'
    ).encode()


def write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def main() -> None:
    for line in sys.stdin.buffer:
        if not line.strip():
            continue
        msg = json.loads(line)
        rid = msg.get("id")
        if msg.get("method") == "bench/flood":
            count = int(msg["params"]["count"])
            rate = float(msg["params"].get("rate") or 0)
            block: list[bytes] = []
            start = time.monotonic()
            for n in range(count):
                block.append(chunk_frame(n))
                if len(block) == 512:
                    if rate:  # wait until these frames are due
                        ahead = start + (n + 1) / rate - time.monotonic()
                        if ahead > 0:
                            time.sleep(ahead)
                    write_all(b"".join(block))
                    block.clear()
            write_all(b"".join(block))
        reply = {"jsonrpc": "2.0", "id": rid, "result": {}}
        write_all(json.dumps(reply, separators=(",", ":")).encode() + b"\n")


if __name__ == "__main__":
    main()
