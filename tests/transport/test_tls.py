"""TLS through the real executable: ``--tls-cert/--tls-key`` on the servers, ``--cafile`` on
the clients, with a CA and a certificate for 127.0.0.1 that the test makes."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import os
import re
import signal
import ssl
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.conftest import ECHO_AGENT, frames_of, proxy_exe, run_proxy
from tests.helpers import listening_url
from tests.transport.http.helpers import DEMO

URL_RE = re.compile(rb"((?:https|wss|http|ws)://\S+)")
INITIALIZE = b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":1}}'


@dataclass
class Pki:
    """A test CA, a certificate for 127.0.0.1 it signed, and that certificate's key (PEM)."""

    ca: Path
    cert: Path
    key: Path
    other_key: Path
    encrypted_key: Path

    def client(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca))


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    base = tmp_path_factory.mktemp("pki")
    now = datetime.datetime.now(datetime.UTC)
    ca_key, leaf_key = _key(), _key()
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "acp-proxy test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(False, False, False, False, False, True, True, False, False),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    leaf = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
        .issuer_name(ca_name)
        .public_key(leaf_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1")), x509.DNSName("localhost")]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pki = Pki(
        base / "ca.pem", base / "cert.pem", base / "key.pem", base / "other.pem", base / "enc.pem"
    )
    pki.encrypted_key.write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.BestAvailableEncryption(b"secret"),
        )
    )
    pki.ca.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    pki.cert.write_bytes(leaf.public_bytes(serialization.Encoding.PEM))
    pki.key.write_bytes(_pem_key(leaf_key))
    pki.other_key.write_bytes(_pem_key(_key()))
    return pki


@dataclass
class Server:
    """A running acp-proxy server: its process, the URL it printed and its output lines."""

    proc: subprocess.Popen[bytes]
    url: str
    lines: list[bytes]


