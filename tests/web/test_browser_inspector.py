"""The inspector as a person debugging an agent reads it, in a real headless Chromium at
1280 px: the preview column takes most of the frame list and says something, the sidebar
names each connection's ``--label`` and how it ended, the session view marks replayed
history and puts findings where they happened, and one turn compares with the same turn
of another connection. The recordings are made by the real proxy in front of
``tests/peers/web_turns_agent.py``; screenshots go to ``test-artifacts/web/``.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import proxy_exe
from tests.helpers import insert_frames
from tests.web.helpers import opening, rows, web_server
from tests.web.test_browser import ARGS, CHROMIUM, Page
from tests.web.turns_recording import PROMPT, SID, make_turns_db

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]


@pytest.fixture(scope="module")
def turns_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two runs of one conversation (tests/web/turns_recording.py): labels, a replay, a
    finding in place, the same turn answered differently, an agent killed."""
    db = tmp_path_factory.mktemp("web-turns") / "turns.db"
    make_turns_db(db)
    return db


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    p.page.set_viewport_size({"width": 1280, "height": 800})
    yield p
    p.close()
    assert not p.dialogs, f"a dialog ran: {p.dialogs}"
    assert not p.errors, f"page errors: {p.errors}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _widths(page: Page) -> dict[str, float]:
    return dict(
        page.page.evaluate(
            """() => {
              const width = (e) => e.getBoundingClientRect().width;
              const list = width(document.querySelector('#frame-rows'));
              const sel = '#frame-rows .frow:not([hidden]) .c-preview';
              const cells = [...document.querySelectorAll(sel)];
              return { list, preview: Math.min(...cells.map(width)) };
            }"""
        )
    )


def _shown_whole(badge: Any) -> bool:
    """Whether the badge is inside its row's name cell (not cut off by it)."""
    return bool(
        badge.evaluate(
            """b => { const r = b.getBoundingClientRect();
                const box = b.closest('.wf-name, .item').getBoundingClientRect();
                return r.width > 20 && r.left >= box.left && r.right <= box.right + 0.5; }"""
        )
    )


def frame_id(db: Path, where: str) -> int:
    return int(rows(db, f"SELECT id FROM frames WHERE {where} ORDER BY id")[0][0])


def test_the_preview_takes_the_free_width_and_says_something(page: Page, turns_db: Path) -> None:
    total = rows(turns_db, "SELECT count(*) FROM frames")[0][0]
    one = rows(turns_db, "SELECT count(*) FROM frames WHERE connection_id = 1")[0][0]
    with web_server(turns_db) as url:
        p = page.page
        p.goto(url)
        page.wait_rows(total)
        every = _widths(page)
        page.shot("40-preview-width-all-1280")
        p.goto(url + "#c=1")
        page.wait_rows(one)
        single = _widths(page)
        page.shot("41-preview-width-one-1280")
        # Most of the frame list is the preview, with every connection and with one.
        assert every["preview"] > 0.5 * every["list"], every
        assert single["preview"] > 0.5 * single["list"], single
        # No method prefix repeated; the previews say what the frame carries.
        cell = lambda where: p.inner_text(f"#fr-{frame_id(turns_db, where)} .c-preview")  # noqa: E731
        first = "connection_id = 1 AND "
        assert cell(first + "method = 'initialize' AND kind = 'response'") == (
            "result agent turns-agent 2.0 \u00b7 protocol 2"
        )
        assert cell(first + "method = 'initialize' AND kind = 'request'") == (
            "client turns-client 0.3 \u00b7 protocol 2"
        )
        assert cell(first + "method = 'session/request_permission' AND kind = 'request'") == (
            '"Run the tests" \u00b7 Allow once / Reject'
        )
        assert cell(first + "update_kind = 'available_commands_update'") == (
            "3 commands: /help, /plan, /review"
        )
        assert cell(first + "update_kind = 'session_info_update'") == (
            'title: "Turn 1: Fix the failing test"'
        )
        assert cell(first + "method = 'session/prompt' AND kind = 'request'") == f'"{PROMPT}"'
        info = frame_id(turns_db, first + "update_kind = 'session_info_update'")
        assert p.inner_text(f"#fr-{info} .c-method") == "session_info_update"


