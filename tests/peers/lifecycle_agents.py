"""Small misbehaving agents for lifecycle tests: ``python lifecycle_agents.py MODE``.

Every mode first prints ``pid N`` on stdout so the test can watch the process.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time


def say(text: str) -> None:
    os.write(1, text.encode() + b"\n")


def drain_stdin() -> None:
    while os.read(0, 65536):
        pass


def main(mode: str) -> None:
    say(f"pid {os.getpid()}")
    if mode == "signals":  # report forwarded signals, exit 3

        def handler(signum: int, frame: object) -> None:
            say(f"got {signal.Signals(signum).name}")
            os._exit(3)

        for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
            signal.signal(sig, handler)
        say("ready")
        drain_stdin()
        say("eof")
        sys.exit(0)
    if mode == "default":  # default dispositions: dies of the signal
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        say("ready")
        drain_stdin()
        time.sleep(600)
    if mode == "linger":  # ignores stdin EOF, leaves politely on SIGTERM
        signal.signal(signal.SIGTERM, lambda s, f: os._exit(0))
        say("ready")
        drain_stdin()
        say("eof")
        time.sleep(600)
    if mode == "stubborn":  # ignores stdin EOF and SIGTERM
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        say("ready")
        drain_stdin()
        say("eof")
        while True:
            time.sleep(1)
    if mode == "burst-exit":  # lots of output, then exit 5 without reading stdin
        block = b"0123456789" * 100 + b"\n"
        for _ in range(2000):
            os.write(1, block)
        os.write(2, b"bye\n")
        say("last line without newline: ")
        os.write(1, b"tail")
        sys.exit(5)
    if mode == "flood":  # writes lines until killed
        say("ready")
        line = (
            b'{"jsonrpc":"2.0","method":"session/update","params":{"sessionId":"s","update":{"sessionUpdate":"agent_message_chunk","content":{"type":"text","text":"'
            + b"z" * 200
            + b'"}}}}\n'
        )
        while True:
            os.write(1, line * 64)
    if mode == "grandchild":  # a child keeps the pipes open after the agent exits
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        say(f"child {child.pid}")
        sys.exit(0)
    if mode == "tree-child":  # behind wrapper_agent.sh: ignores SIGTERM and stdin EOF
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        pidfile = sys.argv[2]
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open(pidfile, "a") as fh:
            fh.write(f"{os.getpid()}\n{helper.pid}\n")
        say("ready")
        drain_stdin()
        say("eof")
        while True:  # keeps working (and holding stdout) after stdin closed
            time.sleep(0.1)
    raise SystemExit(f"unknown mode {mode}")


if __name__ == "__main__":
    main(sys.argv[1])
