"""``acp-proxy export --format html``: one file that opens offline in a real Chromium.

The recordings are made through the real proxy (the scripted agent's XSS reply, and an
echo connection carrying the payload corpus in methods, ids, error messages and text, plus
secrets); the report is written by the real executable and opened from ``file://`` with
every request but the file itself aborted and counted.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from tests.conftest import echo_proxy, run_proxy
from tests.web.helpers import record_session
from tests.web.test_browser import ARGS, CHROMIUM, TIMEOUT_MS

XSS = [
    "<script>window.__xss=1;alert('xss')</script><img src=x onerror=alert(2)>",
    "</script><script>window.__xss=2</script>",
    '<img src=x onerror="window.__xss=3">',
    "\u2028</script\u2029><svg onload=window.__xss=4>",
    "&lt;b&gt;entity&amp;</title><iframe src=javascript:window.__xss=5>",
    '<a href="javascript:window.__xss=6">link</a>',
]
SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz012345"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not os.path.exists(CHROMIUM), reason="needs /usr/bin/chromium"),
]


@pytest.fixture(scope="module")
def xss_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("html-export") / "xss.db"
    record_session(db, ["Please review main.py", "xss please"])
    frames = [
        {"jsonrpc": "2.0", "id": n, "method": payload, "params": {"text": payload}}
        for n, payload in enumerate(XSS)
    ]
    frames.append({"jsonrpc": "2.0", "id": XSS[1], "error": {"code": 1, "message": XSS[2]}})
    frames.append(
        {"jsonrpc": "2.0", "id": 99, "method": "session/new", "params": {"apiKey": SECRET}}
    )
    data = b"".join(orjson.dumps(f) + b"\n" for f in frames) + b"not json " + XSS[0].encode()
    proc = echo_proxy(db)
    out, err = proc.communicate(data + b"\n", timeout=60)
    assert out == data + b"\n", err
    return db


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        yield b
        b.close()


def _export(db: Path, out: Path, *flags: str) -> str:
    done = run_proxy(["export", str(db), "--format", "html", "-o", str(out), *flags])
    assert done.returncode == 0, done.stderr
    assert b"exported 2 connection(s)" in done.stderr
    return out.read_text("utf-8")


def _open_offline(browser: Any, report: Path) -> tuple[Any, list[str], list[str]]:
    context = browser.new_context(offline=True)
    page = context.new_page()
    page.set_default_timeout(TIMEOUT_MS)
    requests: list[str] = []
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("dialog", lambda d: (errors.append("dialog " + d.message), d.dismiss()))

    def route(r: Any) -> None:
        requests.append(r.request.url)
        if r.request.url == report.as_uri():
            r.continue_()
        else:
            r.abort()

    page.route("**/*", route)
    page.goto(report.as_uri())
    page.wait_for_selector("section.conn")
    return page, requests, errors


def test_html_report_renders_offline_and_payloads_stay_text(
    browser: Any, xss_db: Path, tmp_path: Path
) -> None:
    report = tmp_path / "report.html"
    html = _export(xss_db, report)
    assert SECRET not in html and "[REDACTED]" in html  # redacted by default
    embedded = html.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    assert "<" not in embedded and len(orjson.loads(embedded)["connections"]) == 2  # whole
    page, requests, errors = _open_offline(browser, report)
    assert requests == [report.as_uri()]  # nothing but the file itself
    assert errors == []
    assert page.locator("section.conn").count() == 2
    conversation = page.locator("#connection-1 .conversation").inner_text()
    assert "Please review main.py" in conversation and "Answer number 1" in conversation
    assert XSS[0] in conversation  # the agent's reply, as text
    findings = page.locator("#connection-2 .findings .finding")
    assert findings.count() > 0 and "error" in findings.first.inner_text()
    page.locator("#connection-2 .frames summary").click()
    frames_text = page.locator("#connection-2 .frames").inner_text()
    for payload in XSS:
        assert payload.replace("\u2028", "").replace("\u2029", "")[:20] in frames_text.replace(
            "\u2028", ""
        ).replace("\u2029", "")
    assert page.evaluate("window.__xss") is None
    assert (
        page.evaluate("document.querySelectorAll('img, iframe, svg, a, script[src]').length") == 0
    )
    page.context.close()


def test_html_report_no_redact_and_max_frames(browser: Any, xss_db: Path, tmp_path: Path) -> None:
    assert SECRET in _export(xss_db, tmp_path / "raw.html", "--no-redact")
    report = tmp_path / "cut.html"
    _export(xss_db, report, "--max-frames", "5")
    page, requests, errors = _open_offline(browser, report)
    assert requests == [report.as_uri()] and errors == []
    note = page.locator("#cut-note").inner_text()
    assert "left out" in note and "--max-frames 5" in note
    assert page.locator("section.conn tr[data-seq]").count() == 5
    page.context.close()
    bad = run_proxy(["export", str(xss_db), "--format", "html", "-c", "9"])
    assert bad.returncode == 1 and bad.stderr.count(b"\n") == 1 and b"no connection 9" in bad.stderr


def test_html_report_from_postgresql(pg_url: str, tmp_path: Path) -> None:
    """The same report from a PostgreSQL store: the frames' exact bytes and the findings."""
    data = b'{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"x":"<b>"}}\n'
    proc = echo_proxy(pg_url)
    out, err = proc.communicate(data, timeout=60)
    assert out == data, err
    report = tmp_path / "pg.html"
    done = run_proxy(["export", pg_url, "--format", "html", "-o", str(report)])
    assert done.returncode == 0, done.stderr
    html = report.read_text("utf-8")
    embedded = html.split('id="report-data">', 1)[1].split("</script>", 1)[0]
    (conn,) = orjson.loads(embedded)["connections"]
    assert [f["text"].encode() for f in conn["frames"]] == [data, data]
    assert conn["findings"]["summary"]["error"] > 0  # no initialize first, and more