@contextmanager
def running(args: list[str], stream: str = "stderr") -> Iterator[Server]:
    """Run ``acp-proxy ARGS`` until the block ends; the first URL it prints on ``stream``."""
    proc = subprocess.Popen(
        [*proxy_exe(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL,
        stderr=subprocess.PIPE if stream == "stderr" else subprocess.DEVNULL,
    )
    pipe = proc.stdout if stream == "stdout" else proc.stderr
    try:
        proc.stderr = pipe  # listening_url reads .stderr
        url, lines = listening_url(proc, URL_RE)

        def drain() -> None:
            for line in iter(pipe.readline, b""):  # type: ignore[union-attr]
                lines.append(line)

        threading.Thread(target=drain, daemon=True).start()
        yield Server(proc, url, lines)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        proc.wait(60)


def tls_args(pki: Pki) -> list[str]:
    return ["--tls-cert", str(pki.cert), "--tls-key", str(pki.key)]


def test_serve_over_https_forwards_and_records_the_bytes_sent(tmp_path: Path, pki: Pki) -> None:
    db = tmp_path / "https.db"
    args = ["serve", "--listen", "127.0.0.1:0", *tls_args(pki), "--record", str(db), "--"]

    with running([*args, *DEMO, "--state", str(tmp_path / "state")]) as server:
        assert server.url.startswith("https://127.0.0.1:") and server.url.endswith("/acp")
        assert b"WebSocket: wss://127.0.0.1:" in b"".join(server.lines)
        status, body = asyncio.run(post_initialize(server.url, pki.client()))
        assert status == 200 and json.loads(body)["id"] == 1
        plain = "http://" + server.url.removeprefix("https://")
        with pytest.raises(Exception):  # noqa: B017 - plain HTTP gets no HTTP answer
            asyncio.run(_plain_get(plain))
    recorded = frames_of(db)
    assert recorded[0] == ("c2a", INITIALIZE)  # the raw bytes, not re-serialized
    assert recorded[1][0] == "a2c" and recorded[1][1] in body


async def _plain_get(url: str) -> int:
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.get(url, timeout=aiohttp.ClientTimeout(total=30)) as resp,
    ):
        return resp.status


def test_ws_over_wss_with_websockets_and_connect_cafile(tmp_path: Path, pki: Pki) -> None:
    db = tmp_path / "wss.db"
    line = b'{"jsonrpc":"2.0","method":"x/ping","params":{"text":"caf\xc3\xa9 \\u00e9"}}'

    async def echo(url: str) -> bytes:
        import websockets

        async with websockets.connect(url, ssl=pki.client()) as ws:
            await ws.send(line.decode())
            answer = await asyncio.wait_for(ws.recv(), 30)
            return answer.encode() if isinstance(answer, str) else answer

    args = ["ws", "--listen", "127.0.0.1:0", *tls_args(pki), "--record", str(db), "--"]
    with running([*args, *ECHO_AGENT]) as server:
        assert server.url.startswith("wss://127.0.0.1:")
        assert asyncio.run(echo(server.url)) == line
        assert connect_echo(server.url, line, "--cafile", str(pki.ca)) == line + b"\n"
        refused = run_proxy(["connect", server.url], stdin=line + b"\n")
    assert refused.returncode == 1
    err = refused.stderr.decode().strip().splitlines()
    assert len(err) == 1, err
    assert server.url in err[0] and "TLS certificate not trusted" in err[0]
    assert "Traceback" not in refused.stderr.decode()
    # both connections that got through recorded the exact bytes in both directions
    assert frames_of(db) == [("c2a", line), ("a2c", line)] * 2


def test_ws_upstream_wss_is_verified_with_cafile(tmp_path: Path, pki: Pki) -> None:
    line = b'{"jsonrpc":"2.0","method":"x/ping","params":{}}'

    async def echo(url: str) -> bytes:
        import websockets

        async with websockets.connect(url) as ws:
            await ws.send(line.decode())
            answer = await asyncio.wait_for(ws.recv(), 30)
            return answer.encode() if isinstance(answer, str) else answer

    inner = ["ws", "--listen", "127.0.0.1:0", *tls_args(pki), "--", *ECHO_AGENT]
    with running(inner) as upstream:
        front = ["ws", "--listen", "127.0.0.1:0", "--upstream", upstream.url]
        with running([*front, "--cafile", str(pki.ca)]) as trusting:
            assert asyncio.run(echo(trusting.url)) == line
        with running(front) as strict:
            with pytest.raises(Exception, match="502"):
                asyncio.run(echo(strict.url))
            strict.proc.send_signal(signal.SIGTERM)
            strict.proc.wait(60)
        said = b"".join(strict.lines).decode()
        assert f"cannot reach upstream {upstream.url}: TLS certificate not trusted" in said


def connect_echo(url: str, line: bytes, *flags: str) -> bytes:
    """``acp-proxy connect URL FLAGS``: send ``line``, read one line back, end stdin; the line."""
    proc = subprocess.Popen(
        [*proxy_exe(), "connect", url, *flags],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()
        answer = proc.stdout.readline()
        proc.stdin.close()
        proc.stdin = None  # closed: communicate() must not flush it
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)
    assert proc.returncode == 0, err
    return answer


def test_connect_https_and_serve_upstream_verify_the_peer(tmp_path: Path, pki: Pki) -> None:
    inner = ["serve", "--listen", "127.0.0.1:0", *tls_args(pki), "--"]
    with running([*inner, *DEMO, "--state", str(tmp_path / "state")]) as upstream:
        ok = run_proxy(["connect", upstream.url, "--cafile", str(pki.ca)], stdin=INITIALIZE + b"\n")
        assert ok.returncode == 0, ok.stderr
        assert json.loads(ok.stdout.splitlines()[0])["id"] == 1
        bad = run_proxy(["connect", upstream.url], stdin=INITIALIZE + b"\n")
        assert bad.returncode == 1
        assert len(bad.stderr.decode().strip().splitlines()) == 1, bad.stderr
        assert upstream.url in bad.stderr.decode() and b"not trusted" in bad.stderr

        def relay(*extra: str) -> tuple[int, bytes]:
            outer = ["serve", "--listen", "127.0.0.1:0", "--upstream", upstream.url, *extra]
            with running(outer) as front:
                return asyncio.run(post_initialize(front.url))

        status, body = relay("--cafile", str(pki.ca))
        assert status == 200 and json.loads(body)["id"] == 1
        status, body = relay()
        assert status == 502
        assert b"TLS certificate not trusted" in body and upstream.url.encode() in body


async def post_initialize(url: str, tls: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    """POST ``initialize`` to ``url`` (verified with ``tls`` when given); status and body."""
    import aiohttp

    async with (
        aiohttp.ClientSession() as http,
        http.post(
            url,
            data=INITIALIZE,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
            ssl=tls or True,
        ) as resp,
    ):
        return resp.status, await resp.read()


def test_web_inspector_over_https(tmp_path: Path, pki: Pki) -> None:
    db = tmp_path / "web.db"
    recorded = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=INITIALIZE + b"\n")
    assert recorded.returncode == 0, recorded.stderr

    async def info(url: str) -> tuple[int, dict[str, object]]:
        import aiohttp

        async with (
            aiohttp.ClientSession() as http,
            http.get(url + "api/info", ssl=pki.client()) as resp,
        ):
            return resp.status, await resp.json()

    args = ["web", str(db), "--listen", "127.0.0.1:0", *tls_args(pki)]
    with running(args, stream="stdout") as server:
        assert server.url.startswith("https://127.0.0.1:")
        status, body = asyncio.run(info(server.url))
    assert status == 200 and body


def test_replay_listen_over_wss(tmp_path: Path, pki: Pki) -> None:
    db = tmp_path / "rec.db"
    demo = [*DEMO, "--state", str(tmp_path / "state")]
    assert run_proxy(["--record", str(db), "--", *demo], stdin=INITIALIZE + b"\n").returncode == 0
    args = ["replay", str(db), "--listen", "127.0.0.1:0", *tls_args(pki)]
    with running(args) as server:
        assert server.url.startswith("wss://127.0.0.1:")
        out = run_proxy(["connect", server.url, "--cafile", str(pki.ca)], stdin=INITIALIZE + b"\n")
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout.splitlines()[0])["id"] == 1


