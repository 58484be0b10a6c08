"""A minimal stdio peer for the benchmark (stdlib only).

Reads newline-delimited JSON-RPC requests on stdin:

- ``bench/ping`` is answered at once (round-trip latency);
- ``bench/flood`` with ``{"count": N}`` first writes N ``session/update`` notifications of
  kind ``agent_message_chunk`` (about 300 bytes each), then the response (throughput).

It exits when stdin closes.
"""

from __future__ import annotations

import json
import os
import sys

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
            block: list[bytes] = []
            for n in range(count):
                block.append(chunk_frame(n))
                if len(block) == 512:
                    write_all(b"".join(block))
                    block.clear()
            write_all(b"".join(block))
        reply = {"jsonrpc": "2.0", "id": rid, "result": {}}
        write_all(json.dumps(reply, separators=(",", ":")).encode() + b"\n")


if __name__ == "__main__":
    main()
