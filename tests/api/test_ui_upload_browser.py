"""The web console's uploads, long texts and errors in a real browser (issue 44, part 4): headless
Chromium against a live ``livingrag serve`` with the loopback LLM, as in test_ui_browser.py.

* the four documents of tests/data/documents, chosen with the file picker, upload and their index
  job is watched until it succeeds, with each file's title from its headings;
* a malformed PDF gets an error naming the file; the next upload takes that error off the page;
* a file dropped on the upload box (a drop event with the file) uploads too;
* a question longer than the limit is said to be, not cut: the form does not send it until it is
  shortened or cut with the notice's button;
* an error from a question is gone once the next question is answered.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from livingrag.testing.openai_server import OpenAICompatServer
from tests.api.test_ui_browser import CHROMIUM, _assert_labelled, _page, _require_browser, _sign_in, expect
from tests.api_support import ADMIN_KEY, ROOT, Server, auth, server_env
from tests.corpus_support import DOCUMENT_TITLES, DOCUMENTS

pytestmark = [pytest.mark.db, pytest.mark.slow]


@pytest.fixture(scope="module")
def live(make_database_url: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A live server with one tenant and an empty corpus."""
    _require_browser()
    log = tmp_path_factory.mktemp("ui-upload-server") / "server.log"
    with OpenAICompatServer() as llm:
        env = server_env(make_database_url(), llm.base_url)
        subprocess.run(
            [sys.executable, "-m", "livingrag.cli.main", "db", "upgrade"],
            env=env, cwd=ROOT, capture_output=True, check=True, timeout=300,
        )  # fmt: skip
        srv = Server(env, log_path=log).start(timeout=240)
        try:
            r = httpx.post(
                srv.url + "/v1/tenants", json={"name": f"ui-up-{uuid.uuid4().hex[:6]}"}, headers=auth(ADMIN_KEY)
            )
            key = r.json()["api_key"]
            cid = httpx.post(srv.url + "/v1/corpora", json={"name": "docs"}, headers=auth(key)).json()["id"]
            yield {"url": srv.url, "log": log, "key": key, "cid": cid}
        finally:
            srv.stop()


