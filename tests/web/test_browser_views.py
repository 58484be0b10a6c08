"""The inspector's views in a real headless Chromium: folded chunks and previews, sorting,
the detail drawer (JSON tree, copy, export, findings), the timeline (waterfall and
performance panel), the session view with plans per turn, a 900 px window and damaged
recordings. Screenshots go to ``test-artifacts/web/``.
"""

from __future__ import annotations

import json
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from tests.acp.stray import PROMPTS, make_stray_db
from tests.helpers import Capture, insert_frames
from tests.web.helpers import RICH_SESSION, make_diff_db, rows, web_server
from tests.web.test_browser import CHROMIUM, TIMEOUT_MS, Page, browser  # noqa: F401

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not Path(CHROMIUM).exists(), reason="needs Debian chromium"),
]


@pytest.fixture
def page(browser: Any) -> Any:  # noqa: F811
    p = Page(browser)
    yield p
    p.close()
    assert not p.dialogs, f"a dialog ran: {p.dialogs}"
    assert not p.errors, f"page errors: {p.errors}"


def frame_id(db: Path, where: str) -> int:
    return int(rows(db, f"SELECT id FROM frames WHERE connection_id = 1 AND {where}")[0][0])


def test_previews_folded_chunks_and_sorting(page: Page, rich_db: Path) -> None:
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url + "#c=1")
        total = rows(rich_db, "SELECT count(*) FROM frames WHERE connection_id = 1")[0][0]
        page.wait_rows(total)
        # Human previews computed by the server, text kept as recorded (no CSS rewriting),
        # without the method the method column shows.
        prompt = frame_id(rich_db, "method = 'session/prompt' AND kind = 'request'")
        assert p.inner_text(f"#fr-{prompt} .c-preview") == '"Can you fix the failing test?"'
        assert p.inner_text(f"#fr-{prompt} .c-method") == "session/prompt"
        error = frame_id(rich_db, "instr(raw, '-32603') > 0")
        assert p.inner_text(f"#fr-{error} .c-preview") == "error -32603 Internal error"
        # The three chunks of message a1 are one row: count, bytes, joined text.
        group = p.locator("#frame-rows .frow.group").first
        assert group.get_attribute("data-count") == "3"
        assert group.locator(".c-method").inner_text() == "agent_message_chunk"
        joined = '\u00d73 "Echo: looking at the test now."'
        assert group.locator(".c-preview").inner_text() == joined
        sizes = rows(
            rich_db,
            "SELECT sum(size) FROM frames WHERE connection_id = 1 AND instr(raw, '\"a1\"') > 0 "
            "AND update_kind = 'agent_message_chunk'",
        )[0][0]
        assert group.locator(".c-size").get_attribute("title") == f"{sizes} bytes in 3 frames"
        hidden = p.eval_on_selector_all(
            "#frame-rows .frow.child", "els => els.filter(e => e.hidden).length"
        )
        assert hidden == 3  # the chunks of a1; the single chunk of a2 is a plain row
        page.shot("11-folded-chunks")
        group.locator("button.fold").click()
        page.wait_js(
            "() => document.querySelectorAll('#frame-rows .frow.child:not([hidden])').length === 3"
        )
        assert "chunk" in p.inner_text("#frame-rows .frow.child >> nth=0")
        page.shot("12-unfolded-chunks")
        # Sorting: by size, ascending then descending, then back to recording order.
        p.click(".list-head [data-sort=size]")
        order = p.eval_on_selector_all(
            "#frame-rows .frow:not(.group)", "els => els.map(e => +e.dataset.id)"
        )
        by_size = [
            r[0]
            for r in rows(
                rich_db, "SELECT id FROM frames WHERE connection_id = 1 ORDER BY size, id"
            )
        ]
        assert order == by_size
        p.click(".list-head [data-sort=size]")
        order = p.eval_on_selector_all(
            "#frame-rows .frow:not(.group)", "els => els.map(e => +e.dataset.id)"
        )
        assert order == list(reversed(by_size))
        assert p.get_attribute(".list-head [data-sort=size]", "aria-sort") == "descending"
        p.click(".list-head [data-sort=size]")
        order = p.eval_on_selector_all(
            "#frame-rows .frow:not(.group)", "els => els.map(e => +e.dataset.id)"
        )
        assert order == sorted(order)


