"""The container image: docker/Dockerfile built with buildah, run with podman, driven from the host.

scripts/build-image.sh builds it as CI would without a daemon or a registry (a debootstrapped
base, cached in /var/tmp/acp-proxy-ci). Slow: the first run on a machine makes the base
(1.5-5 min), every run builds the image (20-40 s); ~100 s in all with the base cached. Needs
root and Debian's buildah, podman, runc and debootstrap (.ci/run installs them), and
podman-compose (the test extra).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shlex
import shutil
import sqlite3
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import frames_of, proxy_exe
from tests.pg_server import free_port
from tests.transport.http.helpers import DEMO, sdk_client_run

ROOT = Path(__file__).resolve().parents[1]
TAG = "localhost/acp-proxy:test"
TOOLS = ("buildah", "podman", "runc", "debootstrap")
SBIN_PATH = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/sbin"])
MISSING = [tool for tool in TOOLS if shutil.which(tool, path=SBIN_PATH) is None]
# Only the build stage needs setuptools and wheel; the base image brings its own pip.
BUILD_ONLY = {"setuptools", "wheel"}

pytestmark = pytest.mark.slow


def canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pins(text: str) -> dict[str, str]:
    """``name==version`` lines (comments dropped) as {canonical name: version}."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            found[canonical(name)] = version.strip()
    return found


@dataclass
class Image:
    """The built image and the podman storage it lives in."""

    tag: str
    env: dict[str, str]
    build_output: str

    def podman(
        self, *args: str, timeout: float = 120, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["podman", *args], capture_output=True, text=True, timeout=timeout, env=self.env
        )
        if check:
            assert done.returncode == 0, f"podman {' '.join(args)}: {done.stderr}"
        return done

    def inspect(self) -> dict[str, Any]:
        (info,) = json.loads(self.podman("image", "inspect", self.tag).stdout)
        assert isinstance(info, dict)
        return info

    def wait_listening(self, name: str, timeout: float = 90) -> str:
        """The URL of the container's ``listening on URL`` line (its logs, polled)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            logs = self.podman("logs", name).stderr
            match = re.search(r"listening on (\S+)", logs)
            if match:
                return match.group(1)
            state = self.podman("inspect", "-f", "{{.State.Status}}", name).stdout.strip()
            assert state == "running", f"{name} is {state}: {logs}"
            time.sleep(0.5)
        raise AssertionError(f"{name} did not start: {self.podman('logs', name).stderr}")


@pytest.fixture(scope="module")
def image() -> Iterator[Image]:
    if os.geteuid() != 0:
        pytest.skip("buildah and podman run rootful here: needs root")
    if MISSING:
        pytest.skip(
            f"{', '.join(MISSING)} not installed (.ci/run: apt-get install {' '.join(TOOLS)})"
        )
    # podman's storage is kept with the base's rootfs: the next run reuses the imported base
    # and the build's cached layers (and removing ~250 MB of layers took 30 s here)
    cache = Path(os.environ.get("ACP_PROXY_IMAGE_CACHE", "/var/tmp/acp-proxy-ci"))
    work = cache / "podman"
    env = {**os.environ, "PATH": SBIN_PATH}
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "build-image.sh"), str(ROOT), str(work), TAG],
        capture_output=True,
        text=True,
        timeout=900,
        env=env,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    exports = done.stdout.strip().splitlines()[-1].removeprefix("export ").split()
    for item in exports:
        key, _, value = item.partition("=")
        env[key] = value
    built = Image(TAG, env, done.stdout)
    try:
        yield built
    finally:
        built.podman("rm", "--all", "--force", "--time", "0", check=False)
        built.podman("volume", "prune", "--force", check=False)
        subprocess.run(["buildah", "rm", "--all"], capture_output=True, env=env, timeout=120)
        built.podman("image", "prune", "--force", check=False)  # earlier builds' layers


@dataclass
class Running:
    """A detached container, removed when the test ends."""

    image: Image
    name: str


@pytest.fixture
def container(image: Image) -> Iterator[Running]:
    running = Running(image, f"acp-proxy-test-{secrets.token_hex(4)}")
    try:
        yield running
    finally:
        image.podman("rm", "--force", "--time", "0", running.name, check=False)


def volume_path(image: Image, volume: str) -> Path:
    """Where a named volume's files are on the host (podman runs as root here)."""
    return Path(image.podman("volume", "inspect", "-f", "{{.Mountpoint}}", volume).stdout.strip())