@pytest.fixture(scope="module")
def page(live: dict[str, Any], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        try:
            pg = _page(browser, live)
            _sign_in(pg, live["key"])
            pg.get_by_role("navigation", name="Main").wait_for()
            pg.screenshots = tmp_path_factory.mktemp("ui-upload-screenshots")
            yield pg
            assert not pg.js_errors, pg.js_errors
        finally:
            browser.close()


def _shot(page: Any, name: str) -> None:
    path = Path(page.screenshots) / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    print(f"screenshot: {path}")


def _corpus(page: Any, live: dict[str, Any]) -> None:
    page.goto(page.url.split("#")[0] + f"#/corpus/{live['cid']}")
    page.get_by_role("heading", name="Upload files").wait_for()


def _counts(live: dict[str, Any]) -> tuple[int, int]:
    """The corpus's passages and the tenant's index jobs."""
    with httpx.Client(base_url=live["url"], headers=auth(live["key"])) as c:
        passages = c.get(f"/v1/corpora/{live['cid']}").json()["counts"]["passages"]
        return int(passages), len(c.get("/v1/index-jobs").json())


def test_upload_files_with_the_picker_and_watch_the_job(page: Any, live: dict[str, Any]) -> None:
    _corpus(page, live)
    upload = page.get_by_role("form", name="Upload files")
    picker = upload.get_by_label("Files to upload", exact=True)
    assert picker.get_attribute("accept") == ".pdf,.docx,.html,.htm,.xhtml,.md,.markdown,.txt,.json,.jsonl"
    assert picker.get_attribute("multiple") is not None
    expect(upload.get_by_role("button", name="Upload and index")).to_be_disabled()
    assert "null" not in upload.inner_text()
    picker.set_input_files([str(DOCUMENTS / name) for name in sorted(DOCUMENT_TITLES)])
    chosen = upload.get_by_role("list", name="Files chosen")
    expect(chosen).to_contain_text("annual_review.pdf")
    expect(chosen).to_contain_text("4 files")
    _assert_labelled(page)
    upload.get_by_role("button", name="Upload and index").click()
    done = upload.locator("div.upload-job[data-state=succeeded]")
    done.wait_for(timeout=120_000)
    expect(done).to_contain_text("4 document(s)")
    expect(done).to_contain_text("4 passage(s) indexed")
    assert done.locator("progress").count() >= 1  # the job's progress per stage
    rows = done.locator("table.uploaded-files tbody tr")
    expect(rows).to_have_count(4)
    titles = dict(
        zip(
            rows.locator("td:nth-child(1)").all_inner_texts(),
            rows.locator("td:nth-child(2)").all_inner_texts(),
            strict=True,
        )
    )
    assert titles == DOCUMENT_TITLES
    page.get_by_role("alert").get_by_text("4 file(s) indexed: 4 passage(s) new").wait_for()
    expect(page.locator("li.job[data-state=succeeded]")).to_have_count(1)  # the jobs list has it too
    assert _counts(live) == (4, 1)
    expect(page.locator("main h1 small")).to_contain_text(": 4 passages")  # the corpus's counts again
    assert "null" not in upload.inner_text()
    _shot(page, "corpus-upload")
    _assert_labelled(page)


def test_a_malformed_pdf_is_named_and_the_next_upload_clears_the_error(page: Any, live: dict[str, Any]) -> None:
    _corpus(page, live)
    before = _counts(live)
    upload = page.get_by_role("form", name="Upload files")
    picker = upload.get_by_label("Files to upload", exact=True)
    broken = (DOCUMENTS / "annual_review.pdf").read_bytes()[:4000]
    picker.set_input_files(
        [
            {"name": "broken.pdf", "mimeType": "application/pdf", "buffer": broken},
            {"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# Harbour notes\nThe pier opens at six.\n"},
        ]
    )
    upload.get_by_role("button", name="Upload and index").click()
    alert = page.get_by_role("alert")
    alert.get_by_text("Invalid input (422)").wait_for()
    expect(alert).to_contain_text("1 file of 2 cannot be read (nothing was indexed)")
    expect(alert).to_contain_text("broken.pdf: not a readable PDF")
    _shot(page, "corpus-upload-422")
    assert _counts(live) == before  # nothing of that call was written
    expect(upload.get_by_role("button", name="Upload and index")).to_be_enabled()  # the files stay chosen
    picker.set_input_files(
        [{"name": "notes.md", "mimeType": "text/markdown", "buffer": b"# Harbour notes\nThe pier opens at six.\n"}]
    )
    upload.get_by_role("button", name="Upload and index").click()
    expect(alert.locator(".msg.error")).to_have_count(0)  # the new request took the old error off
    upload.locator("div.upload-job[data-state=succeeded]").wait_for(timeout=120_000)
    expect(upload.locator("table.uploaded-files")).to_contain_text("Harbour notes")


def test_a_dropped_file_uploads(page: Any, live: dict[str, Any]) -> None:
    _corpus(page, live)
    upload = page.get_by_role("form", name="Upload files")
    page.evaluate(
        """() => {
        const zone = document.querySelector("[data-dropzone=files]");
        const dt = new DataTransfer();
        dt.items.add(new File(["<html><body><h1>Ferry log</h1><p>The ferry Teisten left at dawn.</p></body></html>"],
          "ferry_log.html", { type: "text/html" }));
        for (const type of ["dragenter", "dragover", "drop"]) {
          zone.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
        }
      }"""
    )
    expect(upload.get_by_role("list", name="Files chosen")).to_contain_text("ferry_log.html")
    upload.get_by_role("button", name="Upload and index").click()
    done = upload.locator("div.upload-job[data-state=succeeded]")
    done.wait_for(timeout=120_000)
    expect(done.locator("table.uploaded-files")).to_contain_text("Ferry log")


def test_a_file_dropped_outside_the_upload_box_does_not_leave_the_console(page: Any, live: dict[str, Any]) -> None:
    """The browser would open a file dropped anywhere else in place of the console: that drop is
    refused (its default prevented), and the page stays."""
    _corpus(page, live)
    refused = page.evaluate(
        """() => {
        const dt = new DataTransfer();
        dt.items.add(new File(["# Notes"], "notes.md", { type: "text/markdown" }));
        const ev = new DragEvent("drop", { dataTransfer: dt, bubbles: true, cancelable: true });
        document.querySelector("h1").dispatchEvent(ev);
        return ev.defaultPrevented;
      }"""
    )
    assert refused is True
    expect(page.get_by_role("form", name="Upload files")).to_be_visible()


def test_a_long_question_is_said_to_be_long_not_cut(page: Any) -> None:
    page.goto(page.url.split("#")[0] + "#/ask")
    question = page.get_by_label("Question", exact=True)
    long = "Who runs the Tromsø depot? " + "x" * 4100
    question.fill(long)
    notice = page.locator("p.limit-notice")
    expect(notice).to_be_visible()
    expect(notice).to_contain_text(f"This text is {len(long):,} characters long, {len(long) - 4000:,} over the limit")
    expect(notice).to_contain_text("Nothing was cut")
    assert question.input_value() == long  # nothing was cut
    _shot(page, "ask-long-question")
    _assert_labelled(page)
    page.get_by_role("button", name="Ask", exact=True).click()
    assert question.evaluate("(el) => el.validity.valid") is False  # the form does not send it
    assert page.locator("#answer-title").count() == 0
    notice.get_by_role("button", name=re.compile("^Cut it to the first 4,000 characters")).click()
    assert question.input_value() == long[:4000]
    expect(notice).to_be_hidden()
    assert question.evaluate("(el) => el.validity.valid") is True


def test_an_old_error_goes_when_the_next_question_is_answered(page: Any) -> None:
    page.goto(page.url.split("#")[0] + "#/ask")
    question = page.get_by_label("Question", exact=True)
    question.fill("   ")  # only white space: the API answers 422
    page.get_by_role("button", name="Ask", exact=True).click()
    alert = page.get_by_role("alert")
    alert.get_by_text("Invalid input (422)").wait_for()
    question.fill("Who runs the Tromsø depot?")
    page.get_by_role("button", name="Ask", exact=True).click()
    page.locator("#answer-title").wait_for()
    expect(alert.locator(".msg.error")).to_have_count(0)
    assert json.dumps(page.js_errors) == "[]"