def test_all_frames_are_in_time_order_across_connections(page: Page, rich_db: Path) -> None:
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url)
        total = rows(rich_db, "SELECT count(*) FROM frames")[0][0]
        page.wait_rows(total)
        shown = p.eval_on_selector_all(
            "#frame-rows .frow:not(.group)", "els => els.map(e => +e.dataset.id)"
        )
        assert shown == [r[0] for r in rows(rich_db, "SELECT id FROM frames ORDER BY ts, id")]
        assert shown != sorted(shown)  # the second connection's frames interleave by time


def test_detail_is_cleared_when_the_connection_changes(page: Page, rich_db: Path) -> None:
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url + "#c=1")
        p.wait_for_selector("#frame-rows .frow")
        p.click("#frame-rows .frow >> nth=0")
        p.wait_for_selector("#raw-text")
        # The drawer resizes by dragging its splitter.
        before = p.eval_on_selector("#detail", "el => el.getBoundingClientRect().height")
        box = p.locator("#splitter").bounding_box()
        assert box is not None
        p.mouse.move(box["x"] + 50, box["y"] + 2)
        p.mouse.down()
        p.mouse.move(box["x"] + 50, box["y"] - 150, steps=5)
        p.mouse.up()
        after = p.eval_on_selector("#detail", "el => el.getBoundingClientRect().height")
        assert after > before + 100
        # Another connection: the previous connection's frame is no longer shown.
        p.click("#connections li.conn >> nth=1 >> button >> nth=0")
        page.wait_js("() => location.hash.includes('c=2')")
        p.wait_for_selector("#detail-empty")
        assert p.locator("#raw-text").count() == 0
        assert "connection 1" not in p.inner_text("#detail")
        page.shot("13-detail-cleared")
        # The same through a session of another connection, then back to the frames.
        p.goto(url + "#c=1")
        p.click("#frame-rows .frow >> nth=2")
        p.wait_for_selector("#raw-text")
        p.click("#connections li.conn >> nth=1 >> .sess button")
        p.wait_for_selector(".s-head")
        p.keyboard.press("1")
        p.wait_for_selector("#frame-rows .frow")
        p.wait_for_selector("#detail-empty")
        assert p.locator("#raw-text").count() == 0


