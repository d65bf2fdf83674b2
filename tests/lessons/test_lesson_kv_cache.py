"""Lesson 2.4 as it ships: step 1 re-run on this CPU machine, and the page built from the committed
record.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import COURSE, REPO, chromium_browser, lay_out_every_block

from course.pages.choose import newest_page_run
from course.record.store import Store

PAGE = "part-2/kv-cache/"


def test_step_one_reruns_on_a_cpu_machine(tmp_path: Path) -> None:
    shutil.copytree(
        REPO / "lab" / "kv-cache",
        tmp_path / "lab" / "kv-cache",
        ignore=shutil.ignore_patterns("results", "__pycache__"),
    )
    shutil.copytree(  # the lab kit it includes (`include: [../common/labkit]`)
        REPO / "lab" / "common",
        tmp_path / "lab" / "common",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    done = subprocess.run(
        [*COURSE, "--root", str(tmp_path), "run", "kv-cache", "--only", "size"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    (run,) = Store(tmp_path / "build").runs("kv-cache")
    assert run.record.status == "partial" and run.run_id.endswith("-cpu")
    size = run.record.step("size")
    assert size.values["bytes_per_token_06b"].value == 114_688
    assert size.values["bytes_per_token_8b"].value == 147_456
    assert size.values["cache_4096_06b"].value == 448 * 1024**2
    assert "114,688 bytes per token" in run.transcript("size") and "448.0 MiB" in run.transcript(
        "size"
    )
    # the same numbers as the committed H200 run: step 1 is pure arithmetic
    h200 = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert h200 is not None
    assert {k: v.value for k, v in size.values.items()} == {
        k: v.value for k, v in h200.record.step("size").values.items()
    }


@pytest.fixture(scope="module")
def site(repo_site: tuple[Path, str]) -> tuple[Path, str]:
    """The repository's site, built from the committed records and served (conftest.py)."""
    return repo_site


def test_the_lesson_page_is_built_from_the_newest_good_run(site: tuple[Path, str]) -> None:
    site_dir, _ = site
    html = (site_dir / PAGE / "index.html").read_text(encoding="utf-8")
    newest = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert newest is not None
    sources = set(re.findall(r'data-source="([^"]+)"', html))
    from_newest = {s for s in sources if s.startswith(newest.run_id + "/")}
    assert (
        len(from_newest) > 40
    )  # every number of the prose, checks and FAQ comes from the newest run
    older = {
        s.split("/")[0] for s in sources if "/" in s and not s.startswith(("lab/", newest.run_id))
    }
    assert older == set()  # the run history belongs to the authors' pages, not the lesson
    assert "course-error" not in html
    assert html.count('class="course-check') >= 9
    assert (site_dir / "downloads" / "lesson-2.4.pdf").is_file() and (
        site_dir / "downloads" / "lesson-2.4.zip"
    ).is_file()
    assert '"@type": "FAQPage"' in html or '"@type":"FAQPage"' in html


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_axe_finds_nothing_serious_on_the_kv_cache_page(
    site: tuple[Path, str], scheme: str
) -> None:
    from axe_playwright_python.sync_playwright import Axe

    _, base = site
    with chromium_browser() as browser:
        tab = browser.new_page(base_url=base)
        tab.emulate_media(color_scheme=scheme)
        tab.goto(PAGE)
        lay_out_every_block(tab)  # first: the page settles before anything scrolls it
        check = tab.locator('[data-check="allocator"]')
        check.locator("input[type=radio]").first.check()
        check.locator("button[type=submit]").click()
        assert tab.locator('[data-check="allocator"] [role=status]').inner_text().strip() != ""
        results = Axe().run(tab)
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:5]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert serious == [], "\n".join(serious)


INSTALL = re.compile(r"^\s*(?:\$\s*)?pip install (.+)$", re.MULTILINE)


def install_lines(text: str) -> list[list[str]]:
    """Every `pip install …` line of a text, as its arguments (quotes removed)."""
    import shlex

    return [shlex.split(m.group(1).split("#")[0]) for m in INSTALL.finditer(text)]


