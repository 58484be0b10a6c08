"""End to end in a real headless Chromium (Debian ``chromium``) driven by Playwright.

The inspector runs as the real ``acp-proxy web`` process on recordings made through the
real proxy; the live test watches a proxy process that is still recording. Screenshots go
to ``test-artifacts/web/``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers import insert_frames
from tests.web.helpers import (
    ARTIFACTS,
    SESSION_ID,
    LiveProxy,
    opening,
    prompt,
    rows,
    touch_heartbeat,
    wait_until,
    web_server,
)

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
]
TIMEOUT_MS = 60_000

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM),
        reason="needs Debian chromium at /usr/bin/chromium (apt-get install chromium; CI does)",
    ),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


class Page:
    """A page plus what it did that it should not have: dialogs and page errors."""

    def __init__(self, browser: Any) -> None:
        self.page = browser.new_page(viewport={"width": 1400, "height": 900})
        self.page.set_default_timeout(TIMEOUT_MS)
        self.dialogs: list[str] = []
        self.errors: list[str] = []
        self.page.on("dialog", self._dialog)
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", self._console)

    def _console(self, message: Any) -> None:
        # Once a test stops the server, the page's live socket retries and is refused: fine.
        if message.type == "error" and "ERR_CONNECTION_REFUSED" not in message.text:
            self.errors.append(message.text)

    def _dialog(self, dialog: Any) -> None:
        self.dialogs.append(dialog.message)
        dialog.dismiss()

    def shot(self, name: str) -> Path:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        self.page.screenshot(path=str(path))
        return path

    def wait_js(self, expression: str, arg: Any = None, what: str | None = None) -> None:
        """Poll a JS expression until truthy (page.wait_for_function would need eval, which
        the inspector's Content-Security-Policy forbids; evaluate() goes through CDP)."""
        deadline = time.monotonic() + TIMEOUT_MS / 1000
        while time.monotonic() < deadline:
            if self.page.evaluate(expression, arg):
                return
            time.sleep(0.05)
        raise AssertionError(f"timed out waiting for {what or expression}")

    def wait_rows(self, count: int) -> None:
        self.wait_js(
            "n => document.querySelectorAll('#frame-rows .frow:not(.group)').length === n",
            count,
            f"{count} rows",
        )

    def column(self, cls: str) -> list[str]:
        return list(
            self.page.eval_on_selector_all(
                f"#frame-rows .frow:not(.group) .{cls}", "els => els.map(e => e.textContent)"
            )
        )

    def close(self) -> None:
        self.page.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Page]:
    p = Page(browser)
    yield p
    p.close()
    assert not p.dialogs, f"a dialog ran: {p.dialogs}"
    assert not p.errors, f"page errors: {p.errors}"