def connect(token: str, port: int) -> list[str]:
    """``acp-proxy connect`` to the container's published port, as an SDK client's agent.

    The SDK starts its agent with a minimal environment: ``env`` hands the token over.
    """
    keep = [f"{k}={os.environ[k]}" for k in ("PYTHONPATH", "PATH") if k in os.environ]
    bridge = ["env", *keep, f"ACP_PROXY_TOKEN={token}", *proxy_exe(), "connect"]
    return [*bridge, f"ws://127.0.0.1:{port}/acp"]


def summary(demo_output: str) -> str:
    """The demo's report up to its "Next, try:" hints (which name the host's python)."""
    return demo_output.split("Next, try:")[0]


def test_version_and_demo_in_the_image_match_the_host(image: Image, tmp_path: Path) -> None:
    here = subprocess.run([*proxy_exe(), "--version"], capture_output=True, text=True, timeout=60)
    assert image.podman("run", "--rm", image.tag, "--version").stdout == here.stdout
    assert here.stdout.startswith("acp-proxy, version ")
    volume = f"acp-demo-{secrets.token_hex(4)}"
    demo = ["demo", "--db", "demo.db", "--quiet", "--cwd", "/work"]
    inside = image.podman("run", "--rm", "-v", f"{volume}:/recordings", image.tag, *demo)
    outside = subprocess.run(
        [*proxy_exe(), *demo], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert outside.returncode == 0, outside.stderr
    assert "Recorded into demo.db:" in inside.stdout
    assert summary(inside.stdout) == summary(outside.stdout)
    # the deterministic demo agent: the container's recording is the host's, byte for byte
    recorded = frames_of(volume_path(image, volume) / "demo.db")
    assert len(recorded) > 100 and recorded == frames_of(tmp_path / "demo.db")


def test_every_python_package_in_the_image_is_pinned(image: Image) -> None:
    """pip freeze in the image is docker/constraints.txt (less the build backend), no more."""
    purelib = "import sysconfig; print(sysconfig.get_path('purelib'))"
    freeze = image.podman(
        *shlex.split(f"run --rm --entrypoint sh {image.tag} -c"),
        f'pip freeze --all --path "$(python3 -c "{purelib}")"',
    ).stdout
    installed = pins(freeze)
    assert (
        installed.pop("acp-proxy")
        == image.inspect()["Config"]["Labels"]["org.opencontainers.image.version"]
    )
    constraints = pins((ROOT / "docker" / "constraints.txt").read_text())
    assert installed == {k: v for k, v in constraints.items() if k not in BUILD_ONLY}
    assert {"sqlite-utils", "psycopg", "aiohttp"} <= installed.keys()


def test_check_pinned_names_a_wheel_the_constraints_leave_out(tmp_path: Path) -> None:
    """The build step that enforces it (docker/check_pinned.py), on a wheel directory."""
    for wheel in ("sqlite_utils-4.2.1-py3-none-any.whl", "acp_proxy-0.1.0-py3-none-any.whl"):
        (tmp_path / wheel).write_bytes(b"")
    check = ["python3", str(ROOT / "docker" / "check_pinned.py")]
    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("Sqlite.Utils==4.2.1  # comment\n")
    bad.write_text("sqlite-utils==4.2.0\n")
    ok = subprocess.run([*check, str(good), str(tmp_path), "acp-proxy"], capture_output=True)
    assert ok.returncode == 0, ok.stderr
    failed = subprocess.run(
        [*check, str(bad), str(tmp_path), "acp-proxy"], capture_output=True, text=True
    )
    assert failed.returncode == 1
    assert failed.stderr == f"not pinned in {bad}: sqlite_utils==4.2.1\n"


def test_image_metadata_healthcheck_user_and_no_build_leftovers(image: Image) -> None:
    info = image.inspect()
    config, labels = info["Config"], info["Config"]["Labels"]
    assert labels["org.opencontainers.image.title"] == "acp-proxy"
    assert labels["org.opencontainers.image.licenses"] == "Apache-2.0"
    # built FROM the base by digest (the form a production build pins python:...@sha256:...)
    base = labels["org.opencontainers.image.base.name"]
    assert re.fullmatch(r"\S+@sha256:[0-9a-f]{64}", base), base
    # --format docker: the OCI format would have dropped the HEALTHCHECK
    assert info["Healthcheck"]["Test"] == [
        "CMD",
        "python3",
        "/usr/local/lib/acp-proxy-healthcheck.py",
    ]
    assert config["User"] == "acp:acp" and "8765/tcp" in config["ExposedPorts"]
    size = info["Size"]
    assert 100e6 < size < 400e6, f"image size {size / 1e6:.0f} MB"
    # the CA bundle mounted for pip during the build is not in the image: it has the base's
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    shown = [
        image.podman("run", "--rm", "--entrypoint", "cat", ref, bundle).stdout
        for ref in (image.tag, base)
    ]
    assert shown[0] == shown[1]
    gone = image.podman(
        "run", "--rm", "--entrypoint", "sh", image.tag, "-c", "ls -d /wheels /src 2>&1; true"
    ).stdout
    assert gone.count("No such file or directory") == 2, gone


def test_ws_on_a_published_port_serves_a_host_client_and_records(
    container: Running, tmp_path: Path
) -> None:
    image, port, token = container.image, free_port(), secrets.token_urlsafe(16)
    volume = f"acp-ws-{secrets.token_hex(4)}"
    image.podman(
        *shlex.split(f"run -d --name {container.name} --health-interval disable"),
        *shlex.split(f"-p 127.0.0.1:{port}:8765"),
        *shlex.split(f"-e ACP_PROXY_TOKEN={token} -v {volume}:/recordings {image.tag}"),
        *shlex.split("ws --listen 0.0.0.0:8765 --record /recordings/ws.db --"),
        *shlex.split("python -m acp_proxy.demo.agent --state /recordings/state"),
    )
    url = image.wait_listening(container.name)
    assert url == "ws://0.0.0.0:8765/acp"
    # the HEALTHCHECK passes while the port answers, and fails where nothing listens
    health = image.podman("healthcheck", "run", container.name, check=False)
    assert health.returncode == 0, health.stdout + health.stderr
    closed = image.podman(
        *shlex.split(f"exec -e ACP_PROXY_HEALTH_URL=http://127.0.0.1:9/ {container.name}"),
        *shlex.split("python3 /usr/local/lib/acp-proxy-healthcheck.py"),
        check=False,
    )
    assert closed.returncode == 1 and closed.stderr.startswith("unhealthy: http://127.0.0.1:9/")
    # an SDK client on the host, through `acp-proxy connect`, sees what it sees on stdio
    over_ws = sdk_client_run(["--", *connect(token, port)])
    direct = sdk_client_run(["--", *DEMO, "--state", str(tmp_path / "state")])
    assert over_ws == direct and over_ws["load"]
    image.podman("stop", "--time", "30", container.name, timeout=60)
    db = volume_path(image, volume) / "ws.db"
    with sqlite3.connect(db) as conn:
        connections = conn.execute("SELECT transport, exit_status FROM connections").fetchall()
    # one connection for the prompt, one for the session/load
    assert [t for t, _ in connections] == ["websocket", "websocket"]
    assert all(status is not None for _, status in connections), connections
    assert len(frames_of(db)) > 20


def test_serve_in_the_image_records_into_postgresql_on_the_host(
    container: Running, pg_url: str, tmp_path: Path
) -> None:
    """No PostgreSQL image can be pulled: the server is the test's, on the host's loopback."""
    import psycopg

    image, port = container.image, free_port()
    image.podman(
        *shlex.split(f"run -d --name {container.name} --health-interval disable --network host"),
        *shlex.split(f"-e ACP_PROXY_HEALTH_URL=http://127.0.0.1:{port}/ {image.tag}"),
        *shlex.split(f"serve --listen 127.0.0.1:{port} --record {pg_url} --"),
        *shlex.split("python -m acp_proxy.demo.agent --state /tmp/state"),
    )
    url = image.wait_listening(container.name)
    health = image.podman("healthcheck", "run", container.name, check=False)
    assert health.returncode == 0, health.stdout + health.stderr
    over_http = sdk_client_run([url])
    direct = sdk_client_run(["--", *DEMO, "--state", str(tmp_path / "state")])
    assert over_http == direct and over_http["load"]
    image.podman("stop", "--time", "30", container.name, timeout=60)
    with psycopg.connect(pg_url) as conn:
        transports = conn.execute("SELECT transport FROM connections ORDER BY id").fetchall()
        (frames,) = conn.execute("SELECT count(*) FROM frames").fetchone() or (0,)
    assert transports == [("http",), ("http",)]
    assert frames > 20


def test_compose_file_is_valid_and_publishes_on_loopback_only() -> None:
    compose = shutil.which("podman-compose")
    if compose is None:
        pytest.skip("podman-compose not installed (pip install -e '.[test]')")
    import yaml  # type: ignore[import-untyped]  # podman-compose's own dependency

    config = [compose, "-f", str(ROOT / "docker" / "compose.yaml"), "config"]
    done = subprocess.run(
        config,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "ACP_PROXY_TOKEN": "t0ken"},
    )
    assert done.returncode == 0, done.stderr
    parsed = yaml.safe_load(done.stdout)
    assert parsed["name"] == "acp-proxy"
    (service,) = parsed["services"].values()
    assert service["init"] is True and service["read_only"] is True
    assert service["environment"]["ACP_PROXY_TOKEN"] == "t0ken"
    assert all(p.startswith("127.0.0.1:") for p in service["ports"])
    assert service["ports"] == ["127.0.0.1:8765:8765"]  # ACP_PROXY_PORT unset
    # the same check as the image's HEALTHCHECK
    dockerfile = (ROOT / "docker" / "Dockerfile").read_text()
    image_check = re.search(r"^HEALTHCHECK .*\\\n\s*CMD (\[.*\])$", dockerfile, re.M)
    assert image_check is not None
    assert service["healthcheck"]["test"] == ["CMD", *json.loads(image_check.group(1))]
    env = {k: v for k, v in os.environ.items() if k != "ACP_PROXY_TOKEN"}
    unset = subprocess.run(config, capture_output=True, text=True, timeout=60, env=env)
    assert unset.returncode != 0 and "ACP_PROXY_TOKEN" in unset.stderr


