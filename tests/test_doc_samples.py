"""The command output the docs show is what the commands print (``scripts/doc_samples.py``).

Every fenced block marked ``<!-- sample -->`` in docs/*.md is run through the real
``acp-proxy`` and compared; the mechanism itself is checked on a sample made stale on
purpose (it must be caught, and regenerated to what the command prints).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "scripts" / "doc_samples.py"


def _samples(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=600
    )


def test_every_doc_sample_is_what_its_commands_print() -> None:
    marked = [p for p in (ROOT / "docs").glob("*.md") if "<!-- sample -->" in p.read_text()]
    assert ROOT / "docs" / "inspect.md" in marked
    done = _samples("--check")
    assert done.returncode == 0, done.stdout + done.stderr


def test_a_stale_sample_is_caught_and_regenerated(tmp_path: Path) -> None:
    doc = tmp_path / "page.md"
    stale = (
        "Intro.\n\n<!-- sample -->\n```console\n"
        "$ acp-proxy import recordings/v1-load.jsonl s.db\nimported nothing\n"
        "$ acp-proxy ls s.db | cut -c1-2\n#\n...\n```\n\nAfter.\n"
    )
    doc.write_text(stale)
    done = _samples("--check", str(doc))
    assert done.returncode == 1, done.stdout + done.stderr
    assert f"{doc}:5: the sample differs" in done.stdout
    assert "-imported nothing" in done.stdout
    assert doc.read_text() == stale  # --check writes nothing
    done = _samples(str(doc))  # the sample has an elision: listed, not rewritten
    assert done.returncode == 1 and doc.read_text() == stale
    done = _samples("--full", str(doc))
    assert done.returncode == 0, done.stdout + done.stderr
    text = doc.read_text()
    assert text.startswith("Intro.\n\n<!-- sample -->\n```console\n") and text.endswith(
        "```\n\nAfter.\n"
    )
    assert "\nimported 2 connection(s) (1->1, 2->2), 77 frame(s)" in text
    assert "$ acp-proxy ls s.db | cut -c1-2\n#\n1\n2\n```" in text
    assert _samples("--check", str(doc)).returncode == 0


def test_elisions_match_what_they_stand_for() -> None:
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        from doc_samples import matches
    finally:
        sys.path.remove(str(SCRIPT.parent))
    printed = ["a", "b long line", "c", "d"]
    assert matches(["a", "...", "d"], printed)
    assert matches(["a", "b long ...", "c", "d"], printed)
    assert matches(["...", "c", "d"], printed)
    assert not matches(["a", "c", "d"], printed)  # a line missing without "..."
    assert not matches(["a", "b short ...", "..."], printed)
    assert not matches(["a", "...", "c"], printed)  # "d" is printed after "c"
