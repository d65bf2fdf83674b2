"""The fixture site in Debian's Chromium, driven by Playwright: the checks, the progress line,
copy, axe; built by each engine (MkDocs; Zensical where it is installed, else skipped, saying so).

The site is served on 127.0.0.1 (instant navigation does not work on file://); every request the
browser makes is recorded, and none may leave that server.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import expect
from support import (
    CHROMIUM,
    NO_ZENSICAL,
    SITE_FIXTURE,
    ZENSICAL,
    chromium_browser,
    free_port,
    lay_out_every_block,
    make_project,
    serving,
)

from course.site import build_site

pytestmark = pytest.mark.browser

LESSON = "part-1/tiny/"


ENGINES = [
    "mkdocs",
    pytest.param("zensical", marks=pytest.mark.skipif(not ZENSICAL, reason=NO_ZENSICAL)),
]


@pytest.fixture(scope="module", params=ENGINES)
def base(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The fixture site, built by one engine for and served at one local address.

    Material's instant navigation matches links against sitemap.xml, whose URLs come from
    site_url with the host swapped for the page's but not the port: build for the real address.
    """
    root = make_project(tmp_path_factory.mktemp("browser") / "project")
    port = free_port()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("COURSE_SITE_URL", f"http://127.0.0.1:{port}/")
        result = build_site(root, root / "site", engine=request.param)
    with serving(result.site_dir, port) as url:
        yield url


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    if not Path(CHROMIUM).exists():
        pytest.fail(f"no Chromium at {CHROMIUM}: tests/run.sh installs Debian's chromium")
    with chromium_browser() as browser:
        yield browser


@pytest.fixture()
def page(browser: object, base: str) -> Iterator[object]:
    """A fresh browser context (empty storage) whose every request must stay on the local server."""
    context = browser.new_context(base_url=base)  # type: ignore[attr-defined]
    context.set_default_timeout(5000)
    outside: list[str] = []
    context.on(
        "request",
        lambda r: None if r.url.startswith((base, "data:", "blob:")) else outside.append(r.url),
    )
    tab = context.new_page()
    yield tab
    context.close()
    assert outside == [], f"requests left the site: {outside}"


@pytest.fixture()
def no_js(browser: object, base: str) -> Iterator[object]:
    """A tab with JavaScript turned off, on the lesson page."""
    context = browser.new_context(base_url=base, java_script_enabled=False)  # type: ignore[attr-defined]
    tab = context.new_page()
    tab.goto(LESSON)
    yield tab
    context.close()


def progress(tab: object) -> str:
    return tab.locator(".course-progress__count").inner_text()  # type: ignore[attr-defined]


def answer(tab: object, check: str, option: int) -> None:
    tab.locator(f"#check-{check}-{option}").check()  # type: ignore[attr-defined]
    tab.locator(f"#check-{check} button[type=submit]").click()  # type: ignore[attr-defined]


def test_predict_reveals_the_measured_value_and_moves_progress(page: object) -> None:
    page.goto(LESSON)  # type: ignore[attr-defined]
    measured = page.locator("#check-slower .course-check__measured")  # type: ignore[attr-defined]
    assert progress(page) == "0 of 2 checks answered right"
    assert measured.is_hidden()
    assert page.locator("#check-slower .course-check__answer").is_hidden()  # type: ignore[attr-defined]
    answer(page, "slower", 1)
    status = page.locator("#check-slower [role=status]")  # type: ignore[attr-defined]
    assert status.inner_text() == "Right. What the lab measured: 1.55 ×"
    assert measured.is_visible()
    assert progress(page) == "1 of 2 checks answered right"
    assert page.locator("#check-slower-0").is_disabled()  # type: ignore[attr-defined]
    assert "The right answer" not in status.inner_text()
    assert (
        "Your answer, and right."
        in page.locator(  # type: ignore[attr-defined]
            "#check-slower [data-option='1'] .course-check__why"
        ).inner_text()
    )


def test_progress_survives_reload_and_instant_navigation(page: object, base: str) -> None:
    page.goto(LESSON)  # type: ignore[attr-defined]
    answer(page, "slower", 1)
    page.reload()  # type: ignore[attr-defined]
    assert progress(page) == "1 of 2 checks answered right"
    assert page.locator("#check-slower-1").is_checked()  # type: ignore[attr-defined]
    assert (
        page.locator("#check-slower [role=status]")
        .inner_text()
        .startswith(  # type: ignore[attr-defined]
            "You answered this before. Right."
        )
    )
    # away to the authors' side and back through Material's instant navigation (no full reload)
    page.evaluate("window.__marker = 1")  # type: ignore[attr-defined]
    page.locator(".md-tabs__link", has_text="For authors").click()  # type: ignore[attr-defined]
    page.wait_for_url("**/authors/engine-release/")  # the first authors' page: no order given  # type: ignore[attr-defined]
    page.locator(".md-tabs__link", has_text="Course").click()  # type: ignore[attr-defined]
    page.wait_for_url(base)  # type: ignore[attr-defined]
    page.locator(".course-lesson__title a", has_text="1.1 A tiny cache").click()  # type: ignore[attr-defined]
    page.wait_for_url(f"**/{LESSON}")  # type: ignore[attr-defined]
    assert page.evaluate("window.__marker") == 1  # type: ignore[attr-defined]
    page.locator("#check-slower.course-check--answered").wait_for()  # type: ignore[attr-defined]
    assert progress(page) == "1 of 2 checks answered right"


