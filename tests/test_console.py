"""console: stderr lines, cell widths, cutting and wrapping to a width, tables and colour."""

from __future__ import annotations

import pytest

from acp_proxy.console import (
    ELLIPSIS,
    Terminal,
    arrow,
    cells,
    ellipsize,
    fit,
    table,
    warn,
    wrap,
)


def test_warn_writes_one_prefixed_line_on_stderr(capsys: pytest.CaptureFixture[str]) -> None:
    warn("spool full")
    assert capsys.readouterr() == ("", "acp-proxy: spool full\n")


def test_arrow_reads_a_direction() -> None:
    assert (arrow("c2a"), arrow("a2c")) == ("->", "<-")


def test_cells_count_wide_and_combining_characters_and_skip_colour_codes() -> None:
    assert cells("abc") == 3
    assert cells("日本") == 4
    assert cells("e\u0301") == 1
    assert cells("\x1b[1;31mred\x1b[0m") == 3


def test_fit_cuts_with_an_ellipsis_only_when_the_line_is_too_wide() -> None:
    assert fit("hello", 5) == "hello"
    assert fit("hello", None) == "hello"
    assert fit("hello world", 6) == "hello" + ELLIPSIS
    assert fit("日本語", 4) == "日" + ELLIPSIS
    assert ellipsize("abc", 0) == ELLIPSIS


def test_fit_keeps_colour_codes_and_resets_after_the_cut() -> None:
    cut = fit("\x1b[31mabcdef\x1b[0m", 4)
    assert cut == "\x1b[31mabc" + ELLIPSIS + "\x1b[0m"
    assert cells(cut) == 4


def test_wrap_breaks_at_spaces_with_an_indent_and_keeps_short_text_whole() -> None:
    text = "one two three four five six seven eight nine ten"
    lines = wrap(text, 24, indent="  ")
    assert lines == ["one two three four five", "  six seven eight nine", "  ten"]
    assert all(cells(line) <= 24 for line in lines)
    assert wrap(text, None) == [text]
    assert wrap("short", 24) == ["short"]


def test_table_aligns_columns_and_numbers_right() -> None:
    lines = table(["ID", "NAME"], [["1", "alpha"], ["22", "b"]], None, shrink=[1], right={0})
    assert lines == ["ID  NAME", " 1  alpha", "22  b"]


def test_table_cuts_only_the_shrink_columns_then_drops_spare_ones() -> None:
    rows = [["7", "a-very-long-label-here", "same"]]
    header = ["ID", "LABEL", "HOST"]
    lines = table(header, rows, 20, shrink=[1], min_width=6)
    assert lines == ["ID  LABEL       HOST", "7   a-very-lo" + ELLIPSIS + "  same"]
    narrow = table(header, rows, 10, shrink=[1], min_width=6, spare=[2])
    assert narrow == ["ID LABEL", "7  a-very" + ELLIPSIS]


def test_terminal_styles_only_with_colour_on() -> None:
    assert Terminal(colour=False).style("x", "red", bold=True) == "x"
    styled = Terminal(colour=True).style("x", bold=True, dim=True)
    assert styled == "\x1b[1;2mx\x1b[0m"
    assert Terminal(colour=True).style("x") == "x"
    assert Terminal(width=3).fit("abcdef") == "ab" + ELLIPSIS