def test_open_filter_and_read_a_raw_frame(page: Page, recording: Path) -> None:
    total = rows(recording, "SELECT count(*) FROM frames")[0][0]
    with web_server(recording) as url:
        p = page.page
        p.goto(url)
        page.wait_rows(total)
        assert p.locator("#connections .conn .name").first.inner_text() == "scripted-agent 1.0"
        page.shot("01-frames")

        # Filter by direction: only agent -> client rows, as many as the recording has.
        a2c = rows(recording, "SELECT count(*) FROM frames WHERE direction = 'a2c'")[0][0]
        p.select_option("#f-direction", "a2c")
        page.wait_rows(a2c)
        assert set(page.column("c-dir")) == {"A→C"}

        # Add a method filter, then a text filter typed from the keyboard ("/").
        p.select_option("#f-direction", "")
        p.select_option("#f-method", "session/prompt")
        prompts = rows(recording, "SELECT count(*) FROM frames WHERE method = 'session/prompt'")[0][
            0
        ]
        page.wait_rows(prompts)
        assert set(page.column("c-method")) == {"session/prompt"}
        p.select_option("#f-method", "")
        p.locator("#frame-list").focus()
        p.keyboard.press("/")
        assert p.evaluate("document.activeElement.id") == "f-text"
        p.keyboard.type("Rate limit")
        notices = rows(recording, "SELECT count(*) FROM frames WHERE instr(raw, 'Rate limit') > 0")[
            0
        ][0]
        page.wait_rows(notices)
        assert all("Rate limit" in t for t in page.column("c-preview"))
        page.shot("02-text-filter")
        p.keyboard.press("Escape")
        p.fill("#f-text", "")
        page.wait_rows(total)

        # Open a raw frame by clicking it: the exact text, terminator noted.
        fid, raw = rows(
            recording,
            "SELECT id, raw FROM frames WHERE method = 'session/new' AND kind = 'response'",
        )[0]
        p.click(f"#fr-{fid}")
        p.wait_for_selector("#raw-text")
        seq = rows(recording, "SELECT seq FROM frames WHERE id = ?", (fid,))[0][0]
        assert p.inner_text("#detail .title") == f"connection 1 · #{seq}"
        assert p.eval_on_selector("#raw-text", "el => el.textContent") == raw.decode()
        assert "ends with LF" in p.inner_text("#detail")
        # The response names its request and the latency; p jumps to it.
        assert "answers request" in p.inner_text("#detail")
        p.keyboard.press("p")
        (req_id, req_raw) = rows(
            recording,
            "SELECT id, raw FROM frames WHERE method = 'session/new' AND kind = 'request'",
        )[0]
        page.wait_js("id => document.querySelector(`#fr-${id}.selected`) !== null", req_id)
        page.wait_js(
            "raw => document.getElementById('raw-text') && "
            "document.getElementById('raw-text').textContent === raw",
            req_raw.decode(),
        )
        # Keyboard: j selects the next frame.
        p.keyboard.press("j")
        page.wait_js("id => document.querySelector(`#fr-${id}.selected`) !== null", req_id + 1)
        page.shot("03-raw-frame")


def test_script_in_a_frame_renders_as_text(page: Page, recording: Path) -> None:
    fid, raw = rows(
        recording,
        "SELECT id, raw FROM frames WHERE instr(raw, '<script>') > 0 "
        "AND direction = 'a2c' ORDER BY id",
    )[0]
    with web_server(recording) as url:
        p = page.page
        p.goto(url + f"#f={fid}")
        p.wait_for_selector("#raw-text")
        assert p.eval_on_selector("#raw-text", "el => el.textContent") == raw.decode()
        assert "<script>window.__xss=1" in p.inner_text("#raw-text")
        assert "<script>" in p.locator(f"#fr-{fid} .c-preview").inner_text()
        p.keyboard.press("r")  # the parsed view shows the markup as text too
        page.wait_js("() => document.getElementById('raw-text').textContent.includes('\\n  ')")
        page.shot("04-xss-raw")
        # The session view shows the agent message with the markup as its text.
        p.click(".sess button")
        p.wait_for_selector(".item.agent")
        texts = p.locator(".item.agent .text").all_inner_texts()
        assert any("<script>window.__xss=1;alert('xss')</script><img src=x" in t for t in texts)
        p.locator(".item.agent", has_text="<script>").scroll_into_view_if_needed()
        page.shot("05-xss-session")
        assert p.evaluate("window.__xss") is None
        assert p.evaluate("document.querySelectorAll('img').length") == 0
        assert p.evaluate("document.scripts.length") == 1  # only /static/app.js
        assert page.dialogs == []


def test_invalid_utf8_frame_shows_hex_and_base64(page: Page, recording: Path) -> None:
    fid, raw = next(
        (i, r) for i, r in rows(recording, "SELECT id, raw FROM frames ORDER BY id") if b"\xff" in r
    )
    with web_server(recording) as url:
        p = page.page
        p.goto(url + f"#f={fid}")
        p.wait_for_selector("#raw-hex")
        assert p.inner_text("#raw-hex").replace(" ", "") == raw.hex()
        assert "not valid UTF-8" in p.inner_text("#detail")


