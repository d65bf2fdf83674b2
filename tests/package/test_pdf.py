"""The page PDF, printed by `course build` from the fixture lesson (tests/fixtures/site/).

The project is the repository's site machinery plus the fixture lesson and its records, built
twice in two folders (A and B) with the real `build_site`; poppler-utils reads the PDFs back.
"""

from __future__ import annotations

import html
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import LESSON, STEM, WIDE_LINE, inflated

from course.errors import PageError
from course.package.document import Cover, PrintMeta
from course.package.lean import SITE
from course.package.lessons import package_lessons
from course.package.pdf import LocalFetcher, prepare, read_page
from course.pages.widgets import TERMINAL_COLUMNS

PAGE = "part-1/tiny"

if shutil.which("pdftotext") is None:  # tests/run.sh installs poppler-utils
    pytest.skip("poppler-utils (pdftotext) is not installed", allow_module_level=True)


@pytest.fixture(scope="module")
def roots(package_builds: tuple[Path, Path]) -> tuple[Path, Path]:
    return package_builds


@pytest.fixture(scope="module")
def pdf_file(roots: tuple[Path, Path]) -> Path:
    return roots[0] / "site" / "downloads" / f"{STEM}.pdf"


@pytest.fixture(scope="module")
def text(pdf_file: Path) -> str:
    return poppler("pdftotext", str(pdf_file), "-")


def poppler(*args: str) -> str:
    return subprocess.run(args, capture_output=True, text=True, check=True).stdout


def flat(text: str) -> str:
    return " ".join(text.split())


def article(root: Path) -> str:
    page = (root / "site" / PAGE / "index.html").read_text(encoding="utf-8")
    return page[page.index("<article") : page.index("</article>")]


def test_title_measured_numbers_checks_and_answers(roots: tuple[Path, Path], text: str) -> None:
    body = flat(text)
    assert body.startswith("PART 1 · FIXTURES · LESSON 1.1 A tiny cache")
    # every recorded value, as the HTML shows it
    shown = [
        html.unescape(re.sub(r"<[^>]+>", "", v))
        for v in re.findall(r'<span class="course-value"[^>]*>(.*?)</span>', article(roots[0]))
    ]
    assert len(shown) > 15
    for value in shown:
        assert flat(value) in body, value
    assert "Checked on 20 November 2026, with numpy 2.3.4" in body
    # the checks: question and options in place, the answers after all of them
    answers = body.rindex("Answers to the checks")  # the section, after the contents' entry
    for question, answer in [
        (
            "How much faster is decoding at 128 tokens than at 4,096?",
            "The answer is B: Between 1.2 and 2 times faster What the lab measured: 1.55 ×",
        ),
        ("Why is there a factor 2 in the bytes per token?", "The answer is A: Keys and values"),
    ]:
        assert body.index(question) < answers
        assert body.index(answer) > answers
    assert "C. More than twice as fast" in body
    assert "A. Not right. The cache is read at every step" in body[answers:]


def test_a_folded_listing_the_screen_fetches_is_printed_in_full(
    roots: tuple[Path, Path], text: str
) -> None:
    assert "layer_8" not in article(roots[0])  # on screen it comes when unfolded
    body = flat(text)
    for i in range(1, 9):
        assert f"def layer_{i}(tokens: int, heads: int = 8, head_dim: int = 64) -> int:" in body
    assert "return sum(f(tokens) for f in (layer_1," in body


def test_screen_only_parts_are_left_out(text: str) -> None:
    body = flat(text)
    for gone in (
        "Check my answer",
        "Lock in my prediction",
        "Reset my answers",
        "Try again",
        "Downloads",
        "answered right",
        "¶",
        "Skip to content",
        "Search",
    ):
        assert gone not in body, gone


