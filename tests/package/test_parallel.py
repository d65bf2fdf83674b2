"""PDFs printed in parallel give the same files as one after another; figures and social cards are
drawn once per input and then copied."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from support import LESSON

from course.package.lessons import package_lessons
from course.pages.cards import Card, write_card
from course.pages.figure_cache import drawn_once, figure_key
from course.pages.widgets import Drawn
from course.record.store import Store


def test_pdfs_printed_in_parallel_are_the_same_files(two_lessons: Path, tmp_path: Path) -> None:
    site = tmp_path / "site"
    shutil.copytree(two_lessons / "site", site)
    made = {}
    for jobs in (1, 2):
        done = package_lessons(two_lessons, site, cache_dir=tmp_path / f"cache-{jobs}", jobs=jobs)
        assert [d.pdf.name for d in done] == ["lesson-1.1.pdf", "lesson-1.2.pdf"]
        assert all(not d.pdf_reused and d.pdf_pages for d in done)
        made[jobs] = [(d.pdf.read_bytes(), d.zip.read_bytes()) for d in done]
    assert made[1] == made[2]
    again = package_lessons(two_lessons, site, cache_dir=tmp_path / "cache-2", jobs=2)
    assert all(d.pdf_reused and d.zip_reused for d in again)


def test_a_figure_is_drawn_once_per_input(two_lessons: Path, tmp_path: Path) -> None:
    store = Store(two_lessons / "build")
    runs = store.runs(LESSON)
    figures = two_lessons / "figures"
    key = figure_key(figures, "tiny_cache", runs[0], "assets/figures/x/tiny_cache")
    assert key != figure_key(figures, "tiny_cache", runs[1], "assets/figures/x/tiny_cache")
    calls = []

    def draw() -> Drawn:
        calls.append(1)
        out = tmp_path / "site" / "assets/figures/x/tiny_cache"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".svg").write_text("<svg/>")
        out.with_suffix(".png").write_bytes(b"png")
        return Drawn(f"{out}.svg", f"{out}.png", 672, 345)

    cache = tmp_path / "cache"
    first = drawn_once(cache, key, tmp_path / "site", "assets/figures/x/tiny_cache", draw)
    shutil.rmtree(tmp_path / "site")
    second = drawn_once(cache, key, tmp_path / "site", "assets/figures/x/tiny_cache", draw)
    assert calls == [1] and (first.width, first.height) == (second.width, second.height)
    assert (tmp_path / "site/assets/figures/x/tiny_cache.svg").read_text() == "<svg/>"

    def fails() -> Drawn:
        raise ValueError("the author's figure failed")

    with pytest.raises(ValueError):
        drawn_once(cache, "other", tmp_path / "site", "assets/figures/x/other", fails)
    assert sorted(p.name for p in cache.iterdir()) == [key]  # nothing kept of a failure


def test_a_social_card_is_drawn_once_per_text(tmp_path: Path) -> None:
    card = Card("The KV cache", "Part 2 · Lesson 2.4", "144 KiB", "per token", "A course")
    assert write_card(card, tmp_path / "a.png", tmp_path / "cache") is False
    assert write_card(card, tmp_path / "b.png", tmp_path / "cache") is True
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    other = Card("The KV cache", "Part 2 · Lesson 2.4", "145 KiB", "per token", "A course")
    assert write_card(other, tmp_path / "c.png", tmp_path / "cache") is False
    assert (tmp_path / "c.png").read_bytes() != (tmp_path / "a.png").read_bytes()