def test_json_tree_copy_export_and_findings(page: Page, recording: Path) -> None:
    context = page.page.context
    context.grant_permissions(["clipboard-read", "clipboard-write"])
    with web_server(recording) as url:
        p = page.page
        fid, raw = rows(
            recording,
            "SELECT id, raw FROM frames WHERE method = 'session/new' AND kind = 'response'",
        )[0]
        p.goto(url + f"#c=1&f={fid}")
        p.wait_for_selector("#json-tree")
        tree = p.inner_text("#json-tree")
        assert '"sessionId": "sess_web_1"' in tree.replace('":', '": ').replace('":  ', '": ')
        assert "answers #" in tree  # the id member names its request and the latency
        assert "method session/new" in p.inner_text("#acp-chips")
        p.click("#copy-raw")
        page.wait_js("() => document.getElementById('status').textContent.includes('copied')")
        assert p.evaluate("navigator.clipboard.readText()") == raw.decode()
        p.click("#copy-json")
        page.wait_js("() => document.getElementById('status').textContent.includes('as JSON')")
        assert json.loads(p.evaluate("navigator.clipboard.readText()")) == json.loads(raw)
        page.shot("14-json-tree")
        # Export: the frames the filter shows, as JSON lines with the exact text.
        p.select_option("#f-direction", "a2c")
        href = p.get_attribute("#export", "href")
        assert href is not None and "direction=a2c" in href and "connection=1" in href
        assert "?token" not in url  # served without a token on loopback
        with urllib.request.urlopen(url.rstrip("/") + href) as res:
            lines = res.read().splitlines()
        expected = rows(
            recording,
            "SELECT id, raw FROM frames WHERE connection_id = 1 AND direction = 'a2c' ORDER BY id",
        )
        assert len(lines) == len(expected)
        for line, (eid, eraw) in zip(lines, expected, strict=True):
            record = json.loads(line)
            assert record["id"] == eid
            assert record.get("text", "").encode() == eraw or "base64" in record
        # A frame with a finding links to it; the finding links back.
        bad = next(i for i, r in rows(recording, "SELECT id, raw FROM frames") if b"\xff" in r)
        p.goto(url + f"#c=1&f={bad}")
        p.wait_for_selector("#frame-findings")
        assert "framing.utf8" in p.inner_text("#frame-findings")
        p.click("#frame-findings button")
        p.wait_for_selector("tr.pointed")
        assert "framing.utf8" in p.inner_text("tr.pointed")
        p.click("tr.pointed td button.link")
        page.wait_js("id => document.querySelector(`#fr-${id}.selected`) !== null", bad)
        page.shot("15-finding-round-trip")


def test_waterfall_and_performance_panel(page: Page, rich_db: Path) -> None:
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url + "#view=timeline&c=1")
        p.wait_for_selector("#waterfall .wf-row.turn")
        turns = p.locator("#waterfall .wf-row.turn")
        assert turns.count() == 3
        assert "turn 1 · end_turn · 1st chunk 20ms" in turns.nth(0).inner_text()
        assert "turn 3 · error -32603" in turns.nth(2).inner_text()
        assert "90ms" in turns.nth(0).inner_text()  # prompt at 10ms, idle at 100ms (v2)
        assert "10.00ms" in turns.nth(2).inner_text() or "10ms" in turns.nth(2).inner_text()
        # The permission prompt is drawn inside turn 1, nested.
        nested = p.locator("#waterfall .wf-row.nested")
        assert nested.count() == 1
        assert "session/request_permission" in nested.inner_text()
        assert "30ms" in nested.inner_text()
        names = p.eval_on_selector_all("#waterfall .wf-row", "els => els.map(e => e.innerText)")
        first_turn = next(i for i, n in enumerate(names) if "turn 1" in n)
        second_turn = next(i for i, n in enumerate(names) if "turn 2" in n)
        permission = next(i for i, n in enumerate(names) if "request_permission" in n)
        assert first_turn < permission < second_turn
        # The bar is placed on the time axis: 40ms..70ms of a 410ms connection.
        left = p.eval_on_selector("#waterfall .wf-row.nested .wf-bar", "el => el.style.left")
        assert left.startswith("9.75")  # 40/410
        # Time to first chunk: 20ms after the prompt.
        assert "first chunk after 20ms" in (
            p.get_attribute("#waterfall .wf-row.turn >> nth=0 >> .wf-tick", "title") or ""
        )
        perf = p.inner_text("#perf-methods")
        row = next(line for line in perf.splitlines() if "session/request_permission" in line)
        assert "30ms" in row
        prompt_row = next(line for line in perf.splitlines() if "session/prompt" in line)
        assert "\t3\t1\t" in prompt_row  # three prompts, one error
        assert "p95" in perf and "p99" in perf
        assert "3 turn(s), 3 ended" in p.inner_text("#perf-turns")
        page.shot("16-timeline")
        # The slowest exchange links to its frames.
        p.click("#perf-slowest tbody tr >> nth=0 >> td >> nth=2 >> button")
        req = frame_id(rich_db, "method = 'session/request_permission' AND kind = 'request'")
        page.wait_js("id => document.querySelector(`#fr-${id}.selected`) !== null", req)


