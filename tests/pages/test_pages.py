"""The site built with real mkdocs from the fixture lesson (tests/fixtures/site/) and inspected.

The fixture project is the repository's own site machinery (mkdocs.yml, macros/, overrides/,
docs/) plus a small lesson, its lab and three hand-made records: an older good run, the newest
good run the page uses, and a newer failed run the page must ignore.
"""

from __future__ import annotations

import html
import json
import re
import time
from html.parser import HTMLParser

import pytest
from support import OLDER, REPO, RUN, make_project

from course.site import BuildResult, build_site, check_site

FACTS = """
## Facts

PyTorch sees {{ fact("cards.rtx-4090.torch_total") }}, nvidia-smi
{{ fact("cards.rtx-4090.smi_total", unit="GiB", decimals=2) }}; vLLM takes
{{ fact("engines.vllm.gpu_memory_utilization", percent=True, decimals=0) }} of it. An H200 hour:
{{ fact("cards.h200.prices.runpod-community") }}. Key-value heads:
{{ fact("models.qwen3-8b.num_key_value_heads") }}. Measured: {{ fact("cards.h200.torch_total", unit="GiB") }}.
"""  # noqa: E501 - page lines as an author writes them
FACT = re.compile(
    r'<span class="course-value course-fact" data-fact="([^"]*)" title="([^"]*)">(.*?)</span>'
)
INLINE = """

## Inline claims

Decoding at 4,096 tokens is {% call claim("decode.tps_short > decode.tps_long") %}slower than at
128{% endcall %}, as the chat grows, and the short run is
{{ claim("decode.tps_short > decode.tps_long", "the faster one") }} of the two.
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> BuildResult:
    root = make_project(tmp_path_factory.mktemp("pages") / "project")
    tiny = root / "docs" / "part-1" / "tiny.md"
    tiny.write_text(tiny.read_text(encoding="utf-8") + FACTS + INLINE, encoding="utf-8")
    return build_site(root, root / "site")


def page(built: BuildResult, url: str) -> str:
    return (built.site_dir / url / "index.html").read_text(encoding="utf-8")


def article(built: BuildResult, url: str) -> str:
    text = page(built, url)
    return text[text.index("<article") : text.index("</article>")]


VALUE = re.compile(
    r'<span class="course-value" data-source="([^"]*)"(?: data-expr="([^"]*)")?(?: '
    r'title="[^"]*")?>(.*?)</span>'
)


def values(fragment: str) -> list[tuple[str, str, str]]:
    """(source, expression, shown text) of every inserted value."""
    return [(s, html.unescape(e or ""), html.unescape(t)) for s, e, t in VALUE.findall(fragment)]


def shown(fragment: str, source: str) -> list[str]:
    return [t for s, _, t in values(fragment) if s == source]


def section(fragment: str, heading_id: str) -> str:
    start = fragment.index(f'id="{heading_id}"')
    nxt = fragment.find("<h2", start)
    return fragment[start : nxt if nxt > 0 else None]


def test_build_names_each_lesson_page_with_its_run(built: BuildResult) -> None:
    by_src = {p.src: p for p in built.pages}
    assert set(by_src) == {"part-1/tiny.md", "part-1/pinned.md"}
    assert by_src["part-1/tiny.md"].run_id == RUN  # the newer failed run is skipped
    assert by_src["part-1/pinned.md"].run_id == OLDER
    assert by_src["part-1/tiny.md"].html == built.site_dir / "part-1/tiny/index.html"
    assert by_src["part-1/tiny.md"].lesson == "tiny-cache"


def test_values_are_formatted_and_name_their_source(built: BuildResult) -> None:
    values_part = section(article(built, "part-1/tiny"), "values")
    nbsp = "\u00a0"
    assert shown(values_part, f"{RUN}/size.bytes_per_token") == [f"114,688{nbsp}B", f"112{nbsp}KiB"]
    assert shown(values_part, f"{RUN}/size.cache_bytes") == [f"0.438{nbsp}GiB"]
    assert shown(values_part, f"{RUN}/size.layers") == ["28"]
    assert shown(values_part, f"{RUN}/decode.tps_short")[0] == f"312.4{nbsp}tok/s"
    assert shown(values_part, f"{RUN}/decode.ms_long") == [f"0.0050{nbsp}s"]
    assert shown(values_part, f"{RUN}/decode.model") == ["tiny"]
    derived = {e: t for _, e, t in values(values_part) if e}
    assert derived["size.bytes_per_token * size.tokens"] == f"448{nbsp}MiB"
    assert derived["decode.tps_short / decode.tps_long"] == f"1.55{nbsp}×"
    assert derived["decode.tps_long / decode.tps_short"] == f"64.6{nbsp}%"
    product = next(
        s for s, e, _ in values(values_part) if e == "size.bytes_per_token * size.tokens"
    )
    assert product.split() == [f"{RUN}/size.bytes_per_token", f"{RUN}/size.tokens"]


def test_facts_are_formatted_like_values_with_source_and_date(built: BuildResult) -> None:
    found = {
        name: (html.unescape(title), html.unescape(text))
        for name, title, text in FACT.findall(section(article(built, "part-1/tiny"), "facts"))
    }
    nbsp = "\u00a0"
    assert {name: text for name, (_, text) in found.items()} == {
        "cards.rtx-4090.torch_total": f"23.52{nbsp}GiB",
        "cards.rtx-4090.smi_total": f"23.99{nbsp}GiB",
        "engines.vllm.gpu_memory_utilization": f"92{nbsp}%",
        "cards.h200.prices.runpod-community": "$3.59",
        "models.qwen3-8b.num_key_value_heads": "8",
        "cards.h200.torch_total": f"139.8{nbsp}GiB",
    }
    title = {name: title for name, (title, _) in found.items()}
    assert title["cards.h200.torch_total"].startswith(
        "measured in run 2026-11-30T055036Z-h200 (gpu-memory, paged.total), 30 November 2026."
    )
    assert title["engines.vllm.gpu_memory_utilization"].startswith(
        "https://github.com/vllm-project/vllm/pull/38284, read 1 December 2026."
    )
    assert title["cards.h200.prices.runpod-community"] == (
        "RunPod, H200, community cloud, per GPU-hour; https://www.runpod.io/pricing,"
        " read 25 September 2026"
    )
    assert title["models.qwen3-8b.num_key_value_heads"] == (
        "https://huggingface.co/Qwen/Qwen3-8B/blob/main/config.json, read 29 November 2026"
    )


def test_thousands_separators_can_be_turned_off(built: BuildResult) -> None:
    assert "202\u00a0tok/s" in shown(article(built, "part-1/tiny"), f"{RUN}/decode.tps_long")


def test_pinned_page_reads_its_named_run(built: BuildResult) -> None:
    assert shown(article(built, "part-1/pinned"), f"{OLDER}/decode.tps_short") == [
        "300.0\u00a0tok/s"
    ]


def test_every_number_in_a_claim_comes_from_the_record(built: BuildResult) -> None:
    text = article(built, "part-1/tiny")
    claims = re.findall(
        r'<span class="course-claim" data-claim="([^"]*)" data-claim-state="(\w+)">', text
    )
    assert len(claims) == 7 and {state for _, state in claims} == {"holds"}
    assert html.unescape(claims[0][0]) == "decode.tps_short > decode.tps_long"


def test_a_claim_inside_a_sentence_stays_in_its_paragraph(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "inline-claims")
    paragraphs = re.findall(r"<p>(.*?)</p>", text, re.DOTALL)  # then the page's "Next"
    words = re.sub(r"<[^>]+>", "", paragraphs[0]).split()
    assert " ".join(words) == (
        "Decoding at 4,096 tokens is slower than at 128, as the chat grows, and the short run is "
        "the faster one of the two."
    )
    assert paragraphs[0].count('<span class="course-claim"') == 2  # one sentence, two claims


def test_terminal_shows_prompt_command_and_escaped_output(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "terminal")
    assert '<kbd class="course-terminal__command">python3 size.py</kbd>' in text
    assert "cache: 469,762,048 bytes" in text
    assert "&lt;script&gt;alert(&quot;not run&quot;)&lt;/script&gt;" in text
    assert "loading weights &lt;fast&gt; &amp; warming up" in text
    assert "<script>alert" not in page(built, "part-1/tiny")


def test_terminal_lines_leave_a_visible_mark(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "terminal")
    decode = text[text.index(f'data-source="{RUN}/decode"') :]
    assert "[… 8 lines left out …]" in decode
    assert "step 1: ok" not in decode and "short: 312.4 tok/s" in decode


def test_listing_has_line_count_highlighting_and_copy(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "listing")
    assert shown(text, "lab/tiny-cache/size.py") == ["13 lines"]
    assert '<span class="filename">size.py · 13 lines</span>' in text
    assert '<span class="n">per_token</span>' in text  # highlighted by Pygments
    config = json.loads(
        re.search(
            r'<script id="__config" type="application/json">(.*?)</script>',
            page(built, "part-1/tiny"),
            re.DOTALL,
        ).group(1)
    )
    assert "content.code.copy" in config["features"]


def test_a_folded_listing_is_a_link_to_its_own_file_and_out_of_the_search_index(
    built: BuildResult,
) -> None:
    text = section(article(built, "part-1/tiny"), "listing")
    assert "layer_8" not in text  # the code is not in the page
    assert '<a href="code/at_length.py.html">Open at_length.py</a>' in text
    block = (built.site_dir / "part-1/tiny/code/at_length.py.html").read_text(encoding="utf-8")
    assert block.startswith('<div class="highlight"><span class="filename">at_length.py</span>')
    assert '<span class="nf">layer_8</span>' in block  # highlighted by Pygments
    index = (built.site_dir / "search/search_index.json").read_text(encoding="utf-8")
    assert "layer_8" not in index and "per_token" in index  # the open listing stays searchable


def test_figure_is_drawn_as_svg_and_png_with_alt_text(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "figure")
    assert 'src="../../assets/figures/tiny-cache/tiny_cache.svg"' in text
    assert (
        'alt="A straight line rising from 0 MiB at 0 tokens to 448 MiB at 4,096 tokens (0.109 MiB '
        'a token, 65 % of the short speed at the end)."'
    ) in text  # recorded numbers in alt text, by `{expression:decimals unit}`
    assert "<figcaption>The cache grows" in text
    svg = built.site_dir / "assets/figures/tiny-cache/tiny_cache.svg"
    png = built.site_dir / "assets/figures/tiny-cache/tiny_cache.png"
    assert svg.read_text().lstrip().startswith("<?xml") and png.read_bytes()[:4] == b"\x89PNG"


def test_checks_are_forms_with_a_static_answer(built: BuildResult) -> None:
    text = section(article(built, "part-1/tiny"), "checks")
    predict = text[text.index('id="check-slower"') : text.index('id="check-why-two"')]
    assert 'data-kind="predict"' in predict and 'data-right="1"' in predict  # decided by the record
    assert predict.count('type="radio"') == 3 and "<legend>" in predict
    assert 'role="status" aria-live="polite"' in predict
    assert '<details class="course-check__answer"><summary>Answer</summary>' in predict
    assert "The answer is <strong>B</strong>" in predict
    assert [t for _, _, t in values(predict)] == [
        "1.55",
        "1.55",
    ]  # hidden until revealed, and static


def test_header_facts_are_computed(built: BuildResult) -> None:
    text = article(built, "part-1/tiny")
    header = text[text.index("<header") : text.index("</header>")]
    assert '<p class="course-kicker">Part 1 · Fixtures · Lesson 1.1</p>' in header
    assert "<h1>A tiny cache</h1>" in header
    # 1.2 s + 95.3 s of steps, 240 s of installs, 300 s of downloads, 2 × 60 s of typing: 756.5 s
    assert (
        "about 13 min: the recorded steps took 1 min 36 s, plus 4 min of installs, 5 min of "
        "downloads and 2 min to read and type each step (a minute a step)" in header
    )
    # recorded on an H200, priced on the card a learner rents: 756.5 s at $0.34 and at $0.89 an
    # hour (RunPod's community cloud, read 2026-09-25, and secure cloud, read 2026-11-13)
    assert "Our numbers come from an NVIDIA H200. To run the lab yourself, rent an RTX 4090" in (
        header
    )
    assert "$0.34–$0.89 per hour, so the hands-on part costs $0.07–$0.19" in header
    assert "RunPod</a> community cloud $0.34 (read 25 Sep 2026)" in header
    assert "RunPod</a> secure cloud $0.89 (read 13 Nov 2026)" in header
    assert "community cloud: GPUs of hosts RunPod has vetted, the cheaper offer" in header
    assert '<a href="../../before-you-start/">Before you start</a>' in header
    assert "20 November 2026, with numpy 2.3.4" in header and "NVIDIA H200" in header
    assert re.search(r"about \d+ min \([\d,]+ words\)", header)
    assert (
        'href="../../downloads/lesson-1.1.zip"' in header
        and 'href="../../downloads/lesson-1.1.pdf"' in header
    )
    assert "0 of 2 checks answered right" in header
    assert '<a href="../../writing-a-lesson/">Writing a lesson</a>' in text


def test_faq_is_on_the_page_and_in_json_ld(built: BuildResult) -> None:
    full = page(built, "part-1/tiny")
    data = json.loads(
        re.search(r'<script type="application/ld\+json">(.*?)</script>', full, re.DOTALL).group(1)
    )
    kinds = {item["@type"]: item for item in data["@graph"]}
    assert kinds["LearningResource"]["name"] == "A tiny cache"
    assert kinds["LearningResource"]["timeRequired"].startswith("PT")
    questions = kinds["FAQPage"]["mainEntity"]
    assert questions[0]["name"] == "How big is the cache for one token?"
    assert questions[0]["acceptedAnswer"]["text"] == "114,688 B, which is 112 KiB."
    assert 'id="how-big-is-the-cache-for-one-token"' in full


def test_glossary_and_provenance(built: BuildResult) -> None:
    text = article(built, "part-1/tiny")
    assert '<dt id="term-kv-cache">KV cache</dt>' in text
    assert (
        "on 20 November 2026 on an NVIDIA H200 (driver 570.86.15, CUDA 12.8, Python 3.11.7)" in text
    )
    assert "The outputs on this page come from one run of this lesson's lab on" in text
    assert "course run" not in text  # the learner has no such command


def test_navigation_by_part_and_lesson(built: BuildResult) -> None:
    home = page(built, "")
    for label in (
        "Part 1 · Fixtures",
        "1.1 · A tiny cache",
        "For authors",
        "Writing a lesson",
        "A pinned run",
    ):
        assert label in home
    assert "1.2 · A lesson still to write" not in home  # coming: on the landing page, not in nav


class _Urls(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.found: list[tuple[str, str, str]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        rel = dict(attrs).get("rel") or ""
        for name, value in attrs:
            if value and re.match(r"\s*(https?:)?//", value):
                self.found.append((tag if tag != "link" else f"link rel={rel}", name, value))


def test_the_built_site_loads_nothing_from_outside(built: BuildResult) -> None:
    """List every external URL in the output; only links a reader may follow are allowed."""
    urls: list[tuple[str, str, str, str]] = []
    for path in sorted(built.site_dir.rglob("*")):
        rel = path.relative_to(built.site_dir).as_posix()
        if path.suffix == ".html":
            parser = _Urls()
            parser.feed(path.read_text(encoding="utf-8"))
            urls += [(rel, *found) for found in parser.found]
        elif path.suffix in (".css", ".svg"):
            text = path.read_text(encoding="utf-8")
            urls += [
                (rel, "css", "url", u)
                for u in re.findall(r"url\(\s*['\"]?((?:https?:)?//[^)'\"]+)", text)
            ]
            urls += [
                (rel, "css", "@import", u) for u in re.findall(r"@import\s+['\"]?([^;'\"]+)", text)
            ]
            if path.suffix == ".svg":
                urls += [
                    (rel, "svg", "href", u)
                    for u in re.findall(r'href="((?:https?:)?//[^"]+)"', text)
                ]
    print("\n".join(sorted({" ".join(u[1:]) for u in urls})))  # every external URL, once
    followed = {("a", "href"), ("link rel=canonical", "href")}  # links, not loads
    # an xmlns names a namespace and a title is text (a fact's tooltip names its source): neither
    # is ever fetched
    loaded = [u for u in urls if (u[1], u[2]) not in followed and u[2] not in ("xmlns", "title")]
    assert loaded == []
    assert not re.search(r"https?://", (built.site_dir / "assets/course.js").read_text())
    assert "fonts.googleapis" not in page(built, "")


def test_check_runs_without_html_in_seconds(built: BuildResult) -> None:
    root = built.site_dir.parent
    started = time.perf_counter()
    count, problems = check_site(root)
    assert problems == [] and count == len(list((root / "docs").rglob("*.md")))
    assert time.perf_counter() - started < 5


# The repository's own site, built from its committed records on a fresh clone (home, the
# authors' pages and every lesson page), is tested with a new lesson added to it:
# tests/scaffold/test_new.py, `course new demo && course run demo && course build`.


def test_writing_a_lesson_shows_every_macro_with_an_example() -> None:
    from course.pages.macros import MACROS

    text = (REPO / "docs/writing-a-lesson.md").read_text(encoding="utf-8")
    missing = [
        name for name in MACROS if f"{{{{ {name}(" not in text and f"{{% call {name}(" not in text
    ]
    assert missing == []