def test_every_install_line_names_real_extras_and_the_recorded_versions(
    site: tuple[Path, str],
) -> None:
    import html as html_module
    import tomllib
    import zipfile

    site_dir, _ = site
    run = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert run is not None
    native = {"llama.cpp"}  # a build, not a pip package: never pinned in an install line
    recorded = {f"{n}=={v}" for n, v in run.record.engine.items() if v and n not in native}
    pyproject = tomllib.loads((REPO / "lab/kv-cache/pyproject.toml").read_text(encoding="utf-8"))
    extras = set(pyproject["project"]["optional-dependencies"])
    page = html_module.unescape(
        re.sub(r"<[^>]+>", "", (site_dir / PAGE / "index.html").read_text(encoding="utf-8"))
    )
    with zipfile.ZipFile(site_dir / "downloads" / "lesson-2.4.zip") as archive:
        start = archive.read("lesson-2.4/START-HERE.md").decode("utf-8")
    readme = (REPO / "lab/kv-cache/README.md").read_text(encoding="utf-8")
    sources = {"page": page, "START-HERE.md": start, "lab README": readme}
    seen = 0
    for where, text in sources.items():
        for args in install_lines(text):
            seen += 1
            for arg in args:
                named = re.fullmatch(r"\.\[([\w,-]+)\]", arg)
                if named:
                    missing = set(named.group(1).split(",")) - extras
                    assert not missing, f"{where}: pip install {arg}: no extra {missing}"
                elif "==" in arg:
                    assert arg in recorded, f"{where}: {arg} is not the recorded {recorded}"
    # the page and START-HERE install the lab and pin every recorded engine in one command
    for where in ("page", "START-HERE.md"):
        lines = install_lines(sources[where])
        assert any(".[all]" in a and recorded <= set(a) for a in lines), where
    assert seen >= 3
    # START-HERE.md quotes each GPU step's peak GPU memory from the same record
    for step in ("gpu-check", "prefix-reuse", "decode-speed"):
        peak = run.record.step(step).values["peak_gpu_memory_reserved"].value
        section = start.split(f": {step}")[1].split("## Step")[0]
        assert f"its peak GPU memory was {float(peak) / 2**30:.1f} GiB" in section, step


def test_the_large_blocks_are_laid_out_when_they_come_near_the_screen(
    site: tuple[Path, str],
) -> None:
    """Terminals, checks, figures and folded notes skip layout while far from the screen (the
    start-up's main-thread time on a phone), and show whole once scrolled to."""
    _, base = site
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        page.goto(base + PAGE)
        blocks = ".md-typeset > :is(.course-terminal, .course-check, .course-figure, details)"
        kinds = page.evaluate(
            f"""() => [...document.querySelectorAll('{blocks}')]
                 .map(b => getComputedStyle(b).contentVisibility)"""
        )
        assert len(kinds) > 20 and set(kinds) == {"auto"}
        last = page.locator(".md-typeset > .course-terminal").last
        assert last.inner_text() == ""  # far below the first screen: not laid out yet
        last.scroll_into_view_if_needed()
        page.wait_for_function(
            "() => [...document.querySelectorAll('.md-typeset > .course-terminal')].pop()"
            ".innerText.includes('$')"
        )
        assert last.bounding_box()["height"] > 50
        page.emulate_media(media="print")  # printed, every block is laid out
        assert page.evaluate(
            f"""() => [...document.querySelectorAll('{blocks}')]
                 .every(b => getComputedStyle(b).contentVisibility === 'visible')"""
        )


def test_the_palette_mark_is_on_the_body_before_the_bundle_runs_and_gone_after_it(
    site: tuple[Path, str],
) -> None:
    """The body carries the palette switch's mark (data-md-color-switching) from the start, so
    that the bundle's own setting restyles nothing; the bundle still takes it off after its
    first frame, and transitions work again."""
    _, base = site
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": 390, "height": 844})
        # parsing is done and the deferred bundle has not run yet
        page.add_init_script(
            """document.addEventListener('readystatechange', () => {
                 if (document.readyState === 'interactive') window.__marked = {
                   mark: document.body.hasAttribute('data-md-color-switching'),
                   bundle: document.body.hasAttribute('data-md-color-media')};
               });"""
        )
        page.goto(base + PAGE)
        page.wait_for_function(
            "() => document.body.hasAttribute('data-md-color-media')"
            " && !document.body.hasAttribute('data-md-color-switching')"
        )
        assert page.evaluate("window.__marked") == {"mark": True, "bundle": False}
        transition = page.evaluate(
            "() => getComputedStyle(document.querySelector('.md-header')).transitionDuration"
        )
        assert any(float(d.rstrip("s")) > 0 for d in transition.split(",")), transition


@pytest.mark.parametrize("width", [390, 1280])
def test_nothing_overflows_the_page(site: tuple[Path, str], width: int) -> None:
    _, base = site
    with chromium_browser() as browser:
        page = browser.new_page(viewport={"width": width, "height": 900})
        page.goto(base + PAGE)
        widths = page.evaluate(
            """() => {
              const W = document.documentElement.clientWidth;
              const scrolls = el => ['auto', 'scroll'].includes(getComputedStyle(el).overflowX);
              const outside = [];
              for (const el of document.querySelectorAll('article *')) {
                let box = el.parentElement, inScroller = false;
                while (box && box !== document.body) {
                  if (scrolls(box)) { inScroller = true; break; }
                  box = box.parentElement;
                }
                if (!inScroller && el.getBoundingClientRect().right > W + 1)
                outside.push(el.tagName);
              }
              const pres = [...document.querySelectorAll('.course-terminal pre')];
              return {page: document.documentElement.scrollWidth, W, outside,
                      cut: pres.filter(p => p.scrollWidth > p.clientWidth + 1).length};
            }"""
        )
    assert widths["page"] <= widths["W"] and widths["outside"] == []
    # terminal lines: tests/lessons/test_learner_path.py (no wrapping, and the width budget)
