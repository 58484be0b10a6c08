"""A stdio agent that writes a line nested 3,000 deep before each answer.

For every request line it reads it writes ``{"jsonrpc":"2.0","method":"_deep","params":``
``[``x3000 ``]``x3000 ``}`` and then ``{"jsonrpc":"2.0","id":ID,"result":{"ok":true}}``.
"""

from __future__ import annotations

import re
import sys

DEPTH = 3000
DEEP = b'{"jsonrpc":"2.0","method":"_deep","params":' + b"[" * DEPTH + b"]" * DEPTH + b"}\n"
ID = re.compile(rb'"id":(\d+)')


def main() -> None:
    for line in sys.stdin.buffer:
        found = ID.search(line)
        if found is None or b'"method"' not in line:
            continue
        answer = b'{"jsonrpc":"2.0","id":%s,"result":{"ok":true}}\n' % found.group(1)
        sys.stdout.buffer.write(DEEP + answer)
        sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