def test_the_page_state_changes_only_through_its_setters(page: Page, recording: Path) -> None:
    """state.js hands every view the same object, read-only: a stray assignment from a view
    throws instead of changing what the page shows behind the route's back."""
    with web_server(recording) as url:
        p = page.page
        p.goto(url + "#view=findings&c=1")
        p.wait_for_selector("#findings-body h3")
        outcome = p.evaluate(
            """async () => {
              "use strict"; // as in the page's modules
              const m = await import("/static/state.js");
              const tried = [];
              for (const write of [() => { m.state.view = "diff"; },
                                   () => { m.state.filter.q = "x"; },
                                   () => { delete m.state.frame; }]) {
                try { write(); tried.push("changed"); } catch (e) { tried.push(e.name); }
              }
              m.setFilter({ q: "through the setter" });
              return { tried, view: m.state.view, q: m.state.filter.q };
            }"""
        )
        assert outcome == {
            "tried": ["TypeError", "TypeError", "TypeError"],
            "view": "findings",
            "q": "through the setter",
        }


def test_session_view_and_findings(page: Page, recording: Path) -> None:
    with web_server(recording) as url:
        p = page.page
        p.goto(url + f"#view=session&c=1&s={SESSION_ID}")
        p.wait_for_selector(".item.user")
        assert p.locator(".item.user .text").all_inner_texts() == [
            "Please review main.py",
            "xss please",
            "bad-utf8 now",
        ]
        assert p.locator(".item.notice .badge", has_text="live-only").count() == 3
        assert p.locator(".item.unknown").count() == 3
        assert p.locator(".item.tool .status-completed").count() == 3
        thought = p.locator(".item.thought details").first
        assert thought.get_attribute("open") is None  # thoughts are folded
        page.shot("06-session")
        p.keyboard.press("3")
        p.wait_for_selector("#findings-body h3")
        # The recording has a framing.utf8 error; its link opens that frame's bytes.
        row = p.locator("table.findings tr", has_text="framing.utf8")
        assert row.count() >= 1
        row.first.locator("td button.link").first.click()
        p.wait_for_selector("#raw-hex")
        assert "not valid UTF-8" in p.inner_text("#detail")
        page.shot("07-finding-frame")


def test_frames_arrive_live_without_reload(page: Page, tmp_path: Path) -> None:
    db = tmp_path / "live.db"
    proxy = LiveProxy(db)
    try:
        proxy.send(opening())
        proxy.wait_output(lambda out: b'"id":2' in out)
        wait_until(
            lambda: db.exists() and rows(db, "SELECT count(*) FROM frames")[0][0] >= 4,
            what="the opening frames recorded",
        )
        touch_heartbeat(db)  # running, also where the recorder writes no heartbeat
        with web_server(db) as url:
            p = page.page
            p.goto(url)
            p.wait_for_selector("#frame-rows .frow")
            assert p.locator(".conn .badge.live").count() == 1
            p.evaluate("window.__noReload = 42")
            if not p.is_checked("#f-follow"):
                p.locator("#frame-list").focus()
                p.keyboard.press("f")
            assert p.is_checked("#f-follow")
            before = p.locator("#frame-rows .frow").count()
            proxy.send(prompt(3, "a live prompt"))
            proxy.wait_output(lambda out: b'"stopReason":"end_turn"' in out)
            wait_until(
                lambda: (
                    rows(db, "SELECT count(*) FROM frames WHERE instr(raw, 'end_turn') > 0")[0][0]
                    == 1
                ),
                what="the turn recorded",
            )
            total = rows(db, "SELECT count(*) FROM frames")[0][0]
            assert total > before
            page.wait_rows(total)
            assert p.evaluate("window.__noReload") == 42
            ids = [
                int(x)
                for x in p.eval_on_selector_all(
                    "#frame-rows .frow:not(.group)", "els => els.map(e => e.dataset.id)"
                )
            ]
            assert ids == sorted(ids) and len(ids) == len(set(ids))
            page.shot("08-live-frames")
            # The session view follows too.
            p.click(".sess button")
            p.wait_for_selector(".item.user")
            proxy.send(prompt(4, "second live prompt"))
            page.wait_js(
                "() => Array.from(document.querySelectorAll('.item.user .text'))"
                ".some(e => e.textContent === 'second live prompt')"
            )
            assert p.evaluate("window.__noReload") == 42
            page.shot("09-live-session")
    finally:
        assert proxy.close() == 0


