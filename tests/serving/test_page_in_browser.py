"""The try-it page in a real browser (headless Chromium driven by Playwright): type a sentence,
translate, see the translation and the attention heatmap, with no console errors and no
failed requests; the beam box starts at the server's default; an answer from the translation
memory (an accepted correction) is said in the page; a server that cannot be reached is said in
the page, and the translation of another text is no longer shown.

Needs Playwright (the browser test extra) and a Chromium: Debian's, which scripts/setup.sh
installs where it can, or $TFM_CHROMIUM. Skipped with the reason otherwise."""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from serving.serve_helpers import AUTH, SENTENCES, corrections_args


def chromium() -> str:
    found = os.environ.get("TFM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip(
            "no Chromium on this machine (scripts/setup.sh installs Debian's chromium where "
            "apt-get can; or set $TFM_CHROMIUM)"
        )
    return found


@contextlib.contextmanager
def browser_page(problems: list[str]) -> Iterator[Any]:
    """A page of headless Chromium; its console errors and warnings, uncaught errors and failed
    requests are appended to `problems`."""
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="Playwright is not installed (pip install -e '.[browser]')"
    )
    executable = chromium()
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=executable,
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        page = browser.new_page()
        page.on(
            "console",
            lambda m: problems.append(f"console {m.type}: {m.text}") if m.type in ("error", "warning") else None,
        )
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.on("requestfailed", lambda r: problems.append(f"failed {r.url}"))
        try:
            yield page
        finally:
            browser.close()


def test_the_page_translates_and_draws_the_attention(served, model):
    problems: list[str] = []
    with browser_page(problems) as page:
        page.goto(served.url + "/")
        page.wait_for_function("document.querySelector('#translation').textContent.length > 0")
        page.wait_for_function("document.querySelector('#model').textContent.includes('sha256')")
        assert page.get_attribute("#beam", "max") == "6"  # serve.max_beam_size: the server's
        assert page.input_value("#beam") == str(model.backend.decode.beam_size)  # the model's default
        page.fill("#text", SENTENCES[2])
        page.fill("#beam", "1")
        with page.expect_response(lambda r: r.url.endswith("/attention")):
            page.click("button[type=submit]")
        page.wait_for_function(
            f"document.querySelector('#translation').textContent == {model.translate([SENTENCES[2]], beam_size=1)[0]!r}"
        )
        cells = page.locator("#heatmap table.heat td").count()
        attention = model.attention(SENTENCES[2], model.options(beam_size=1))
        assert cells == len(attention.source_tokens) * len(attention.target_tokens)
        assert "sha256" in page.text_content("#model")
    assert problems == []


def test_the_page_says_when_the_answer_is_an_accepted_correction(trained, tmp_path, start_server, model):
    """The page once showed the model's own translation of a source the translation memory
    holds, where /translate answered the correction, and did not say which it was."""
    args, _ = corrections_args(trained, tmp_path)
    server = start_server(*args)
    fix = {"source": SENTENCES[2], "corrected": "A little child holds a big hat."}
    correction = server.post("/corrections", json=fix, headers=AUTH).json()
    assert correction["status"] == "accepted", correction
    shown = "document.querySelector('#translation').textContent"
    problems: list[str] = []
    with browser_page(problems) as page:
        page.set_extra_http_headers(AUTH)  # what the proxy in front of a server with a token adds
        page.goto(server.url + "/")
        page.wait_for_function("document.querySelector('#heatmap table.heat') !== null")
        assert page.text_content("#memory") == ""  # the example sentence: the model's
        page.fill("#text", SENTENCES[2])
        page.click("button[type=submit]")
        page.wait_for_function(f"{shown} == {fix['corrected']!r}")
        note = page.text_content("#memory")
        assert note.startswith(f"From an accepted correction ({correction['id']}), not the model's own"), note
        tokens = len(model.backend.tokenizers.tgt.encode(fix["corrected"])) + 1  # and <eos>
        assert page.locator("#heatmap table.heat tr").count() == 1 + tokens  # the correction's rows
        page.fill("#text", SENTENCES[3])
        page.click("button[type=submit]")
        page.wait_for_function(f"{shown} == {model.translate([SENTENCES[3]])[0]!r}")
        assert page.text_content("#memory") == ""
    assert problems == []


def test_the_page_says_when_the_server_cannot_be_reached(trained, start_server):
    """It once showed nothing (an uncaught "Failed to fetch", #error empty) and kept the
    translation of the text before on screen."""
    server = start_server(
        "-c", str(trained["config"]), "--checkpoint", str(trained["run"] / "published.pt"), "--set", "serve.threads=1"
    )
    problems: list[str] = []
    with browser_page(problems) as page:
        page.goto(server.url + "/")
        page.wait_for_function("document.querySelector('#heatmap table.heat') !== null")
        assert problems == []
        assert server.stop() == 0
        page.fill("#text", SENTENCES[3])
        page.click("button[type=submit]")
        page.wait_for_function("document.querySelector('#error').textContent.length > 0")
        assert page.text_content("#error").startswith("cannot reach the server (")
        assert page.text_content("#translation") == "" and page.locator("#heatmap *").count() == 0
    assert not [p for p in problems if p.startswith("page error")], problems  # nothing uncaught
