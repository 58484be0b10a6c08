#!/usr/bin/env python3
"""Command output shown in the docs, generated from the real commands and checked.

A fenced block preceded by the line ``<!-- sample -->`` is a sample: its ``$ COMMAND``
lines are run, in order, by ``bash`` in a fresh temporary directory that links every entry
of the repository's root (so ``recordings/...`` and ``docs/...`` resolve), with ``TZ=UTC``,
``NO_COLOR=1`` and ``COLUMNS=100``; the lines after each command are what it prints
(stdout and stderr, as on a terminal). A command may continue on lines that start with
whitespace. Two elisions keep a sample short:

- a line that is just ``...`` stands for any number of output lines (none included);
- a line ending in ``...`` stands for an output line that starts with the text before it.

``python scripts/doc_samples.py`` rewrites every sample without elisions that differs from
what its commands print now and lists those with elisions (edit them by hand, or pass
``--full`` to replace them by the whole output); ``--check`` only compares, prints a diff
per differing sample and exits 1 (``tests/test_docs.py`` runs it). Paths: the Markdown
files to read (default: ``docs/*.md``).
"""

from __future__ import annotations

import argparse
import difflib
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- sample -->"
ELLIPSIS = "..."
TIMEOUT_SECONDS = 120


@dataclass
class Sample:
    """One marked block: where it is and the lines inside its fence."""

    path: Path
    first: int
    """Index (0-based) of the block's first line after the opening fence."""
    lines: list[str]


def find_samples(path: Path) -> list[Sample]:
    """Every marked fenced block of one Markdown file."""
    text = path.read_text(encoding="utf-8").splitlines()
    samples = []
    for n, line in enumerate(text):
        if line.strip() != MARKER or n + 1 >= len(text) or not text[n + 1].startswith("```"):
            continue
        end = n + 2
        while end < len(text) and not text[end].startswith("```"):
            end += 1
        samples.append(Sample(path, n + 2, text[n + 2 : end]))
    return samples


def commands_of(lines: list[str]) -> list[tuple[str, list[str]]]:
    """(command, the output lines the doc shows for it) for each ``$ `` line."""
    out: list[tuple[str, list[str]]] = []
    for line in lines:
        if line.startswith("$ "):
            out.append((line[2:], []))
        elif out and not out[-1][1] and line[:1].isspace() and line.strip().startswith("|"):
            out[-1] = (out[-1][0] + "\n" + line, [])  # a command continued (a pipe)
        elif out:
            out[-1][1].append(line)
    return out


def run_sample(lines: list[str]) -> list[tuple[str, list[str]]]:
    """Run a sample's commands; (command, the lines it printed) for each."""
    env = {**os.environ, "TZ": "UTC", "NO_COLOR": "1", "COLUMNS": "100"}
    results = []
    with tempfile.TemporaryDirectory(prefix="acp-doc-sample-") as tmp:
        for entry in ROOT.iterdir():
            if entry.name != ".git":
                os.symlink(entry, Path(tmp) / entry.name)
        for command, _shown in commands_of(lines):
            done = subprocess.run(
                ["bash", "-c", command],
                cwd=tmp,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=TIMEOUT_SECONDS,
            )
            printed = done.stdout.decode("utf-8", "replace").splitlines()
            results.append((command, [line.rstrip() for line in printed]))
    return results


def matches(shown: list[str], printed: list[str]) -> bool:
    """Whether the doc's lines (with their elisions) describe the printed lines."""
    memo: dict[tuple[int, int], bool] = {}

    def at(i: int, j: int) -> bool:
        if (i, j) not in memo:
            memo[(i, j)] = step(i, j)
        return memo[(i, j)]

    def step(i: int, j: int) -> bool:
        if i == len(shown):
            return j == len(printed)
        line = shown[i].rstrip()
        if line == ELLIPSIS:
            return any(at(i + 1, k) for k in range(j, len(printed) + 1))
        if j == len(printed):
            return False
        if line.endswith(ELLIPSIS):  # the printed line starts so (or is just that)
            same = printed[j] == line or printed[j].startswith(line[: -len(ELLIPSIS)].rstrip())
        else:
            same = printed[j] == line
        return same and at(i + 1, j + 1)

    return at(0, 0)


def has_elisions(shown: list[str]) -> bool:
    return any(line.rstrip().endswith(ELLIPSIS) for line in shown)


def render(results: list[tuple[str, list[str]]]) -> list[str]:
    """A sample's lines: each command and everything it printed."""
    lines = []
    for command, printed in results:
        lines.append("$ " + command)
        lines.extend(printed)
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("paths", nargs="*", type=Path, help="Markdown files (docs/*.md)")
    parser.add_argument("--check", action="store_true", help="compare only; exit 1 on a diff")
    parser.add_argument("--full", action="store_true", help="rewrite samples with elisions too")
    args = parser.parse_args(argv)
    paths = args.paths or sorted((ROOT / "docs").glob("*.md"))
    stale = 0
    for path in paths:
        text = path.read_text(encoding="utf-8").splitlines()
        changed = False
        for sample in reversed(find_samples(path)):  # from the end: earlier indexes hold
            results = run_sample(sample.lines)
            shown = commands_of(sample.lines)
            if all(matches(s, p) for (_c, s), (_c2, p) in zip(shown, results, strict=True)):
                continue
            where = f"{path}:{sample.first + 1}"
            fresh = render(results)
            if args.check or (has_elisions(sample.lines) and not args.full):
                stale += 1
                diff = difflib.unified_diff(sample.lines, fresh, "doc", "commands", lineterm="")
                sys.stdout.write(f"{where}: the sample differs from its commands' output\n")
                sys.stdout.writelines(line + "\n" for line in diff)
                continue
            text[sample.first : sample.first + len(sample.lines)] = fresh
            changed = True
            print(f"{where}: sample regenerated")
        if changed:
            path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())
