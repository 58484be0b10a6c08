"""Network namespaces as hosts, for the multi-host tests: a private LAN made and removed by a test.

:class:`Lab` makes one namespace per host, each with ``lo`` up and an ``eth0`` (one end of a
veth pair) on a private 10.77.0.0/24 LAN; the other ends are enslaved to a bridge in a switch
namespace of their own, so the machine's own network is never touched and two runs at once
(their names carry the test process's pid) cannot collide. :meth:`Host.argv` runs a command on
a host: inside its namespace (``ip netns exec``) and, with ``hostname=True``, in a UTS
namespace of its own whose host name is the host's name, so ``socket.gethostname()`` there is
``hostA``, not the machine's. :meth:`Lab.close` kills every process left in the namespaces and
deletes them (veths go with them), whether the test passed or not; a new lab also removes
namespaces left behind by runs whose process is gone.

:func:`unavailable` says why namespaces cannot be made here (not root, no ``ip``), or ``None``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field

PREFIX = "acplab"
"""Every namespace a lab makes is called ``acplab<pid>-<name>``."""

SUBNET = "10.77.0"
_NAME_RE = re.compile(rf"^{PREFIX}(\d+)-")


@functools.cache
def unavailable() -> str | None:
    """Why network namespaces cannot be made here, or ``None`` when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs the suite as root)"
    for tool in ("ip", "unshare", "hostname"):
        if shutil.which(tool) is None:
            return f"network namespaces need `{tool}` (Debian: iproute2, util-linux)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    done = subprocess.run(["ip", "netns", "add", probe], capture_output=True)
    if done.returncode != 0:
        return "cannot make a network namespace here: " + done.stderr.decode().strip()
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
    done = subprocess.run(["ip", *args], capture_output=True, timeout=30)
    if check and done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.decode().strip()}")
    return done


def _namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout.decode()
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _pids(ns: str) -> list[int]:
    out = _ip("netns", "pids", ns, check=False).stdout.decode()
    return [int(p) for p in out.split() if p.isdigit()]


def _remove(ns: str) -> None:
    """Kill every process inside ``ns`` (until none is left), then delete it."""
    for _ in range(50):
        pids = _pids(ns)
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.1)
    _ip("netns", "del", ns, check=False)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_leftovers() -> list[str]:
    """Delete the namespaces of labs whose test process no longer runs; their names."""
    gone = []
    for ns in _namespaces():
        match = _NAME_RE.match(ns)
        if match and int(match.group(1)) != os.getpid() and not _alive(int(match.group(1))):
            _remove(ns)
            gone.append(ns)
    return gone


@dataclass
class Host:
    """One host of a lab: its namespace, address on the LAN and host name."""

    name: str
    ns: str
    ip: str
    veth: str
    """The switch's end of this host's link (``Lab.cut`` takes it down)."""
    started: list[subprocess.Popen[bytes]] = field(default_factory=list)
    """What :meth:`popen` started (``ip netns exec``, ``unshare`` and ``sh`` all exec, so
    each keeps its pid): killed by ``Lab.close`` even if it had not entered the namespace yet
    when the lab listed the namespace's processes."""

    @property
    def prefix(self) -> list[str]:
        """Run a command inside this host's network namespace: ``[*prefix, *argv]``."""
        return ["ip", "netns", "exec", self.ns]

    def argv(self, argv: list[str], *, hostname: bool = True) -> list[str]:
        """``argv`` run on this host; with ``hostname``, ``gethostname()`` there is its name."""
        if not hostname:
            return [*self.prefix, *argv]
        return [
            *self.prefix,
            "unshare",
            "--uts",
            "sh",
            "-c",
            'hostname "$0" && exec "$@"',
            self.name,
            *argv,
        ]

    def run(
        self, argv: list[str], *, hostname: bool = True, timeout: float = 120, **kwargs: object
    ) -> subprocess.CompletedProcess[bytes]:
        """Run ``argv`` on this host to completion, output captured."""
        return subprocess.run(  # type: ignore[call-overload, no-any-return]
            self.argv(argv, hostname=hostname), capture_output=True, timeout=timeout, **kwargs
        )

    def popen(
        self, argv: list[str], *, hostname: bool = True, **kwargs: object
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` on this host (the lab kills it at the end if it still runs)."""
        proc: subprocess.Popen[bytes] = subprocess.Popen(  # type: ignore[call-overload]
            self.argv(argv, hostname=hostname), **kwargs
        )
        self.started.append(proc)
        return proc


@dataclass
class Lab:
    """Hosts on one private LAN (a bridge in a switch namespace); :meth:`close` removes it all."""

    tag: str = field(default_factory=lambda: f"{PREFIX}{os.getpid()}")
    hosts: dict[str, Host] = field(default_factory=dict)
    _made: list[str] = field(default_factory=list)
    _switch: str = ""

    def __post_init__(self) -> None:
        remove_leftovers()
        # A lab of the same pid left by an earlier test of this run (a failed close).
        for ns in _namespaces():
            if ns.startswith(self.tag + "-"):
                _remove(ns)
        self._switch = self._namespace("switch")
        _ip("-n", self._switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self._switch, "link", "set", "br0", "up")

    def _namespace(self, name: str) -> str:
        ns = f"{self.tag}-{name}"
        _ip("netns", "add", ns)
        self._made.append(ns)
        _ip("-n", ns, "link", "set", "lo", "up")
        return ns

    def add(self, name: str) -> Host:
        """A new host ``name`` at the next address of the LAN (10.77.0.1, .2, ...)."""
        index = len(self.hosts) + 1
        ns = self._namespace(name)
        # Unique names in the root namespace for the moment they exist there (<= 15 chars).
        inner, outer = f"a{os.getpid()}h{index}", f"b{os.getpid()}h{index}"
        _ip("link", "add", inner, "type", "veth", "peer", "name", outer)
        _ip("link", "set", inner, "netns", ns)
        _ip("link", "set", outer, "netns", self._switch)
        _ip("-n", ns, "link", "set", inner, "name", "eth0")
        ip = f"{SUBNET}.{index}"
        _ip("-n", ns, "addr", "add", f"{ip}/24", "dev", "eth0")
        _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("-n", self._switch, "link", "set", outer, "master", "br0")
        _ip("-n", self._switch, "link", "set", outer, "up")
        host = Host(name=name, ns=ns, ip=ip, veth=outer)
        self.hosts[name] = host
        return host

    def cut(self, host: Host) -> None:
        """Unplug ``host``'s cable: nothing reaches it or leaves it until :meth:`mend`."""
        _ip("-n", self._switch, "link", "set", host.veth, "down")

    def mend(self, host: Host) -> None:
        _ip("-n", self._switch, "link", "set", host.veth, "up")

    def close(self) -> None:
        """Kill every process in the lab's namespaces and delete them (idempotent)."""
        for host in self.hosts.values():
            for proc in host.started:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        proc.kill()
        while self._made:
            _remove(self._made.pop())
        self.hosts.clear()

    def __enter__(self) -> Lab:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