def test_only_the_first_answer_counts_and_reset_clears(page: object) -> None:
    page.goto(LESSON)  # type: ignore[attr-defined]
    answer(page, "why-two", 1)  # wrong
    status = page.locator("#check-why-two [role=status]")  # type: ignore[attr-defined]
    assert status.inner_text() == "Not right: the answer is A."
    assert progress(page) == "0 of 2 checks answered right"
    page.locator("#check-why-two .course-check__again").click()  # type: ignore[attr-defined]
    answer(page, "why-two", 0)  # right, but second
    assert status.inner_text() == "Right. Only your first answer counts toward your progress."
    assert progress(page) == "0 of 2 checks answered right"
    page.reload()  # type: ignore[attr-defined]
    assert progress(page) == "0 of 2 checks answered right"
    assert page.locator("#check-why-two-1").is_checked()  # type: ignore[attr-defined]
    page.locator(".course-progress__reset").click()  # type: ignore[attr-defined]
    assert page.locator("#check-why-two-1").is_enabled()  # type: ignore[attr-defined]
    answer(page, "why-two", 0)
    assert progress(page) == "1 of 2 checks answered right"


def test_a_check_works_by_keyboard_alone(page: object) -> None:
    page.goto(LESSON)  # type: ignore[attr-defined]
    for _ in range(300):
        page.keyboard.press("Tab")  # type: ignore[attr-defined]
        if page.evaluate("document.activeElement.id") == "check-slower-0":  # type: ignore[attr-defined]
            break
    else:
        pytest.fail("Tab never reached the first option of the predict check")
    page.keyboard.press("ArrowDown")  # type: ignore[attr-defined]
    assert page.locator("#check-slower-1").is_checked()  # type: ignore[attr-defined]
    page.keyboard.press("Tab")  # type: ignore[attr-defined]
    assert page.evaluate("document.activeElement.type") == "submit"  # type: ignore[attr-defined]
    page.keyboard.press("Enter")  # type: ignore[attr-defined]
    assert page.locator("#check-slower [role=status]").inner_text().startswith("Right.")  # type: ignore[attr-defined]
    assert progress(page) == "1 of 2 checks answered right"


def test_the_copy_button_copies_the_listing(browser: object, base: str) -> None:
    context = browser.new_context(base_url=base)  # type: ignore[attr-defined]
    context.set_default_timeout(5000)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base.rstrip("/"))
    tab = context.new_page()
    tab.goto(LESSON)
    listing = tab.locator(".highlight", has=tab.locator(".filename", has_text="size.py"))
    listing.hover()
    listing.locator("button[data-md-type=copy]").click()
    copied = tab.evaluate("navigator.clipboard.readText()")
    context.close()
    source = SITE_FIXTURE / "lab/tiny-cache/size.py"
    assert copied.strip() == source.read_text(encoding="utf-8").strip()


def folded_source() -> str:
    """at_length.py as the fixture page writes it, in its folded block."""
    text = (SITE_FIXTURE / "docs/part-1/tiny.md").read_text(encoding="utf-8")
    start = text.index('```python title="at_length.py"\n') + len('```python title="at_length.py"\n')
    lines = text[start : text.index("    ```\n", start)].splitlines()
    return "\n".join(line[4:] for line in lines).strip()


def test_a_folded_listing_comes_when_unfolded_and_copies_after_instant_navigation(
    browser: object, base: str
) -> None:
    context = browser.new_context(base_url=base)  # type: ignore[attr-defined]
    context.set_default_timeout(5000)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=base.rstrip("/"))
    fetched: list[str] = []
    context.on("request", lambda r: fetched.append(r.url) if "/code/" in r.url else None)
    tab = context.new_page()
    tab.goto(base)
    # Material follows a click instantly only once it has read the sitemap (its list of the
    # site's own pages): on a busy machine that request ends after the page's load
    tab.wait_for_load_state("networkidle")
    tab.evaluate("window.__marker = 1")
    tab.locator(".course-lesson__title a", has_text="1.1 A tiny cache").click()
    tab.wait_for_url(f"**/{LESSON}")
    assert tab.evaluate("window.__marker") == 1  # instant navigation: no full load
    folded = tab.locator("details", has=tab.locator("summary", has_text="at_length.py, folded"))
    folded.locator(".course-deferred").wait_for(state="attached")  # the new page swapped in
    assert fetched == [] and folded.locator(".course-deferred").count() == 1
    folded.locator("summary").click()
    listing = folded.locator(".highlight", has=tab.locator(".filename", has_text="at_length.py"))
    listing.locator("code").wait_for()
    assert fetched == [f"{base}{LESSON}code/at_length.py.html"]
    assert folded.locator(".course-deferred").count() == 0
    listing.hover()
    listing.locator("button[data-md-type=copy]").click()
    copied = tab.evaluate("navigator.clipboard.readText()")
    context.close()
    assert copied.strip() == folded_source()