def test_session_view_plans_per_turn(page: Page, rich_db: Path) -> None:
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url + "#view=session")  # no session named: the first one is shown
        p.wait_for_selector(".item.user")
        assert RICH_SESSION in p.inner_text(".s-head")
        assert p.locator("#session-pick option").count() >= 1
        plans = p.locator(".item.plan")
        assert plans.count() == 2
        assert "at the end of turn 1" in plans.nth(0).inner_text()
        assert "[in_progress] Read the code" in plans.nth(0).inner_text()
        assert "[pending] Write the fix" in plans.nth(0).inner_text()
        assert "at the end of turn 2" in plans.nth(1).inner_text()
        assert "[completed] Write the fix" in plans.nth(1).inner_text()
        # each plan card sits in its turn: after turn 1's user prompt, before turn 2's
        order = p.eval_on_selector_all(
            ".items > .item, .items > .divider", "els => els.map(e => e.className)"
        )
        assert order.index("item plan") < [i for i, c in enumerate(order) if "plan" in c][1]
        permission = p.inner_text(".item.permission")
        assert "Write tests/test_x.py" in permission
        assert "chose “Allow once” (allow_once)" in permission
        assert "1200/200000 tokens" in p.inner_text(".item.usage")
        assert "cost 0.02 USD" in p.inner_text(".item.usage")
        assert "_vendor_trace" in p.inner_text(".item.unknown")
        assert "Can you fix the failing test?" in p.inner_text(".item.user")
        # frame text as recorded: the refused prompt's error is not rewritten (uppercased)
        # (the agent never echoed it: the prompt card says what the user said)
        refused = p.locator(".item.prompt", has_text="Internal error")
        assert '"message":"Internal error"' in refused.inner_text()
        tool = p.inner_text(".item.tool")
        assert "completed" in tool and "wrote 3 lines" in tool
        page.shot("17-session-plans-per-turn")


def test_readable_at_900_pixels(browser: Any, rich_db: Path) -> None:  # noqa: F811
    p = browser.new_page(viewport={"width": 900, "height": 800})
    p.set_default_timeout(TIMEOUT_MS)
    try:
        with web_server(rich_db) as url:
            p.goto(url + "#c=1")
            p.wait_for_selector("#frame-rows .frow")
            assert p.evaluate("document.documentElement.scrollWidth") <= 900
            assert _clipped(p) == []
            # the method column names the method: the narrow preview starts at the text
            prompt = frame_id(rich_db, "method = 'session/prompt' AND kind = 'request'")
            assert p.inner_text(f"#fr-{prompt} .c-preview") == '"Can you fix the failing test?"'
            p.screenshot(path=str(_artifact("18-narrow-900")))
            p.goto(url + "#")  # all connections: the connection column comes back
            p.wait_for_selector("#frame-rows .frow .c-conn")
            assert p.evaluate("document.documentElement.scrollWidth") <= 900
            assert _clipped(p) == []
            p.screenshot(path=str(_artifact("18-narrow-900-all")))
            p.goto(url + "#c=1")
            p.wait_for_selector("#frame-rows .frow")
            p.click("#frame-rows .frow >> nth=4")
            p.wait_for_selector("#json-tree")
            assert p.evaluate("document.documentElement.scrollWidth") <= 900
            p.screenshot(path=str(_artifact("19-narrow-900-detail")))
            p.goto(url + "#view=timeline&c=1")
            p.wait_for_selector("#waterfall")
            p.screenshot(path=str(_artifact("20-narrow-900-timeline")))
    finally:
        p.close()