def test_outline_margins_and_metadata(pdf_file: Path, text: str) -> None:
    xml = poppler("pdftohtml", "-xml", "-i", "-stdout", "-q", str(pdf_file))
    outline = re.findall(r'<item page="(\d+)">([^<]*)</item>', xml)
    titles = [t for _, t in outline]
    assert titles[0] == "A tiny cache"
    for heading in (
        "Values",
        "Terminal",
        "Listing",
        "Figure",
        "Checks",
        "Long lines",
        "Answers to the checks",
    ):
        assert heading in titles
    info = poppler("pdfinfo", "-isodates", str(pdf_file))
    assert re.search(r"^Title:\s+A tiny cache$", info, re.MULTILINE)
    assert re.search(r"^Author:\s+LLM inference engineering$", info, re.MULTILINE)
    assert re.search(
        r"^CreationDate:\s+2026-11-20T09:00:00Z?", info, re.MULTILINE
    )  # the record's start
    assert re.search(r"^ModDate:\s+2026-11-20T09:00:00Z?", info, re.MULTILINE)
    assert "(A4)" in info
    assert b"/Lang (en)" in inflated(pdf_file)
    pages = int(re.search(r"^Pages:\s+(\d+)$", info, re.MULTILINE).group(1))  # type: ignore[union-attr]
    # page numbers and the lesson title in the margins
    assert f"Page {pages} of {pages}" in text and f"Page 1 of {pages}" in text
    assert text.count("A tiny cache") >= pages


def test_a_line_as_wide_as_the_terminal_budget_prints_on_one_line(pdf_file: Path) -> None:
    """The PDF's monospace column holds TERMINAL_COLUMNS characters (104 at 7.6 pt on A4): a line
    that wide is one line of the printed text, in the order written."""
    assert len(WIDE_LINE) == TERMINAL_COLUMNS
    layout = poppler("pdftotext", "-layout", str(pdf_file), "-")
    assert " ".join(WIDE_LINE.split()) in [" ".join(line.split()) for line in layout.splitlines()]


def test_long_lines_wrap_inside_the_page(pdf_file: Path, text: str) -> None:
    assert "END-OF-THE-LONG-LINE" in text
    bbox = poppler("pdftotext", "-bbox", str(pdf_file), "-")
    width = float(re.search(r'<page width="([\d.]+)"', bbox).group(1))  # type: ignore[union-attr]
    right = max(float(x) for x in re.findall(r'xMax="([\d.]+)"', bbox))
    assert right < width - 40, "a word runs into the right margin or off the page"


def test_links_stay_clickable_and_outside_addresses_show(pdf_file: Path, text: str) -> None:
    xml = poppler("pdftohtml", "-xml", "-i", "-stdout", "-q", str(pdf_file))
    assert '<a href="https://www.runpod.io/pricing">' in xml
    assert "RunPod (https://www.runpod.io/pricing)" in flat(text)
    # "Answer at the end" links to the answers, with the page they are on
    pages = poppler("pdftotext", "-layout", str(pdf_file), "-").split("\f")
    on = next(
        i
        for i, p in enumerate(pages, start=1)
        if "Answers to the checks" in p and "Contents" not in p  # the section, not its entry
    )
    assert f"Answer at the end, page {on}" in flat(text)


def test_figure_is_a_print_resolution_png(pdf_file: Path, text: str) -> None:
    rows = [line.split() for line in poppler("pdfimages", "-list", str(pdf_file)).splitlines()[2:]]
    images = [r for r in rows if r[2] == "image"]  # the PNG's alpha channel is listed as an smask
    assert len(images) == 1
    width, ppi = int(images[0][3]), int(images[0][12])
    assert width >= 1000 and ppi >= 150  # 1,050 pixels across the text width
    assert "The cache grows by the same amount with every token." in flat(text)


def test_two_builds_give_the_same_bytes_and_pages(roots: tuple[Path, Path]) -> None:
    a, b = (r / "site" / "downloads" / f"{STEM}.pdf" for r in roots)
    assert a.read_bytes() == b.read_bytes()
    count = [
        re.search(r"^Pages:\s+(\d+)", poppler("pdfinfo", str(p)), re.MULTILINE).group(1)
        for p in (a, b)
    ]  # type: ignore[union-attr]
    assert count[0] == count[1]