def test_label_end_replay_findings_in_place_and_turn_compare(page: Page, turns_db: Path) -> None:
    with web_server(turns_db) as url:
        p = page.page
        p.goto(url)
        p.wait_for_selector("#connections .conn .conn-end")
        # The sidebar: each connection's --label and how it ended, as `ls` says it.
        assert p.eval_on_selector_all(
            "#connections .conn .conn-label", "els => els.map(e => e.textContent)"
        ) == ["run A", "run B"]
        assert p.eval_on_selector_all(
            "#connections .conn .conn-end", "els => els.map(e => e.textContent)"
        ) == ["exit 0", "signal 9"]
        assert "bad" in (p.get_attribute("#connections .conn >> nth=1 >> .conn-end", "class") or "")
        page.shot("42-sidebar-label-and-end")

        # Session of connection 2: the resumed history in one band, facts on one line,
        # findings as badges on the items that broke the rule.
        p.goto(url + f"#view=session&c=2&s={SID}")
        p.wait_for_selector(".replay-band")
        band = p.locator(".replay-band")
        assert band.count() == 1
        assert band.locator(".item").count() == 3  # user, agent, the notice
        assert "Replayed history \u00b7 3 items" in band.locator(".replay-head").inner_text()
        assert "session/resume id 2" in band.locator(".replay-head").inner_text()
        live = p.locator(".items > .item.user", has_text=PROMPT)
        assert live.count() == 1  # the new turn is outside the band
        fact = p.locator(".item.fact[data-kind=session_info_update]")
        assert fact.inner_text().startswith("title: \u201cTurn 1: Fix the failing test\u201d")
        assert fact.locator("details").count() == 0
        notice = band.locator(".item.notice")
        badge = notice.locator("button.badge.finding", has_text="replay.no-notice")
        assert badge.count() == 1 and _shown_whole(badge)
        page.shot("43-session-replayed-band-and-findings")
        badge.click()
        p.wait_for_selector("#findings-body tr.pointed")
        assert "replay.no-notice" in p.inner_text("#findings-body tr.pointed")

        # Timeline of connection 2: findings on the bars that broke a rule (the resume that
        # replayed a notice, the prompt never answered); compare turn 1 with run A's turn 1.
        p.goto(url + "#view=timeline&c=2")
        p.wait_for_selector("#waterfall .wf-row.turn")
        # start-up is folded (it takes longer than the turns): its row carries the badge
        startup = p.locator("#wf-startup button.badge.finding")
        assert startup.inner_text() == "\u2691 replay.no-notice"
        assert _shown_whole(startup)
        page.shot("44-timeline-findings-in-place")
        p.click("#wf-startup .wf-unfold")
        # unfolded, turn 1 starts in the track's right half: its prompt ends there, uncut
        said = p.locator("#waterfall .wf-row.turn >> nth=0 >> .wf-prompt")
        assert said.inner_text() == f"\u201c{PROMPT}\u201d"
        assert said.evaluate(
            "e => e.scrollWidth <= e.clientWidth && e.getBoundingClientRect().left >= "
            "e.closest('.wf-track').getBoundingClientRect().left"
        )
        resume = p.locator("#waterfall .wf-row:not(.turn)", has_text="session/resume")
        assert resume.locator("button.badge.finding").inner_text() == "\u2691 replay.no-notice"
        assert _shown_whole(resume.locator("button.badge.finding"))
        unanswered = p.locator("#waterfall .wf-row.turn").nth(1)
        assert "jsonrpc.request-answered" in unanswered.evaluate(
            "row => [row, ...(function* (r) { for (let n = r.nextElementSibling; n && "
            "!n.classList.contains('turn'); n = n.nextElementSibling) yield n; })(row)]"
            ".map((e) => e.textContent).join(' ')"
        )
        assert PROMPT in p.inner_text("#waterfall .wf-row.turn .wf-prompt")
        p.click("#waterfall .wf-row.turn >> nth=0 >> .wf-compare-open")
        p.wait_for_selector("#turn-compare-pick")
        picked = p.eval_on_selector(
            "#turn-compare-pick", "s => s.options[s.selectedIndex].textContent"
        )
        assert picked.startswith("#1 run A \u00b7 turn 1") and PROMPT in picked
        page.shot("45-timeline-compare-turn")
        p.click("#turn-compare-go")
        p.wait_for_selector("#diff-summary")
        page.wait_js("() => location.hash.includes('as=') && location.hash.includes('bs=')")
        assert "one turn each" in p.inner_text("#diff-turns")
        assert p.inner_text("#diff-turns").startswith(
            f"turn 1 \u201c{PROMPT}\u201d of A against turn 1 \u201c{PROMPT}\u201d of B"
        )
        assert "1 changed" in p.inner_text("#diff-summary")
        changed = p.locator("#diff-table tr.diff-members")
        assert changed.count() == 1
        assert '"broken."' in changed.inner_text() and '"fine."' in changed.inner_text()
        # Only the turns' frames: none of the openings (initialize, new, resume) is aligned.
        assert "initialize" not in p.inner_text("#diff-table")
        page.shot("46-diff-two-turns")
        p.click("#diff-turns button")
        page.wait_js("() => !location.hash.includes('as=')")
        p.wait_for_selector("#diff-table")
        page.wait_js(
            "() => document.querySelector('#diff-table').textContent.includes('initialize')"
        )


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url) as res:
            return res.status, json.loads(res.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


def test_two_turns_over_http(turns_db: Path) -> None:
    """``/api/diff`` with ``as``/``bs`` aligns only the two turns' frames, as the page asks."""
    turns = rows(turns_db, "SELECT connection_id, seq FROM frames WHERE method = 'session/prompt'")
    firsts = {c: min(s for cc, s in turns if cc == c) for c, _ in turns}
    with web_server(turns_db) as url:
        base = url.rstrip("/")
        status, whole = _get(f"{base}/api/diff?a=1&b=2")
        assert status == 200 and whole["a"]["seqs"] is None
        status, two = _get(f"{base}/api/diff?a=1&b=2&as={firsts[1]}-15&bs={firsts[2]}-17")
        assert status == 200, two
        assert two["a"]["seqs"] == [firsts[1], 15] and two["b"]["seqs"] == [firsts[2], 17]
        assert two["a"]["frames"] == 15 - firsts[1] + 1
        seqs = [r["a"]["seq"] for r in two["rows"] if r["a"]] + [
            r["b"]["seq"] for r in two["rows"] if r["b"]
        ]
        assert min(seqs) >= min(firsts.values()) and len(two["rows"]) < len(whole["rows"])
        assert [m["new"] for r in two["rows"] for m in r.get("members", [])] == ["broken."]
        for bad in ("12", "9-3", "a-b"):
            status, err = _get(f"{base}/api/diff?a=1&b=2&as={bad}&bs=1-2")
            assert status == 400 and "FIRST-LAST" in err["error"], (bad, err)


def test_unknown_ends_read_as_ls_prints_them(page: Page, tmp_path: Path) -> None:
    """A recorder gone without closing the row, or a proxy killed (the recorder closed the
    row: ``proxy-lost``), read ``ended (unknown end)`` as in ``acp-proxy ls``; the recorded
    reason is in the title."""
    db = tmp_path / "ends.db"
    now = time.time()
    for columns in (
        {"ended_at": None, "last_seen_at": now - 600},
        {"ended_at": now - 100, "end_reason": "proxy-lost", "label": "killed"},
        {"ended_at": None, "last_seen_at": now + 600},
    ):
        insert_frames(
            db, [("c2a", opening())], connection={"started_at": now - 900, **columns}, index=True
        )
    listed = subprocess.run(
        [*proxy_exe(), "ls", str(db)], capture_output=True, text=True, check=True
    ).stdout
    assert listed.count("ended (unknown end)") == 2, listed
    with web_server(db) as url:
        p = page.page
        p.goto(url)
        p.wait_for_selector("#connections .conn .conn-end")
        ends = p.locator("#connections .conn .conn-end")
        assert ends.all_inner_texts() == ["ended (unknown end)", "ended (unknown end)", "running"]
        assert "the proxy died" in (ends.nth(1).get_attribute("title") or "")
        assert p.locator("#connections .conn .conn-label").all_inner_texts() == ["killed"]
        page.shot("47-sidebar-unknown-ends")