def _clipped(p: Any) -> list[str]:
    """Cells of the frame list whose text does not fit (preview and method ellipsize by
    design, so those only have to keep a usable width)."""
    return list(
        p.evaluate(
            """() => {
              const out = [];
              const cells = document.querySelectorAll(
                '.list-head > *, #frame-rows .frow:not([hidden]) > span');
              for (const c of cells) {
                if (c.classList.contains('c-preview') || c.classList.contains('c-method')) {
                  if (c.clientWidth < 80) out.push(c.className + ' too narrow');
                  continue;
                }
                if (c.scrollWidth > c.clientWidth + 1)
                  out.push(c.className + ': ' + c.textContent);
              }
              return out;
            }"""
        )
    )


def _artifact(name: str) -> Path:
    from tests.web.helpers import ARTIFACTS

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"


def test_a_damaged_recording_is_an_error_in_every_view(
    page: Page, rich_db: Path, tmp_path: Path
) -> None:
    db = tmp_path / "soon-damaged.db"
    db.write_bytes(rich_db.read_bytes())
    with web_server(db) as url:
        p = page.page
        p.goto(url + "#view=timeline&c=1")
        p.wait_for_selector("#waterfall")
        db.write_bytes(b"\x00garbage" * 4096)
        time.sleep(0.3)
        for view in ("timeline", "frames", "session"):
            p.goto(url + f"#view={view}&c=1&s={RICH_SESSION}")
            p.wait_for_selector(f"#view-{view} [role=alert]")
            text = p.inner_text(f"#view-{view}")
            assert "not a usable acp-proxy recording" in text, (view, text[:300])
        page.shot("21-damaged-recording")
    page.errors = [e for e in page.errors if "503" not in e]


def test_diff_side_by_side(page: Page, tmp_path: Path) -> None:
    db = tmp_path / "diff.db"
    make_diff_db(db)
    with web_server(db) as url:
        p = page.page
        p.goto(url + "#view=diff")
        p.wait_for_selector("#diff-table")
        assert p.inner_text("#diff-summary").startswith("0 added · 1 removed · 1 changed")
        removed = p.locator("tr.diff-row.removed")
        assert removed.count() == 1
        assert "usage_update" in removed.inner_text()
        changed = p.locator("tr.diff-row.changed")
        assert changed.count() == 1
        members = p.inner_text("tr.diff-members")
        assert '"Echo: looking "' in members and '"Echo: checking "' in members
        assert p.locator("tr.diff-row.equal").count() == 24
        page.shot("22-diff")
        # each side links to its frame
        changed.locator("td.diff-cell >> nth=1 >> button").click()
        fid = rows(
            db, "SELECT id FROM frames WHERE connection_id = 2 AND instr(raw, 'checking') > 0"
        )[0][0]
        page.wait_js("id => document.querySelector(`#fr-${id}.selected`) !== null", fid)


