"""A recorded text value is data: a real run captures hostile strings, a real mkdocs build shows
them, and Debian's Chromium runs no script and finds no `javascript:` link on the page."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from support import (
    CHROMIUM,
    COURSE,
    MARKDOWN,
    SCRIPT,
    STEM,
    add_hostile_step,
    inflated,
    lay_out_every_block,
    make_project,
    serving,
)

from course.pages.cards import Card, draw_card
from course.site import BuildResult, build_site

pytestmark = pytest.mark.browser


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    root = make_project(tmp_path_factory.mktemp("recorded-text") / "project")
    lab = root / "lab" / "tiny-cache" / "lab.yml"  # its GPU step runs here, on the CPU
    lab.write_text(lab.read_text().replace("    needs: gpu\n", ""))
    add_hostile_step(root)
    done = subprocess.run(
        [*COURSE, "--root", str(root), "run", "tiny-cache"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert done.returncode == 0, done.stderr
    return build_site(root, root / "site")


def test_the_html_carries_recorded_text_inert(built: BuildResult) -> None:
    html = (built.site_dir / "part-1" / "tiny" / "index.html").read_text()
    assert "window.injected" in html  # the values are on the page...
    assert "<script>window" not in html and "<img src=x" not in html  # ...as text
    assert not re.search(r"href=[\"']?javascript:", html, re.IGNORECASE)
    assert "<strong>b</strong>" not in html
    shown = re.search(r'data-source="[^"]+/hostile\.m"[^>]*>([^<]*)</span>', html)
    assert (
        shown is not None
        and "&#91;x&#93;(javascript:alert(1)) &#42;&#42;b&#42;&#42;" in shown.group(1)
    )
    assert 'alt="A &lt;script&gt;window.injected = 1&lt;/script&gt;' in html


def test_the_browser_runs_no_recorded_script(built: BuildResult) -> None:
    from playwright import sync_api

    with serving(built.site_dir) as base, sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        try:
            tab = browser.new_page()
            tab.goto(base + "part-1/tiny/")
            tab.wait_for_load_state("load")
            lay_out_every_block(tab)  # a figure far below is laid out near the screen only
            assert tab.evaluate("window.injected") is None
            links = tab.evaluate(
                "[...document.querySelectorAll('[href]')].map(a => a.getAttribute('href'))"
            )
            assert not [h for h in links if h.strip().lower().startswith("javascript:")]
            values = tab.locator("[data-source$='/hostile.m']").all_inner_texts()
            assert values and all(v.strip() == MARKDOWN for v in values), values
            assert tab.locator("[data-source$='/hostile.l']").first.inner_text() == SCRIPT
            caption = tab.locator("figcaption", has_text="C <script>").inner_text()
            assert caption == f"C {SCRIPT} {MARKDOWN}"
            alt = tab.locator("img[alt^='A <script>']").get_attribute("alt")
            assert alt == f"A {SCRIPT} {MARKDOWN}"
        finally:
            browser.close()


def test_structured_data_pdf_and_zip_carry_no_markup_from_a_value(built: BuildResult) -> None:
    html = (built.site_dir / "part-1" / "tiny" / "index.html").read_text()
    for block in re.findall(r'<script type="application/ld\+json">(.*?)</script>', html, re.S):
        assert "<" not in block and json.loads(block)
    pdf = inflated(built.site_dir / "downloads" / f"{STEM}.pdf")
    assert b"/URI (javascript" not in pdf.replace(b"\\", b"")


def test_a_card_draws_a_dollar_as_a_dollar(tmp_path: Path) -> None:
    card = Card("Costs in $", "Part 1", headline=r"$\undefined{x}$ 3", label="per $ and $")
    draw_card(card, tmp_path / "card.png")  # mathtext would raise on \undefined
    assert (tmp_path / "card.png").read_bytes()[:4] == b"\x89PNG"
