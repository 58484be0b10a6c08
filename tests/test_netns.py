"""The network-namespace lab of the multi-host tests: hosts, names, cables and clean-up."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.netns import PREFIX, Lab, remove_leftovers, unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason=str(unavailable()))

SERVE = (
    "import socket,sys\n"
    "s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "s.bind((sys.argv[1], 7000)); s.listen()\n"
    "print('up', flush=True)\n"
    "c,_=s.accept(); c.sendall(socket.gethostname().encode()); c.close()\n"
)
ASK = (
    "import socket,sys\n"
    "c=socket.create_connection((sys.argv[1], 7000), timeout=float(sys.argv[2]))\n"
    "print(c.recv(100).decode(), socket.gethostname())\n"
)


def _namespaces() -> str:
    return subprocess.run(["ip", "netns", "list"], capture_output=True).stdout.decode()


def test_hosts_reach_each_other_under_their_own_names_and_a_cut_cable_stops_that() -> None:
    with Lab() as lab:
        a, b = lab.add("alpha"), lab.add("beta")
        assert (a.ip, b.ip) == ("10.77.0.1", "10.77.0.2")
        server = a.popen([sys.executable, "-c", SERVE, a.ip], stdout=subprocess.PIPE)
        assert server.stdout is not None and server.stdout.readline() == b"up\n"
        done = b.run([sys.executable, "-c", ASK, a.ip, "10"])
        assert done.stdout.decode().split() == ["alpha", "beta"], done.stderr
        server.wait(10)
        # Without the UTS namespace a process has the machine's name.
        plain = a.run(
            [sys.executable, "-c", "import socket; print(socket.gethostname())"], hostname=False
        )
        assert plain.stdout.decode().strip() not in ("alpha", "beta")
        lab.cut(a)
        done = b.run([sys.executable, "-c", ASK, a.ip, "1"])
        assert done.returncode != 0
        lab.mend(a)
        server = a.popen([sys.executable, "-c", SERVE, a.ip], stdout=subprocess.PIPE)
        assert server.stdout is not None and server.stdout.readline() == b"up\n"
        done = b.run([sys.executable, "-c", ASK, a.ip, "10"])
        assert done.stdout.decode().split() == ["alpha", "beta"], done.stderr
        server.wait(10)


def test_close_kills_what_runs_in_the_lab_and_removes_every_namespace() -> None:
    lab = Lab()
    try:
        host = lab.add("gamma")
        sleeper = host.popen(["sleep", "600"])
        assert lab.tag + "-gamma" in _namespaces()
    finally:
        lab.close()
    assert sleeper.wait(10) == -9
    assert lab.tag not in _namespaces()
    lab.close()  # idempotent


def test_a_lab_left_by_a_dead_run_is_removed() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    ns = f"{PREFIX}{dead.pid}-left"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    hidden = subprocess.Popen(["ip", "netns", "exec", ns, "sleep", "600"])
    for _ in range(50):  # until the sleeper is inside
        if subprocess.run(["ip", "netns", "pids", ns], capture_output=True).stdout.strip():
            break
        time.sleep(0.1)
    assert ns in remove_leftovers()
    assert hidden.wait(10) == -9
    assert ns not in _namespaces()
