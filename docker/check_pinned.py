"""Fail the image build when a wheel in WHEEL_DIR is not pinned, at its version, in CONSTRAINTS.

``python3 check_pinned.py CONSTRAINTS WHEEL_DIR [EXCEPT...]``: PIP_CONSTRAINT pins only what it
lists, so a new dependency would otherwise be resolved to whatever is newest on the day of the
build. EXCEPT names wheels that are built here rather than downloaded (acp-proxy itself).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path


def canonical(name: str) -> str:
    """The normalized project name (PEP 503): lower case, runs of -_. as one dash."""
    return re.sub(r"[-_.]+", "-", name).lower()


def main(argv: list[str]) -> int:
    constraints_path, wheel_dir, *built_here = argv
    pinned: dict[str, str] = {}
    for line in Path(constraints_path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            pinned[canonical(name)] = version.strip()
    skip = {canonical(n) for n in built_here}
    unpinned = []
    for wheel in sorted(Path(wheel_dir).glob("*.whl")):
        name, version = wheel.name.split("-")[:2]
        if canonical(name) not in skip and pinned.get(canonical(name)) != version:
            unpinned.append(f"{name}=={version}")
    if unpinned:
        print(f"not pinned in {constraints_path}: {' '.join(unpinned)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
