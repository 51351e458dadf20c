"""The try-it page in a real browser (headless Chromium driven by Playwright): type a sentence,
translate, see the translation and the attention heatmap, with no console errors and no
failed requests; the beam box starts at the server's default.

Needs Playwright (the browser test extra) and a Chromium: Debian's, which scripts/setup.sh
installs where it can, or $TFM_CHROMIUM. Skipped with the reason otherwise."""

from __future__ import annotations

import os
import shutil

import pytest
from serve_helpers import SENTENCES


def chromium() -> str:
    found = os.environ.get("TFM_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.skip("no Chromium on this machine (scripts/setup.sh installs Debian's chromium where "
                    "apt-get can; or set $TFM_CHROMIUM)")
    return found


def test_the_page_translates_and_draws_the_attention(served, model):
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright is not installed "
                                   "(pip install -e '.[browser]')")
    executable = chromium()
    problems: list[str] = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=[
            "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run"])
        page = browser.new_page()
        page.on("console", lambda m: problems.append(f"console {m.type}: {m.text}")
                if m.type in ("error", "warning") else None)
        page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(served.url + "/")
        page.wait_for_function("document.querySelector('#translation').textContent.length > 0")
        page.wait_for_function("document.querySelector('#model').textContent.includes('sha256')")
        assert page.get_attribute("#beam", "max") == "6"  # serve.max_beam_size: the server's
        assert page.input_value("#beam") == str(model.backend.decode.beam_size)  # the model's default
        page.fill("#text", SENTENCES[2])
        page.fill("#beam", "1")
        with page.expect_response(lambda r: r.url.endswith("/attention")):
            page.click("button[type=submit]")
        page.wait_for_function(f"document.querySelector('#translation').textContent == "
                               f"{model.translate([SENTENCES[2]], beam_size=1)[0]!r}")
        cells = page.locator("#heatmap table.heat td").count()
        attention = model.attention(SENTENCES[2], model.options(beam_size=1))
        assert cells == len(attention.source_tokens) * len(attention.target_tokens)
        assert "sha256" in page.text_content("#model")
        browser.close()
    assert problems == []