def test_unchanged_inputs_are_reused_and_changed_ones_remade(
    roots: tuple[Path, Path], tmp_path: Path
) -> None:
    root = tmp_path / "c"
    shutil.copytree(roots[0], root)  # the site and the cache as the build left them
    before = (root / "site" / "downloads" / f"{STEM}.pdf").read_bytes()
    (done,) = package_lessons(root, root / "site")
    assert done.pdf_reused and done.zip_reused
    assert done.pdf.read_bytes() == before
    figure = root / "site" / "assets" / "figures" / LESSON / "tiny_cache.png"
    shutil.copyfile(root / "site" / "assets" / "images" / "favicon.png", figure)
    (done,) = package_lessons(root, root / "site")
    assert not done.pdf_reused and not done.zip_reused
    assert done.pdf_pages and done.pdf_seconds > 0


def test_the_fetcher_reads_only_files_of_the_site(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "ok.png").write_bytes(b"png")
    (tmp_path / "secret.txt").write_text("no")
    fetcher = LocalFetcher(site)
    assert fetcher.fetch((site / "ok.png").as_uri()).read() == b"png"
    assert fetcher.fetch(SITE + "ok.png").read() == b"png"
    for url in (
        "https://example.org/x.png",
        "http://127.0.0.1/",
        (tmp_path / "secret.txt").as_uri(),
        (site / ".." / "secret.txt").as_uri(),
        SITE + "../secret.txt",
        SITE + "%2e%2e/secret.txt",
    ):
        with pytest.raises(ValueError, match="refused"):
            fetcher.fetch(url)


def test_errors_name_the_page(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "p").mkdir(parents=True)
    with pytest.raises(PageError, match=r"site/q/index.html: no such page"):
        read_page(site, "q/")
    (site / "p" / "index.html").write_text("<html><body><main>no article</main></body></html>")
    with pytest.raises(PageError, match=r"site/p/index.html: no <article"):
        read_page(site, "p/")
    (site / "p" / "index.html").write_text(
        '<html><body><article class="md-content__inner md-typeset"><img src="gone.png" alt="x">'
        "</article></body></html>"
    )
    with pytest.raises(
        PageError, match=r"site/p/index.html: image 'gone.png' is not in the built site"
    ):
        read_page(site, "p/")


def test_a_page_without_the_lesson_header_gets_the_fallback_cover(tmp_path: Path) -> None:
    site = tmp_path / "site"
    (site / "p").mkdir(parents=True)
    (site / "p" / "index.html").write_text(
        '<html><body><nav>menu</nav><article class="md-content__inner md-typeset">'
        '<a class="md-content__button" href="https://example.org/edit">Edit</a><h1>Plain</h1>'
        '<p>See <a href="../other/">another page</a> and <a href="https://example.org/">this</a>.</p>'
        '<div class="highlight"><pre><span></span><code><span '
        'class="k">print</span>(1)</code></pre></div>'
        "</article></body></html>"
    )
    meta = PrintMeta(author="a", course="c", date="2026-11-20T09:00:00Z", page_url="p/")
    page = read_page(site, "p/")
    assert "<span" not in page.article.split("<code>")[1]  # listings print as plain text
    document = prepare(page, Cover(title="Fallback", facts=(("Time", "5 min"),)), meta).html
    assert (
        '<h1 class="print-cover__title">Fallback</h1>' in document and "<h1>Plain" not in document
    )
    assert "menu" not in document and "Edit" not in document
    assert "<a>another page</a>" in document  # no published address: printed as text
    assert '<a href="https://example.org/" class="print-external">this</a>' in document
    assert (
        '<div class="highlight print-keep"><pre><span></span><code>print(1)</code></pre></div>'
        in document
    )
    with_site = PrintMeta(
        author="a",
        course="c",
        date="2026-11-20T09:00:00Z",
        page_url="p/",
        site_url="https://course.example.org/",
    )
    assert (
        'href="https://course.example.org/other/"'
        in prepare(page, Cover(title="F"), with_site).html
    )


def test_the_cover_names_the_lab_zip_and_a_contents_page_lists_the_sections(text: str) -> None:
    assert f"The lab, to run it yourself: downloads/{STEM}.zip" in flat(text)
    contents = text.split("Contents", 1)[1].split("\f", 1)[0]
    # each section heading with a dotted leader and the page it starts on
    assert re.search(r"Questions people ask \.+ ?\d+", contents), contents
    # and the answers to the checks, printed after the last section
    assert re.search(r"Answers to the checks \.+ ?\d+", contents), contents
