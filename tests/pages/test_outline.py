"""The course outline, docs/course.yml: numbers from the order, coming lessons, the two sides of the
navigation, links between lessons checked by the build, and `add_lesson` for `course new`."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.errors import PageError
from course.pages.lessons import navigation
from course.pages.outline import load_outline
from course.pages.outline_edit import add_lesson
from course.site import check_site

OUTLINE = """\
# The outline, as an author keeps it: comments stay where they are.
parts:
  - number: 2
    title: The maths of one request
    first: 3  # 2.1 and 2.2 are not announced yet
    lessons:
      - {id: prefill-decode, title: Prefill and decode}
      - {id: kv-cache, title: The KV cache}
      # gpu-memory follows once it is planned

# the authors' side
authors: [writing-a-lesson.md]
"""


def docs_with(tmp_path: Path, outline: str, pages: dict[str, str]) -> Path:
    docs = tmp_path / "docs"
    docs.mkdir(parents=True)
    (docs / "course.yml").write_text(outline, encoding="utf-8")
    for src, text in pages.items():
        (docs / src).parent.mkdir(parents=True, exist_ok=True)
        (docs / src).write_text(text, encoding="utf-8")
    return docs


def test_numbers_come_from_the_order_and_unwritten_lessons_are_coming(tmp_path: Path) -> None:
    docs = docs_with(tmp_path, OUTLINE, {"part-2/kv-cache.md": "---\nlesson: kv-cache\n---\n"})
    outline = load_outline(docs)
    shown = [(x.number, x.id, x.src, x.written) for x in outline.lessons]
    assert shown == [
        ("2.3", "prefill-decode", "part-2/prefill-decode.md", False),
        ("2.4", "kv-cache", "part-2/kv-cache.md", True),
    ]
    kv = outline.lesson("kv-cache")
    assert (kv.part, kv.label, kv.url, kv.download_stem) == (
        "Part 2 · The maths of one request",
        "2.4 · The KV cache",
        "part-2/kv-cache/",
        "lesson-2.4",
    )
    (docs / "part-2/prefill-decode.md").write_text("written now\n", encoding="utf-8")
    assert load_outline(docs).lesson("prefill-decode").written  # linked from the next build on


def test_an_outline_with_mistakes_names_each_one(tmp_path: Path) -> None:
    bad = """\
parts:
  - title: One
    lesons: []
  - number: 1
    title: Two
    lessons:
      - {id: a-lesson, title: A}
      - {id: a-lesson, title: Again}
      - {id: Not_An_Id, title: B}
