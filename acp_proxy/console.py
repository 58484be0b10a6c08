"""acp-proxy's terminal: its own lines on stderr, and stdout made to fit a terminal.

Every layer reports incidents (a recorder drop, a replay note, a server fault) as one line
``acp-proxy: MESSAGE`` on stderr through :func:`warn`; nothing else writes stderr directly,
so the format is the same everywhere and a closed stderr never raises.

:class:`Terminal` is what every command that prints for a person uses: the width to fit
(``None`` when stdout is not a terminal or ``--wide`` was given: then everything is printed),
lines and cells cut with an ellipsis (:func:`fit`, :func:`ellipsize`, :func:`table`), colour
(:meth:`Terminal.style`, on a terminal only, ``NO_COLOR`` and ``--color`` honoured) and a
pager for long output on a terminal as git does (``PAGER``, else ``less`` with ``LESS=FRX``).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shutil
import sys
import unicodedata
from collections.abc import Collection, Iterator, Sequence
from typing import IO, Literal

ELLIPSIS = "…"

ColourChoice = Literal["auto", "always", "never"]

DIRECTION_ARROWS = {"c2a": "->", "a2c": "<-"}
"""How a direction reads in text output: ``->`` client to agent, ``<-`` agent to client
(JSON outputs and the store keep ``c2a``/``a2c``)."""

DIRECTION_LEGEND = "-> client to agent, <- agent to client"


def warn(message: str) -> None:
    """Write ``acp-proxy: MESSAGE`` as one line on stderr (silently if stderr is gone)."""
    try:
        sys.stderr.write(f"acp-proxy: {message}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def quiet_closed_stdout() -> None:
    """Point stdout at /dev/null, so that the interpreter's last flush of what is buffered
    for the closed pipe meets nothing (and prints nothing)."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)


def arrow(direction: object) -> str:
    """``->`` for a frame from the client to the agent, ``<-`` for the other way."""
    return DIRECTION_ARROWS.get(str(direction), "<-")


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def char_cells(char: str) -> int:
    """Columns one character takes on a terminal: 0 (combining), 1, or 2 (wide)."""
    if unicodedata.combining(char):
        return 0
    return 2 if unicodedata.east_asian_width(char) in ("W", "F") else 1


def cells(text: str) -> int:
    """Columns ``text`` takes on a terminal (colour codes take none)."""
    plain = _ANSI.sub("", text)
    if plain.isascii():
        return len(plain)
    return sum(char_cells(c) for c in plain)


def fit(line: str, width: int | None) -> str:
    """``line`` cut to ``width`` columns with an ellipsis (colour codes kept, and reset after
    the cut); unchanged when ``width`` is None or the line fits."""
    if width is None or cells(line) <= width:
        return line
    out: list[str] = []
    used = 0
    pos = 0
    coloured = False
    while pos < len(line):
        code = _ANSI.match(line, pos)
        if code is not None:
            out.append(code.group())
            coloured = True
            pos = code.end()
            continue
        n = char_cells(line[pos])
        if used + n > width - 1:
            break
        out.append(line[pos])
        used += n
        pos += 1
    out.append(ELLIPSIS)
    if coloured:
        out.append("\x1b[0m")
    return "".join(out)