def test_100k_frame_recording_pages_in_the_browser(page: Page, big_db: Path) -> None:
    """Opens and scrolls; the times measured go to test-artifacts/web/100k-timings.json
    (figures for docs/web.md, not thresholds)."""
    timings: dict[str, float] = {}
    with web_server(big_db) as url:
        p = page.page
        started = time.monotonic()
        p.goto(url)
        page.wait_rows(200)  # one page, not the recording
        timings["open_to_first_200_rows_s"] = time.monotonic() - started
        first = p.eval_on_selector_all("#frame-rows .frow", "els => els.map(e => +e.dataset.id)")
        assert first == list(range(1, 201))
        p.locator("#frame-list").focus()
        started = time.monotonic()
        p.keyboard.press("G")  # the last frame, fetched with before_id (keyset), not by offset
        page.wait_js("() => document.querySelector('#fr-100000.selected') !== null", None, "G")
        page.wait_js("() => document.getElementById('raw-text') !== null")
        timings["G_to_last_frame_and_detail_s"] = time.monotonic() - started
        # Scrolling up loads the previous page above, keeping the view where it was.
        started = time.monotonic()
        p.eval_on_selector("#frame-list", "el => { el.scrollTop = 0; }")
        page.wait_js(
            "() => document.querySelectorAll('#frame-rows .frow').length >= 400", None, "page above"
        )
        timings["scroll_up_one_page_s"] = time.monotonic() - started
        # Scrolling on through ten more pages (rows kept in the DOM are capped).
        started = time.monotonic()
        for n in range(10):
            p.eval_on_selector("#frame-list", "el => { el.scrollTop = 0; }")
            page.wait_js(
                "n => document.querySelectorAll('#frame-rows .frow').length >= n",
                min(600 + 200 * n, 3000),
                "pages above",
            )
        timings["scroll_up_ten_pages_s"] = time.monotonic() - started
        ids = p.eval_on_selector_all("#frame-rows .frow", "els => els.map(e => +e.dataset.id)")
        assert ids == list(range(ids[0], ids[0] + len(ids)))
        assert len(ids) == 2400
        page.shot("10-100k-frames")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    (ARTIFACTS / "100k-timings.json").write_text(json.dumps(timings, indent=2))


def test_gone_recorders_and_unreadable_recordings_are_shown(page: Page, tmp_path: Path) -> None:
    """No green *live* badge for a connection whose recorder is gone; a recording that
    becomes unreadable while served shows the error where the connections were."""
    db = tmp_path / "gone.db"
    now = time.time()
    for columns in (
        {"ended_at": None, "last_seen_at": now - 600},  # the recorder died long ago
        {"ended_at": None, "last_seen_at": now + 600},  # fresh for the whole test
    ):
        insert_frames(
            db, [("c2a", opening())], connection={"started_at": now - 900, **columns}, index=True
        )
    with web_server(db) as url:
        p = page.page
        p.goto(url)
        p.wait_for_selector("#frame-rows .frow")
        conns = p.locator("#connections li.conn")
        assert conns.count() == 2
        assert conns.nth(0).locator(".badge.live").count() == 0
        assert "unknown end" in conns.nth(0).inner_text()
        assert conns.nth(1).locator(".badge.live").count() == 1
        db.write_bytes(b"\x00garbage" * 4096)  # replaced while served
        p.wait_for_selector("#connections .load-error")
        text = p.inner_text("#connections")
        assert "not a usable acp-proxy recording" in text
        assert p.locator("#connections li.conn").count() == 0
        page.shot("09-unreadable-recording")
    # the browser logs the 503s it was answered: expected here
    page.errors = [e for e in page.errors if "503" not in e]
