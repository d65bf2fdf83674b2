"""PDFs printed in parallel give the same files as one after another; social cards are drawn once
per text and then copied."""

from __future__ import annotations

import shutil
from pathlib import Path

from course.package.lessons import package_lessons
from course.pages.cards import Card, write_card


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


def test_a_social_card_is_drawn_once_per_text(tmp_path: Path) -> None:
    card = Card("The KV cache", "Part 2 · Lesson 2.4", "144 KiB", "per token", "A course")
    assert write_card(card, tmp_path / "a.png", tmp_path / "cache") is False
    assert write_card(card, tmp_path / "b.png", tmp_path / "cache") is True
    assert (tmp_path / "a.png").read_bytes() == (tmp_path / "b.png").read_bytes()
    other = Card("The KV cache", "Part 2 · Lesson 2.4", "145 KiB", "per token", "A course")
    assert write_card(other, tmp_path / "c.png", tmp_path / "cache") is False
    assert (tmp_path / "c.png").read_bytes() != (tmp_path / "a.png").read_bytes()