def test_diff_pairs_each_turn_with_its_own_and_shows_slower_figures(
    page: Page, tmp_path: Path
) -> None:
    # A: two turns; B: turn 1 only, its reply reworded and its end_turn 2 s later
    def msg(obj: dict[str, object]) -> bytes:
        return json.dumps({"jsonrpc": "2.0", **obj}).encode() + b"\n"

    def turn(
        rpc_id: int, text: str, reply: str, at: int, took: int
    ) -> list[tuple[int, str, bytes]]:
        prompt = {"sessionId": "s1", "prompt": [{"type": "text", "text": text}]}
        update = {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": reply},
        }
        return [
            (at, "c2a", msg({"id": rpc_id, "method": "session/prompt", "params": prompt})),
            (
                at + 1,
                "a2c",
                msg({"method": "session/update", "params": {"sessionId": "s1", "update": update}}),
            ),
            (at + took, "a2c", msg({"id": rpc_id, "result": {"stopReason": "end_turn"}})),
        ]

    start = [
        (0, "c2a", msg({"id": 1, "method": "initialize", "params": {"protocolVersion": 1}})),
        (5, "a2c", msg({"id": 1, "result": {"protocolVersion": 1}})),
        (6, "c2a", msg({"id": 2, "method": "session/new", "params": {"cwd": "/tmp"}})),
        (9, "a2c", msg({"id": 2, "result": {"sessionId": "s1"}})),
    ]
    a = [*start, *turn(3, "one", "first answer", 10, 20), *turn(4, "two", "second", 40, 20)]
    b = [*start, *turn(3, "one", "first answer, reworded", 10, 2020)]
    db = tmp_path / "turns.db"
    now = time.time()
    for frames in (a, b):
        insert_frames(
            db,
            [Capture(d, raw, ts=now + ms / 1000, mono_ns=ms * 1_000_000) for ms, d, raw in frames],
            connection={"started_at": now, "ended_at": now + 3, "protocol_version": 1},
            index=True,
        )
    with web_server(db) as url:
        p = page.page
        p.goto(url + "#view=diff")
        p.wait_for_selector("#diff-table")
        assert p.inner_text("#diff-summary").startswith(
            "0 added · 3 removed · 1 changed · 1 slower"
        )
        removed = p.locator("tr.diff-row.removed td.diff-cell:first-child").all_inner_texts()
        assert [t.split()[0] for t in removed] == ["#8", "#9", "#10"]  # turn 2, whole
        end_turn = p.locator("tr.diff-row.equal", has_text="response").last
        assert end_turn.locator("td.diff-cell").all_inner_texts()[0].startswith("#7 ")  # turn 1's
        prompt = p.locator("tr.diff-row", has_text="c2a request session/prompt").first
        assert "slower" in prompt.locator("td.diff-mark").inner_text()
        assert p.inner_text("tr.diff-slower") == (
            "slower turn: 20ms → 2.02s (+2.00s) · reported, not a failure"
        )


def test_text_filter_through_the_search_index(page: Page, rich_db: Path) -> None:
    before = rich_db.read_bytes()
    with web_server(rich_db) as url:
        p = page.page
        p.goto(url + "#c=1")
        p.wait_for_selector("#frame-rows .frow")
        p.check("#f-words")
        p.fill("#f-text", "looking test")  # words of one message, split across chunks
        p.press("#f-text", "Enter")
        page.wait_js("() => document.querySelectorAll('#frame-rows .frow').length === 1")
        first_chunk = frame_id(rich_db, "instr(raw, 'Echo: looking') > 0")
        assert p.locator(f"#fr-{first_chunk}").count() == 1
        assert "[looking]" in p.inner_text(f"#fr-{first_chunk} .c-preview")
        assert "3 frames" in p.inner_text(f"#fr-{first_chunk} .c-preview")
        page.shot("23-search-filter")
        # the byte filter is still there: unticked, the same words match no raw frame
        p.uncheck("#f-words")
        page.wait_js("() => document.querySelectorAll('#frame-rows .frow').length === 0")
    assert rich_db.read_bytes() == before  # the inspector wrote nothing into the recording


@pytest.fixture(scope="module")
def stray_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("stray") / "stray.db"
    make_stray_db(db)
    return db


def test_session_shows_stray_answers_and_what_the_user_said(page: Page, stray_db: Path) -> None:
    """A v1 agent that echoes no user_message_chunk, a client answering its notifications
    with id:null errors mid-turn (tests/acp/stray.py): both turns' prompts read as what the
    user said, and the four stray answers are in the conversation where they arrived."""
    with web_server(stray_db) as url:
        p = page.page
        p.goto(url + "#view=session")
        p.wait_for_selector(".item.user.prompt")
        said = p.eval_on_selector_all(".item.user.prompt .text", "els => els.map(e => e.innerText)")
        assert said == list(PROMPTS)
        strays = p.locator(".item.orphan")
        assert strays.count() == 4
        assert "error -32602 Invalid params" in strays.nth(0).inner_text()
        order = p.eval_on_selector_all(".items > *", "els => els.map(e => e.className)")
        prompts = [i for i, c in enumerate(order) if "prompt" in c]
        orphans = [i for i, c in enumerate(order) if "orphan" in c]
        # two in each turn, after the turn's prompt
        assert prompts[0] < orphans[0] < orphans[1] < prompts[1] < orphans[2] < orphans[3]
        page.shot("18-session-stray-answers")