"""
    docs = docs_with(tmp_path, bad, {})
    with pytest.raises(PageError) as caught:
        load_outline(docs)
    assert str(caught.value) == (
        "docs/course.yml: 2 problems:\n"
        "  - parts.0.lesons: unknown key (did you mean 'lessons'?)\n"
        "  - parts.1.lessons.2.id: String should match pattern '^[a-z0-9][a-z0-9-]*$'"
    )
    docs_with(tmp_path / "b", bad.replace("lesons", "lessons").replace("Not_An_Id", "b"), {})
    with pytest.raises(PageError) as caught:
        load_outline(tmp_path / "b" / "docs")
    assert str(caught.value) == (
        "docs/course.yml: 1 problem:\n"
        "  - (top): part number 1 is used twice; lesson id 'a-lesson' is listed twice"
    )


def test_front_matter_may_repeat_the_outline_but_not_contradict_it(tmp_path: Path) -> None:
    page = '---\ntitle: The KV cache\nnumber: "2.5"\n---\n'
    docs = docs_with(tmp_path, OUTLINE, {"part-2/kv-cache.md": page, "index.md": "# Home\n"})
    with pytest.raises(PageError) as caught:
        navigation(docs)
    assert str(caught.value) == (
        "docs/part-2/kv-cache.md: front matter says number: '2.5', but docs/course.yml makes it "
        "'2.4' (remove `number:` from the front matter: the outline decides it)"
    )


def test_a_lesson_page_the_outline_does_not_list_fails(tmp_path: Path) -> None:
    pages = {
        "index.md": "# Home\n",
        "part-2/gpu-memory.md": "---\nlesson: gpu-memory\n---\n",
        "old/kv.md": "---\nlesson: kv-cache\n---\n",
        "old/kept.md": "---\nlesson: kv-cache\nsection: Archive\n---\n",
    }
    docs = docs_with(tmp_path, OUTLINE, pages)
    with pytest.raises(PageError) as caught:
        navigation(docs)
    (docs.parent / "mkdocs.yml").write_text("site_name: x\n")
    _, problems = check_site(docs.parent)  # `course check` finds the same
    found = {f"{p.page}: {p.message}" for p in problems if p.call == "(docs/course.yml)"}
    assert found == set(str(caught.value).splitlines())
    assert str(caught.value).splitlines() == [
        "docs/old/kv.md: names lesson 'kv-cache', but docs/course.yml lists lesson 'kv-cache' with "
        "the page docs/part-2/kv-cache.md: list it there, or give the page a `section:` to place "
        "it on the authors' side",
        "docs/part-2/gpu-memory.md: names lesson 'gpu-memory', but docs/course.yml does not list "
        "lesson 'gpu-memory': list it there, or give the page a `section:` to place it on the "
        "authors' side",
        "docs/course.yml: authors: page docs/writing-a-lesson.md does not exist",
    ]


def test_navigation_holds_the_course_then_the_authors_side(tmp_path: Path) -> None:
    pages = {
        "index.md": "# Home\n",
        "part-2/kv-cache.md": "---\nlesson: kv-cache\n---\n",
        "writing-a-lesson.md": "---\ntitle: Writing a lesson\n---\n",
        "operations.md": "# Ops\n",
        "old/kept.md": "---\ntitle: Old run\nlesson: kv-cache\nsection: Archive\n---\n",
    }
    docs = docs_with(tmp_path, OUTLINE, pages)
    assert navigation(docs) == [
        {
            "Course": [
                "index.md",
                {
                    "Part 2 · The maths of one request": [
                        {"2.4 · The KV cache": "part-2/kv-cache.md"}
                    ]
                },
            ]
        },
        {
            "For authors": [
                {"Writing a lesson": "writing-a-lesson.md"},
                {"Operations": "operations.md"},
                {"Archive": [{"Old run": "old/kept.md"}]},
            ]
        },
    ]


# -- links between lessons, on a project with two written lessons --------------------------------


@pytest.fixture(scope="module")
def two(two_lessons: Path) -> Path:
    return two_lessons


def article(root: Path, url: str) -> str:
    text = (root / "site" / url / "index.html").read_text(encoding="utf-8")
    return text[text.index("<article") : text.index("</article>")]


def test_read_first_and_next_are_links_or_coming(two: Path) -> None:
    first = article(two, "part-1/tiny")
    assert (
        '<p><strong>Read first:</strong> <a class="course-lesson-link" href="../../part-1/'
        'tiny-two/">1.2 A second tiny lesson</a>: the same again, <a class="course-coming" '
        'href="../../#lesson-still-to-write">1.3 A lesson still to write (coming)</a>, the '
        "attention step.</p>"
    ) in first
    assert (
        'Next: <a class="course-lesson-link" href="../../part-1/tiny-two/">1.2 A second tiny '
        'lesson</a>. Or back to <a href="../../">the course outline</a>.'
    ) in first
    second = article(two, "part-1/tiny-two")
    assert (
        'Next: <a class="course-coming" href="../../#lesson-still-to-write">1.3 A lesson still '
        'to write (coming)</a>. Back to <a href="../../">the course outline</a>.'
    ) in second


def test_lesson_link_links_by_id(two: Path) -> None:
    links = article(two, "part-1/tiny")
    assert (
        'As <a class="course-lesson-link" href="../../part-1/tiny-two/">A second tiny '
        'lesson</a> (lesson 1.2) shows, and\n<a class="course-lesson-link" '
        'href="../../part-1/tiny-two/">the next one</a>.'
    ) in links


def test_previous_and_next_never_cross_to_the_authors_side(two: Path) -> None:
    def footer(url: str) -> list[str]:
        text = (two / "site" / url / "index.html").read_text(encoding="utf-8")
        footer = text[text.index('<nav class="md-footer__inner') :]
        footer = footer[: footer.index("</nav>")]
        return [part.split('"')[1] for part in footer.split("<a href=")[1:]]

    assert footer("part-1/tiny") == ["../..", "../tiny-two/"]  # home, then the next lesson
    assert footer("part-1/tiny-two") == ["../tiny/"]  # the last lesson: no next
    # no previous into the course
    assert footer("writing-a-lesson") == ["../authors/engine-release/"]
    index = (two / "site" / "search" / "search_index.json").read_text(encoding="utf-8")
    assert '"location":"part-1/tiny/' in index.replace(" ", "")
    for authors_page in ("writing-a-lesson/", "operations/", "authors/freshness/"):
        assert f'"location":"{authors_page}' not in index.replace(" ", "")


def test_a_link_to_an_unknown_or_unwritten_lesson_fails_naming_the_page(two: Path) -> None:
    page = two / "docs" / "part-1" / "tiny-two.md"
    before = page.read_text(encoding="utf-8")
    page.write_text(
        before + '\n{{ lesson_link("tiny-tow") }} {{ lesson_link("still-to-write") }}\n',
        encoding="utf-8",
    )
    try:
        _, problems = check_site(two)
    finally:
        page.write_text(before, encoding="utf-8")
    assert [str(p) for p in problems] == [
        "docs/part-1/tiny-two.md: lesson_link('tiny-tow'): no lesson 'tiny-tow' in "
        "docs/course.yml (did you mean 'tiny-two'? lessons: tiny-cache, tiny-two, still-to-write)",
        "docs/part-1/tiny-two.md: lesson_link('still-to-write'): lesson 'still-to-write' (1.3 A "
        "lesson still to write) is listed in docs/course.yml but has no page yet "
        "(docs/part-1/still-to-write.md); link it once it is written",
    ]


# -- add_lesson, for `course new` ------------------------------------------------------------------


def test_add_lesson_appends_one_line_and_keeps_the_comments(tmp_path: Path) -> None:
    docs = docs_with(tmp_path, OUTLINE, {})
    lesson = add_lesson(docs, "gpu-memory", 2, "Sizing GPU memory: a budget")
    assert (lesson.number, lesson.src, lesson.written) == ("2.5", "part-2/gpu-memory.md", False)
    assert (docs / "course.yml").read_text(encoding="utf-8") == OUTLINE.replace(
        "      - {id: kv-cache, title: The KV cache}\n",
        "      - {id: kv-cache, title: The KV cache}\n"
        '      - {id: gpu-memory, title: "Sizing GPU memory: a budget"}\n',
    )
    third = add_lesson(docs, "attention", 3, "Attention at scale", part_title="Many requests")
    assert (third.number, third.part) == ("3.1", "Part 3 · Many requests")
    assert [x.id for x in load_outline(docs).lessons] == [
        "prefill-decode",
        "kv-cache",
        "gpu-memory",
        "attention",
    ]
    assert (
        (docs / "course.yml")
        .read_text(encoding="utf-8")
        .startswith("# The outline, as an author keeps it")
    )


def test_add_lesson_to_a_flow_list_and_its_refusals(tmp_path: Path) -> None:
    docs = docs_with(tmp_path, "parts:\n  - {number: 1, title: Basics, lessons: []}\n", {})
    assert add_lesson(docs, "tokens", 1, "Tokens").number == "1.1"
    assert add_lesson(docs, "sampling", 1, "Sampling").number == "1.2"
    assert (docs / "course.yml").read_text(encoding="utf-8") == (
        "parts:\n  - {number: 1, title: Basics, lessons: [{id: tokens, title: Tokens}, "
        "{id: sampling, title: Sampling}]}\n"
    )  # written in the list's own flow style
    with pytest.raises(PageError, match=r"already lists lesson 'tokens' \(lesson 1.1\)"):
        add_lesson(docs, "tokens", 1, "Again")
    later = add_lesson(docs, "later", 4, "Later")  # a part not there yet, without a title
    assert (later.number, later.part) == ("4.1", "Part 4")
    with pytest.raises(PageError, match="part 0: parts are numbered from 1"):
        add_lesson(docs, "zero", 0, "Zero")
    with pytest.raises(PageError, match="'Bad_Id' is not a lesson id"):
        add_lesson(docs, "Bad_Id", 1, "Bad")
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    assert add_lesson(fresh, "first", 1, "First", part_title="Start").number == "1.1"
    assert load_outline(fresh).parts[0].label == "Part 1 · Start"