def wrap(text: str, width: int | None, indent: str = "") -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken at spaces, the lines after the
    first starting with ``indent`` (for text a person reads, where a cut would lose words);
    one line when ``width`` is None or it fits."""
    if width is None or cells(text) <= width or width - cells(indent) < 20:
        return [text]
    import textwrap  # (here: the stdio proxy imports this module before it forwards)

    lines = textwrap.wrap(
        text, width, subsequent_indent=indent, replace_whitespace=False, break_on_hyphens=False
    )
    return [fit(line, width) for line in lines] or [text]


def ellipsize(text: str, width: int) -> str:
    """``text`` in at most ``width`` columns, ``…`` marking a cut."""
    return fit(text, max(width, 1))


def table(
    header: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int | None,
    shrink: Sequence[int],
    min_width: int = 6,
    spare: Sequence[int] = (),
    right: Collection[int] = (),
) -> list[str]:
    """A table as lines, columns two spaces apart, in ``width`` columns when it is not None.

    Only the columns in ``shrink`` (indexes: names, labels, free text) are cut, the widest
    first and none below ``min_width`` (or its header); ids, times and counts stay whole.
    When that is not enough the columns are one space apart, then the ``spare`` columns
    (ones that say nothing here, e.g. the same value in every row) are left out in their
    order, and last the lines are cut. The ``right`` columns are aligned right (numbers).
    """
    widths = [max(cells(h), *(cells(r[i]) for r in rows)) for i, h in enumerate(header)]
    gap = 2
    if width is not None:
        floors = {i: min(widths[i], max(min_width, cells(header[i]))) for i in shrink}

        def least(gap: int) -> int:
            kept = [floors.get(i, w) for i, w in enumerate(widths) if w >= 0]
            return sum(kept) + gap * (len(kept) - 1)

        if least(2) > width:
            gap = 1
        for i in spare:
            if least(gap) <= width:
                break
            widths[i] = -1  # left out
        kept = [w for w in widths if w >= 0]
        over = sum(kept) + gap * (len(kept) - 1) - width
        while over > 0:
            cuttable = [i for i in shrink if widths[i] > floors[i]]
            if not cuttable:
                break
            widths[max(cuttable, key=lambda i: widths[i])] -= 1
            over -= 1

    def line(cols: Sequence[str]) -> str:
        padded = []
        for i, (text, w) in enumerate(zip(cols, widths, strict=True)):
            if w < 0:
                continue
            cut = ellipsize(text, w)
            pad = " " * max(0, w - cells(cut))
            padded.append(pad + cut if i in right else cut + pad)
        return fit((" " * gap).join(padded).rstrip(), width)

    return [line(header), *(line(r) for r in rows)]


_STYLE_CODES = {"bold": "1", "dim": "2", "italic": "3", "underline": "4"}
_COLOURS = {
    "black": 30,
    "red": 31,
    "green": 32,
    "yellow": 33,
    "blue": 34,
    "magenta": 35,
    "cyan": 36,
    "white": 37,
    "bright_black": 90,
}


class Terminal:
    """Where a command's text output goes: the width to fit and whether to colour it."""

    def __init__(self, width: int | None = None, colour: bool = False) -> None:
        self.width = width
        self.colour = colour

    @classmethod
    def for_stdout(cls, colour: ColourChoice = "auto", wide: bool = False) -> Terminal:
        """The terminal stdout is (width None when piped or ``wide``; colour as chosen)."""
        tty = _isatty(sys.stdout)
        width = None if wide or not tty else terminal_width()
        if colour == "auto":
            return cls(width, tty and not os.environ.get("NO_COLOR"))
        return cls(width, colour == "always")

    def style(
        self,
        text: str,
        fg: str | None = None,
        *,
        bold: bool = False,
        dim: bool = False,
        italic: bool = False,
    ) -> str:
        """``text`` in colour and weight when colour is on, else as it is."""
        if not self.colour or not text:
            return text
        flags = (("bold", bold), ("dim", dim), ("italic", italic))
        codes = [_STYLE_CODES[name] for name, on in flags if on]
        if fg is not None:
            codes.append(str(_COLOURS[fg]))
        if not codes:
            return text
        return f"\x1b[{';'.join(codes)}m{text}\x1b[0m"

    def fit(self, line: str) -> str:
        """``line`` cut to this terminal's width (whole when printing everything)."""
        return fit(line, self.width)

    def table(
        self, header: Sequence[str], rows: Sequence[Sequence[str]], shrink: Sequence[int]
    ) -> list[str]:
        """:func:`table` at this terminal's width."""
        return table(header, rows, self.width, shrink)


def terminal_width() -> int:
    """Columns of the terminal: ``COLUMNS`` when set, else the terminal's own size."""
    return max(20, shutil.get_terminal_size((100, 24)).columns)


def _isatty(stream: IO[str]) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class _PagerStdout(io.TextIOWrapper):
    """stdout while a pager shows it: a pipe that still counts as the terminal it ends on
    (so that click keeps the colour)."""

    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def pager(enabled: bool = True) -> Iterator[None]:
    """Send stdout through a pager while the block runs, when stdout is a terminal.

    ``PAGER`` names it (run by the shell; empty or ``cat`` means none), else ``less``, with
    ``LESS=FRX`` unless ``LESS`` is set: one screen is printed as it is, colour kept, the
    screen left as it was. Quitting the pager early ends the output quietly.
    """
    command = os.environ.get("PAGER", "less")
    if not enabled or not _isatty(sys.stdout) or command.strip() in ("", "cat"):
        yield
        return
    env = dict(os.environ)
    env.setdefault("LESS", "FRX")
    env.setdefault("LV", "-c")
    import subprocess  # (only to page: check's report to a pipe or file needs none)

    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, env=env)
    except OSError:
        yield
        return
    assert proc.stdin is not None
    encoding = sys.stdout.encoding or "utf-8"
    piped = _PagerStdout(proc.stdin, encoding=encoding, errors="replace", line_buffering=False)
    saved = sys.stdout
    sys.stdout = piped
    try:
        yield
        with contextlib.suppress(BrokenPipeError):
            piped.flush()
    except BrokenPipeError:
        pass  # the pager was quit before the end
    finally:
        sys.stdout = saved
        with contextlib.suppress(BrokenPipeError, OSError, ValueError):
            piped.close()
        while True:
            try:
                proc.wait()
                break
            except KeyboardInterrupt:  # as git: ^C goes to the pager, which decides
                continue