def test_findings_frame_links_are_apart(page: Page, stray_db: Path) -> None:
    with web_server(stray_db) as url:
        p = page.page
        p.goto(url + "#view=findings&c=1")
        cell = p.locator("td.finding-frames").first
        cell.wait_for()
        assert cell.inner_text() == "#7, #8, #10, #11, #15, #16, #18, #19"
        assert cell.locator("button.link").count() == 8


def test_waterfall_zoom_fold_start_up_per_turn_scale_and_cancel(page: Page, stray_db: Path) -> None:
    """initialize takes 3.6 s, the turns 20 and 130 ms: start-up is folded by itself, the
    turns fill the axis, each turn can take the whole width, zoom widens the track, the
    cancel has a marker and each turn row says its prompt."""
    with web_server(stray_db) as url:
        p = page.page
        p.goto(url + "#view=timeline&c=1")
        p.wait_for_selector("#waterfall .wf-row.turn")
        turns = p.locator("#waterfall .wf-row.turn")
        assert "turn 1 · end_turn · 1st chunk 2.00ms" in turns.nth(0).inner_text()
        assert "turn 2 · cancelled · 1st chunk 5.00ms" in turns.nth(1).inner_text()
        said = p.eval_on_selector_all(".wf-row.turn .wf-prompt", "els => els.map(e => e.innerText)")
        assert said == [f"“{text}”" for text in PROMPTS]
        # folded: the axis starts at the first turn (3610 ms), not at initialize
        assert p.is_checked("#wf-fold")
        assert "start-up folded" in p.inner_text("#wf-startup")
        assert p.locator("#waterfall .wf-row[data-bar]", has_text="initialize").count() == 0
        left = "el => parseFloat(el.style.left)"
        turn2 = "#waterfall .wf-row.turn >> nth=1 >> .wf-bar.turn"
        # turn 2 starts at 3700 ms of the 3610..3830 ms axis: 40.9 %
        assert abs(p.eval_on_selector(turn2, left) - 40.9) < 0.1
        cancel = p.locator("#waterfall .wf-row.turn >> nth=1 >> .wf-cancel")
        assert "session/cancel #20 after 90ms" in (cancel.get_attribute("title") or "")
        assert abs(cancel.evaluate(left) - 81.8) < 0.1  # 3790 ms
        page.shot("19-waterfall-folded")
        # each turn on its own scale: turn 2 from 0 %, its cancel at 90 of 130 ms
        p.check("#wf-per-turn")
        p.wait_for_selector("#wf-per-turn:checked")
        assert p.eval_on_selector(turn2, left) == 0
        assert abs(cancel.evaluate(left) - 69.2) < 0.1
        p.uncheck("#wf-per-turn")
        # unfolded: initialize is back and squashes the turns to the right edge
        p.uncheck("#wf-fold")
        p.wait_for_selector("#waterfall .wf-row[data-bar] >> text=initialize")
        assert p.eval_on_selector(turn2, left) > 96
        # zoom: the track is twice, then four times as wide (scrolled sideways)
        width = "() => document.getElementById('waterfall').getBoundingClientRect().width"
        one = p.evaluate(width)
        p.click("#wf-zoom-in")
        p.click("#wf-zoom-in")
        assert p.inner_text("#wf-zoom") == "\u00d74"
        assert abs(p.evaluate(width) / one - 4) < 0.01
        p.click("#wf-zoom-out")
        assert p.inner_text("#wf-zoom") == "\u00d72"
        page.shot("20-waterfall-zoomed")
