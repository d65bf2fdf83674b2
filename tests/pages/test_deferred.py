"""Folded code blocks moved out of the page and put back for the PDF (course/pages/deferred.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from course.errors import PageError
from course.pages.deferred import SMALLEST, defer_folded_code, inline, write_blocks


def block(title: str | None, lines: int) -> str:
    """A block as pymdownx.highlight writes it, `lines` highlighted lines long."""
    name = f'<span class="filename">{title}</span>' if title else ""
    body = "\n".join(
        f'<span class="n">x_{i}</span> <span class="o">=</span> {i}' for i in range(lines)
    )
    return f'<div class="highlight">{name}<pre><span></span><code>{body}\n</code></pre></div>'


BIG = 40  # lines: well over SMALLEST bytes
SMALL = 2


def test_a_big_block_in_a_folded_block_becomes_a_link_to_its_file() -> None:
    listing = block("kvlab.py · 372 lines", BIG)
    assert len(listing) > SMALLEST
    page = (
        f'<p>before</p>\n<details class="note">\n<summary>kvlab.py</summary>\n{listing}\n</details>'
    )
    done = defer_folded_code(page)
    assert done.blocks == {"code/kvlab.py.html": listing}
    assert "x_39" not in done.html and "<p>before</p>" in done.html
    assert (
        '<div class="course-deferred" data-src="code/kvlab.py.html"><p>'
        '<a href="code/kvlab.py.html">Open kvlab.py · 372 lines</a></p></div>'
    ) in done.html


@pytest.mark.parametrize(
    "page",
    [
        "<p>in the open</p>{big}",  # not folded
        '<details class="note" open="open"><summary>s</summary>{big}</details>',  # ???+ : open
        '<details class="note"><summary>s</summary>{small}</details>',  # too small to be worth it
        '<details class="note"><summary>s</summary><p>x</p></details>{big}',  # after the fold
    ],
)
def test_blocks_a_reader_sees_at_once_or_small_ones_stay(page: str) -> None:
    text = page.format(big=block("a.py", BIG), small=block("b.py", SMALL))
    done = defer_folded_code(text)
    assert done.blocks == {} and done.html == text


def test_nested_folds_count_and_names_stay_unique() -> None:
    inner = block("models/A/config.json · 30 lines", BIG)
    other = block("models/B/config.json · 30 lines", BIG)
    untitled = block(None, BIG)
    page = (
        '<details class="note" open><summary>o</summary>'
        f'<details class="tip"><summary>i</summary>{inner}{other}</details>{untitled}</details>'
    )
    done = defer_folded_code(page)
    assert list(done.blocks) == ["code/config.json.html", "code/config.json-2.html"]
    assert untitled in done.html  # inside the open block only: shown at once


def test_inline_puts_every_block_back_exactly(tmp_path: Path) -> None:
    page = "".join(
        f'<details class="note"><summary>{n}</summary>{block(n, BIG + i)}</details><p>{i}</p>'
        for i, n in enumerate(["a.py", "b.py", "a.py"])
    )
    done = defer_folded_code(page)
    assert len(done.blocks) == 3
    write_blocks(done, tmp_path)
    assert sorted(p.name for p in (tmp_path / "code").iterdir()) == [
        "a.py-2.html",
        "a.py.html",
        "b.py.html",
    ]
    assert inline(done.html, tmp_path, "site/p/index.html") == page


def test_a_missing_block_file_names_the_page_and_the_file(tmp_path: Path) -> None:
    done = defer_folded_code(
        f'<details class="note"><summary>s</summary>{block("a.py", BIG)}</details>'
    )
    with pytest.raises(
        PageError, match=r"site/p/index.html: the folded code block 'code/a.py.html'"
    ):
        inline(done.html, tmp_path, "site/p/index.html")
