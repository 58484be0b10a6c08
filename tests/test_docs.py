"""The user's documents: every relative link and anchor resolves; the README walkthrough runs."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import proxy_exe

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted(
    [
        ROOT / "README.md",
        *ROOT.glob("docs/**/*.md"),
        *ROOT.glob("bench/*.md"),
        *ROOT.glob("recordings/*.md"),
    ]
)
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (links inside samples are not links)."""
    out, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            out.append(line)
    return "\n".join(out)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation gone, spaces to hyphens."""
    text = re.sub(r"`|\*|_(?=\W)|(?<=\W)_", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in _prose(path.read_text()).splitlines():
        match = re.match(r"^#{1,6}\s+(.*)$", line)
        if not match:
            continue
        slug = github_slug(match.group(1))
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        found.add(slug if count == 0 else f"{slug}-{count}")
    return found


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(_prose(doc.read_text())):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (doc.parent / file_part).resolve() if file_part else doc
        if not dest.exists():
            broken.append(f"{doc.relative_to(ROOT)}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            broken.append(f"{doc.relative_to(ROOT)}: {target} (no such anchor)")
    return broken


def test_github_slug_matches_githubs_rules() -> None:
    assert github_slug("Copying between stores: `acp-proxy copy SRC DST`") == (
        "copying-between-stores-acp-proxy-copy-src-dst"
    )
    assert github_slug("History: the stdio proxy and its recorder") == (
        "history-the-stdio-proxy-and-its-recorder"
    )


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_relative_link_and_anchor_resolves(doc: Path) -> None:
    assert broken_links(doc) == []


def test_the_link_check_finds_a_broken_link_and_anchor(tmp_path: Path) -> None:
    (tmp_path / "a.md").write_text("# Title\n\n[x](b.md) [y](#nope) [z](#title)\n")
    assert [b.split(": ", 1)[1] for b in broken_links_in(tmp_path / "a.md")] == [
        "b.md (no such file)",
        "#nope (no such anchor)",
    ]


def broken_links_in(doc: Path) -> list[str]:
    global ROOT
    saved, ROOT = ROOT, doc.parent
    try:
        return broken_links(doc)
    finally:
        ROOT = saved


def test_the_readme_is_a_users_document() -> None:
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= 160
    assert max(len(line) for line in lines if not line.startswith("|")) <= 100


def walkthrough_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("<!-- walkthrough -->", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    commands = []
    for line in block.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            commands.append(line.split("  #", 1)[0].strip())
    return commands


def test_the_readme_walkthrough_runs_as_written(tmp_path: Path) -> None:
    """Each walkthrough line runs from the checkout; the inspector answers, then is stopped."""
    db = str(tmp_path / "v2.db")
    commands = walkthrough_commands()
    assert len(commands) >= 7, commands
    for command in commands:
        argv = [db if word == "/tmp/v2.db" else word for word in shlex.split(command)]
        argv = [sys.executable if word == "python" else word for word in argv]
        at = argv.index("acp-proxy")
        argv[at : at + 1] = proxy_exe()
        if command.startswith("acp-proxy web "):
            _check_inspector(argv)
            continue
        done = subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=120)
        assert done.returncode == 0, (command, done.stderr.decode()[-2000:])
        assert done.stdout, command


def _check_inspector(argv: list[str]) -> None:
    proc = subprocess.Popen(
        [*argv, "--listen", "127.0.0.1:0"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        url = re.search(r"http://\S+/", line)
        assert url, line
        with urllib.request.urlopen(url.group(0) + "api/info", timeout=30) as answer:
            assert answer.status == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
