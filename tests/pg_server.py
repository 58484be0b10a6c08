"""A real PostgreSQL server for the tests: ``initdb`` + ``pg_ctl`` on a private port and directory.

Debian's ``postgresql`` package provides the binaries (``.ci/run`` installs it when missing).
PostgreSQL refuses to run as root, so as root the server runs as the ``postgres`` user (or
``nobody``) through ``setpriv``; its data directory belongs to that user. Clients log in with
a password (``scram-sha-256`` over TCP), so credentials really travel in the URL.

``prefix`` runs every server command inside something else (``ip netns exec db``), for the
multi-host tests; ``listen`` is the address it binds.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import socket
import subprocess
import time
from pathlib import Path

USER = "acp"
PASSWORD = "s3cret-pw"
_counter = itertools.count(1)


def find_bindir() -> Path | None:
    """The directory holding ``initdb`` and ``pg_ctl`` (newest Debian version first)."""
    for name in sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if (Path(name) / "initdb").exists():
            return Path(name)
    found = shutil.which("initdb")
    return Path(found).parent if found else None


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


class PgServer:
    """One PostgreSQL cluster started for the tests; :meth:`database` makes a fresh database."""

    def __init__(
        self,
        base: Path,
        *,
        listen: str = "127.0.0.1",
        port: int | None = None,
        prefix: list[str] | None = None,
    ) -> None:
        bindir = find_bindir()
        if bindir is None:
            raise RuntimeError("PostgreSQL is not installed (Debian: apt-get install postgresql)")
        self.bindir = bindir
        self.base = base
        self.data = base / "data"
        self.listen = listen
        self.port = port or free_port(listen if listen != "*" else "127.0.0.1")
        self.prefix = list(prefix or [])
        self._as: list[str] = []
        self._uid: int | None = None
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam("postgres")
            except KeyError:
                entry = pwd.getpwnam("nobody")
            self._uid, gid = entry.pw_uid, entry.pw_gid
            self._as = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={gid}", "--clear-groups"]

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[bytes]:
        done = subprocess.run(
            [*self.prefix, *self._as, *args], capture_output=True, timeout=120, cwd="/"
        )
        if check and done.returncode != 0:
            raise RuntimeError(f"{args[0]} failed: {done.stderr.decode()} {done.stdout.decode()}")
        return done

    def _own(self, path: Path) -> None:
        if self._uid is not None:
            os.chown(path, self._uid, -1)

    def init(self) -> None:
        self.base.mkdir(parents=True, exist_ok=True)
        self.base.chmod(0o755)
        for parent in self.base.parents:  # the server user must reach its directory
            if parent == Path("/"):
                break
            parent.chmod(parent.stat().st_mode | 0o005)
        self.data.mkdir()
        self._own(self.data)
        pwfile = self.base / "pw"
        pwfile.write_text(PASSWORD + "\n")
        self._own(pwfile)
        self._run(
            str(self.bindir / "initdb"),
            "-D",
            str(self.data),
            "-U",
            USER,
            "--pwfile",
            str(pwfile),
            "-A",
            "scram-sha-256",
            "--auth-local=trust",
            "-E",
            "UTF8",
            "--no-sync",
        )
        pwfile.unlink()
        with (self.data / "postgresql.conf").open("a") as conf:
            conf.write(
                f"listen_addresses = '{self.listen}'\nport = {self.port}\n"
                f"unix_socket_directories = '{self.data}'\nfsync = off\n"
                "synchronous_commit = off\nfull_page_writes = off\nmax_connections = 600\n"
                "shared_buffers = 64MB\n"
            )
        with (self.data / "pg_hba.conf").open("a") as hba:
            hba.write("host all all 0.0.0.0/0 scram-sha-256\n")

    def start(self) -> None:
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D",
            str(self.data),
            "-l",
            str(self.data / "server.log"),
            "-w",
            "-t",
            "60",
            "start",
        )

    def stop(self, mode: str = "fast") -> None:
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self) -> None:
        self.stop()
        self.start()

    def running(self) -> bool:
        done = self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "status", check=False)
        return done.returncode == 0

    def host(self) -> str:
        return "127.0.0.1" if self.listen in ("*", "0.0.0.0") else self.listen

    def url(
        self, dbname: str = "postgres", *, password: bool = True, host: str | None = None
    ) -> str:
        auth = f"{USER}:{PASSWORD}" if password else USER
        return f"postgresql://{auth}@{host or self.host()}:{self.port}/{dbname}"

    def psql(self, sql: str, dbname: str = "postgres") -> str:
        """Run ``sql`` through the server's own ``psql`` over its Unix socket; stdout."""
        done = self._run(
            str(self.bindir / "psql"),
            "-h",
            str(self.data),
            "-p",
            str(self.port),
            "-U",
            USER,
            "-d",
            dbname,
            "-v",
            "ON_ERROR_STOP=1",
            "-At",
            "-c",
            sql,
        )
        return done.stdout.decode()

    def database(self) -> str:
        """A new empty database; returns its URL (with the password)."""
        name = f"t{os.getpid()}_{next(_counter)}_{int(time.time() * 1000) % 100000}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def log(self) -> str:
        try:
            return (self.data / "server.log").read_text(errors="replace")
        except OSError:
            return ""
