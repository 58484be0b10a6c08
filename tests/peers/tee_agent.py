"""Runs an agent and logs the exact bytes it read and wrote: ``tee_agent.py DIR -- CMD...``.

Each run writes ``DIR/<pid>.in`` (everything the agent read on stdin) and ``DIR/<pid>.out``
(everything it wrote on stdout), so tests can compare them with what a client sent and got.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading


def copy(src: int, dst: int, log_path: str) -> None:
    with open(log_path, "wb", buffering=0) as log:
        while True:
            data = os.read(src, 1 << 16)
            if not data:
                break
            log.write(data)
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(dst, view) :]
            except OSError:
                pass


def main() -> int:
    log_dir = sys.argv[1]
    argv = sys.argv[sys.argv.index("--") + 1 :]
    child = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0)
    assert child.stdin is not None and child.stdout is not None
    base = os.path.join(log_dir, str(os.getpid()))
    feeder = threading.Thread(
        target=lambda: (copy(0, child.stdin.fileno(), base + ".in"), child.stdin.close()),
        daemon=True,
    )
    feeder.start()
    copy(child.stdout.fileno(), 1, base + ".out")
    return child.wait()


if __name__ == "__main__":
    sys.exit(main())