def test_compose_file_runs_the_image_with_init_and_a_health_check(
    image: Image, tmp_path: Path
) -> None:
    """`podman-compose up` on docker/compose.yaml, the image built above as its acp-proxy:local."""
    compose = shutil.which("podman-compose")
    if compose is None:
        pytest.skip("podman-compose not installed (pip install -e '.[test]')")
    image.podman("tag", image.tag, "localhost/acp-proxy:local")
    project, port, token = f"acp-proxy-test-{secrets.token_hex(4)}", free_port(), "t0ken"
    env = {**image.env, "ACP_PROXY_TOKEN": token, "ACP_PROXY_PORT": str(port)}
    run = [compose, "-f", str(ROOT / "docker" / "compose.yaml"), "-p", project]
    up = subprocess.run(
        [*run, "up", "-d", "--no-build"], capture_output=True, text=True, timeout=180, env=env
    )
    try:
        assert up.returncode == 0, up.stderr
        name = f"{project}_acp-proxy_1"
        assert image.wait_listening(name) == "ws://0.0.0.0:8765/acp"
        # init: true, so podman's init is PID 1 and acp-proxy its child
        pid1 = image.podman("exec", name, "cat", "/proc/1/cmdline").stdout.split("\0")
        assert pid1[0] == "/run/podman-init" and "acp-proxy" in pid1
        health = image.podman("healthcheck", "run", name, check=False)
        assert health.returncode == 0, health.stdout + health.stderr
        over_ws = sdk_client_run(["--", *connect(token, port)])
        assert over_ws == sdk_client_run(["--", *DEMO, "--state", str(tmp_path / "state")])
        assert over_ws["load"]
    finally:
        subprocess.run([*run, "down", "-v"], capture_output=True, timeout=180, env=env)