def test_without_javascript_a_folded_listing_is_a_link_to_the_code(no_js: object) -> None:
    tab = no_js
    tab.locator("summary", has_text="at_length.py, folded").click()
    tab.get_by_role("link", name="Open at_length.py").click()
    tab.wait_for_url(f"**/{LESSON}code/at_length.py.html")
    assert tab.locator("pre").inner_text().strip() == folded_source()


def test_without_javascript_the_question_and_a_collapsed_answer_remain(no_js: object) -> None:
    tab = no_js
    check = tab.locator("#check-slower")
    check.scroll_into_view_if_needed()  # laid out once near the screen (content-visibility)
    assert check.locator("legend").is_visible()
    answer_block = check.locator("details.course-check__answer")
    assert answer_block.is_visible() and answer_block.get_attribute("open") is None
    expect(check.locator("summary")).to_have_text("Answer")  # once laid out, next frame
    assert check.locator("button[type=submit]").is_hidden()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_no_serious_violation_on_the_lesson_page(page: object, scheme: str) -> None:
    from axe_playwright_python.sync_playwright import Axe

    page.emulate_media(color_scheme=scheme)  # type: ignore[attr-defined]
    page.goto(LESSON)  # type: ignore[attr-defined]
    lay_out_every_block(page)  # first: the page settles before anything scrolls it
    answer(page, "slower", 0)  # the revealed state too
    results = Axe().run(page)
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:5]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert serious == [], "\n".join(serious)


def landing_progress(tab: object) -> str:
    return tab.locator("#lesson-tiny-cache [data-course-lesson-progress]").inner_text()  # type: ignore[attr-defined]


def test_the_landing_page_shows_the_progress_made_on_a_lesson(page: object, base: str) -> None:
    page.goto("")  # type: ignore[attr-defined]
    assert landing_progress(page) == "Not started: 2 checks to answer."
    assert page.locator("[data-course-continue]").is_hidden()  # type: ignore[attr-defined]
    assert (
        page.locator("#lesson-still-to-write")
        .inner_text()
        .startswith(  # type: ignore[attr-defined]
            "1.2 A lesson still to write"
        )
    )
    page.locator(".course-lesson__title a", has_text="1.1 A tiny cache").click()  # type: ignore[attr-defined]
    page.wait_for_url(f"**/{LESSON}")  # type: ignore[attr-defined]
    page.evaluate("window.__marker = 1")  # type: ignore[attr-defined]
    answer(page, "why-two", 1)  # wrong
    # back to the landing page by instant navigation: the widgets run again on the new page
    page.locator(".md-tabs__link", has_text="Course").click()  # type: ignore[attr-defined]
    page.wait_for_url(base)  # type: ignore[attr-defined]
    assert page.evaluate("window.__marker") == 1  # type: ignore[attr-defined]
    assert landing_progress(page) == "1 of 2 checks answered, 0 right."
    resume = page.locator("[data-course-continue] a")  # type: ignore[attr-defined]
    assert resume.inner_text() == "Continue where you left off: 1.1 A tiny cache"
    assert resume.get_attribute("href") == f"/{LESSON}#check-slower"  # the first one unanswered
    resume.click()
    page.wait_for_url(f"**/{LESSON}#check-slower")  # type: ignore[attr-defined]
    answer(page, "slower", 1)  # right
    page.goto("")  # a full load reads the same storage  # type: ignore[attr-defined]
    assert landing_progress(page) == "2 of 2 checks answered, 1 right."
    assert resume.get_attribute("href") == f"/{LESSON}"


def test_without_javascript_the_landing_page_lists_the_lessons(no_js: object) -> None:
    """The landing page's facts are the lesson header's, computed once, readable without JS."""
    tab = no_js
    header = {
        row.locator("dt").inner_text(): row.locator("dd").inner_text()
        for row in tab.locator(".course-lesson-header .course-facts > div").all()
    }
    reading = header["Reading"].split(" (")[0]  # "about 2 min (352 words)"
    hands_on = header["Hands-on"].split(":")[0]  # "about 13 min: the recorded steps took ..."
    cost = header["Hardware and cost"].split("costs ")[1].split(" ")[0]
    tab.goto("")
    lesson = tab.locator("#lesson-tiny-cache")
    assert lesson.locator(".course-lesson__title a").get_attribute("href") == LESSON
    facts = {
        row.locator("dt").inner_text(): row.locator("dd").inner_text()
        for row in lesson.locator(".course-facts > div").all()
    }
    assert facts == {
        "Reading": reading,
        "Hands-on": hands_on,
        "Cost": f"{cost} on an RTX 4090 (renting one)",
        "Numbers from": "NVIDIA H200, 20 November 2026",
        "Downloads": "lab (zip), page (PDF)",
    }
    assert lesson.locator("[data-course-lesson-progress]").is_hidden()
    assert tab.locator("[data-course-continue]").is_hidden()