@pytest.mark.parametrize("command", ["serve", "ws", "web"])
def test_bad_certificate_or_key_is_one_line_at_start_up(
    tmp_path: Path, pki: Pki, command: str
) -> None:
    prefix = ["web", str(run_web_db(tmp_path))] if command == "web" else [command]
    agent = [] if command == "web" else ["--", *ECHO_AGENT]
    missing = str(tmp_path / "missing.pem")
    cases = [
        (["--tls-cert", str(pki.cert), "--tls-key", missing], "cannot read --tls-key"),
        (["--tls-cert", str(pki.cert), "--tls-key", str(pki.other_key)], "does not belong"),
        (["--tls-cert", str(pki.key), "--tls-key", str(pki.key)], "cannot load the certificate"),
        (["--tls-cert", str(pki.cert), "--tls-key", str(pki.encrypted_key)], "is encrypted"),
    ]
    for tls, expected in cases:
        done = run_proxy([*prefix, "--listen", "127.0.0.1:0", *tls, *agent], timeout=60)
        err = done.stderr.decode()
        assert done.returncode == 1, err
        assert len(err.strip().splitlines()) == 1 and expected in err, err
    half = run_proxy([*prefix, "--tls-cert", str(pki.cert), *agent])
    assert half.returncode == 2 and b"--tls-cert needs --tls-key" in half.stderr


def run_web_db(tmp_path: Path) -> Path:
    db = tmp_path / "ok.db"
    if not db.exists():
        done = run_proxy(["--record", str(db), "--", *ECHO_AGENT], stdin=b"{}\n")
        assert done.returncode == 0, done.stderr
    return db


def test_cafile_that_cannot_be_read_is_one_line(tmp_path: Path) -> None:
    done = run_proxy(["connect", "wss://127.0.0.1:9/acp", "--cafile", str(tmp_path / "none")])
    assert done.returncode == 1
    assert done.stderr.decode().strip().splitlines() == [
        f"Error: cannot read --cafile {tmp_path / 'none'}: No such file or directory"
    ]


def test_tls_still_needs_a_token_off_loopback(pki: Pki) -> None:
    env = {k: v for k, v in os.environ.items() if k != "ACP_PROXY_TOKEN"}
    done = subprocess.run(
        [*proxy_exe(), "ws", "--listen", "0.0.0.0:0", *tls_args(pki), "--", *ECHO_AGENT],
        capture_output=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 2 and b"--token" in done.stderr
