"""The course outline, `docs/course.yml`: the one place that says which lessons exist, where.

    parts:
      - number: 2                        # "Part 2"; default: the part's place in the list
        title: The maths of one request
        first: 3                         # the number of the first lesson listed (2.1, 2.2 unsaid)
        lessons:                         # in order: their numbers come from it (2.3, 2.4, ...)
          - {id: prefill-decode, title: Prefill and decode}
          - {id: kv-cache, title: The KV cache}
    guides: [before-you-start.md]                   # pages for learners, after the home page
    authors: [writing-a-lesson.md, operations.md]   # the authors' side, in this order

A lesson id is its folder name (`lab/<id>/`, `build/<id>/`); its page is
`docs/<folder>/<id>.md` (folder `part-<number>` unless the part says otherwise, or the lesson's
own `page:`). A lesson whose page does not exist yet is *coming*: the outline shows it, nothing
links to it. Per-page facts (summary, outcomes, read first, a pinned run) stay in the page's front
matter; the outline alone decides titles, parts, numbers and order.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ..errors import PageError
from ..record import yamlfast

OUTLINE = "course.yml"
"""The outline's file name inside docs/."""
AUTHORS = "For authors"
"""The heading of the authors' side of the site."""
LESSON_ID = r"^[a-z0-9][a-z0-9-]*$"


class LessonEntry(BaseModel):
    """One lesson of a part, in course order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: Annotated[str, Field(pattern=LESSON_ID)]
    """The lesson's id: its folder under `lab/` and `build/`, and its page's file name."""
    title: str = Field(min_length=1)
    """The lesson's title, as the navigation, the landing page and the page header show it."""
    page: str | None = None
    """The page inside docs/, when it is not `<part folder>/<id>.md`."""


class PartEntry(BaseModel):
    """One part of the course: its title and its lessons in order."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    number: int | None = Field(default=None, ge=1)
    """The part's number ("Part 2"); default: its place in the list."""
    title: str | None = Field(default=None, min_length=1)
    """The part's title, e.g. 'The maths of one request'; without one the part is 'Part 3'."""
    folder: str | None = None
    """The folder of docs/ holding its pages; default `part-<number>`."""
    first: int = Field(default=1, ge=1)
    """The number of its first listed lesson (3 makes the first one 2.3)."""
    lessons: list[LessonEntry] = []
    """Its lessons, in course order."""


class OutlineFile(BaseModel):
    """The whole of docs/course.yml."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    parts: list[PartEntry] = []
    """The parts, in course order."""
    guides: list[str] = []
    """Pages for learners besides the lessons (renting a GPU, getting a lab onto it), listed in
    the course's navigation after the home page and searched like the lessons."""
    authors: list[str] = []
    """Pages of the authors' side, in the order its navigation lists them; pages that neither
    this list nor a lesson names follow them."""

    @model_validator(mode="after")
    def _unique(self) -> OutlineFile:
        seen: set[str] = set()
        numbers: set[int] = set()
        problems = []
        for index, part in enumerate(self.parts, start=1):
            number = part.number or index
            if number in numbers:
                problems.append(f"part number {number} is used twice")
            numbers.add(number)
            for lesson in part.lessons:
                if lesson.id in seen:
                    problems.append(f"lesson id '{lesson.id}' is listed twice")
                seen.add(lesson.id)
        if problems:
            raise ValueError("; ".join(problems))
        return self


@dataclass(frozen=True)
class Lesson:
    """A lesson as the outline places it: its number, its part, its page and whether it exists."""

    id: str
    title: str
    number: str
    """e.g. '2.4'."""
    part_number: int
    part_title: str | None
    src: str
    """Its page inside docs/ (which may not exist yet)."""
    written: bool
    """Whether its page exists; a lesson without one is shown as coming."""

    @property
    def part(self) -> str:
        """The part as the page header names it: 'Part 2 · The maths of one request'."""
        return part_label(self.part_number, self.part_title)

    @property
    def url(self) -> str:
        """The page's URL relative to the site root, e.g. 'part-2/kv-cache/'."""
        stem = self.src.removesuffix(".md")
        return stem.removesuffix("index") if stem.endswith("/index") else stem + "/"

    @property
    def label(self) -> str:
        """'2.4 · The KV cache', as the navigation lists it."""
        return f"{self.number} · {self.title}"

    @property
    def download_stem(self) -> str:
        """The name of its downloads and of the zip's folder: 'lesson-2.4'."""
        return f"lesson-{self.number}"


@dataclass(frozen=True)
class Part:
    """A part with its lessons resolved."""

    number: int
    title: str | None
    lessons: tuple[Lesson, ...]

    @property
    def label(self) -> str:
        """'Part 2 · The maths of one request'."""
        return part_label(self.number, self.title)


def part_label(number: int, title: str | None) -> str:
    """'Part 2 · The maths of one request', or 'Part 3' for a part without a title yet."""
    return f"Part {number} · {title}" if title else f"Part {number}"


@dataclass(frozen=True)
class Outline:
    """The course outline read from docs/course.yml, with each lesson's page looked up."""

    parts: tuple[Part, ...]
    authors: tuple[str, ...]
    path: Path | None
    """The file it was read from; None when docs/ has no outline."""
    guides: tuple[str, ...] = ()
    """Pages for learners besides the lessons, in navigation order."""

    @property
    def lessons(self) -> list[Lesson]:
        """Every lesson in course order, written or coming."""
        return [lesson for part in self.parts for lesson in part.lessons]

    @property
    def written(self) -> list[Lesson]:
        """The lessons whose page exists, in course order."""
        return [lesson for lesson in self.lessons if lesson.written]

    def by_page(self, src: str) -> Lesson | None:
        """The lesson whose page this is, or None."""
        return next((lesson for lesson in self.lessons if lesson.src == src), None)

    def lesson(self, lesson_id: str) -> Lesson:
        """A lesson by id; PageError naming the outline and the close match otherwise."""
        for lesson in self.lessons:
            if lesson.id == lesson_id:
                return lesson
        ids = [lesson.id for lesson in self.lessons]
        close = difflib.get_close_matches(lesson_id, ids, n=1)
        hint = f"did you mean '{close[0]}'? " if close else ""
        raise PageError(
            f"no lesson '{lesson_id}' in docs/{OUTLINE} ({hint}lessons: {', '.join(ids) or 'none'})"
        )

    def after(self, lesson_id: str) -> Lesson | None:
        """The lesson after this one in course order, written or not."""
        order = self.lessons
        index = [lesson.id for lesson in order].index(lesson_id)
        return order[index + 1] if index + 1 < len(order) else None


_CACHE: dict[Path, tuple[tuple[int, int], OutlineFile]] = {}


def read_outline_file(path: Path) -> OutlineFile:
    """docs/course.yml validated; PageError naming the file and every problem in it.

    Kept while the file is unchanged: every page of a build asks for it.
    """
    stat = path.stat()
    stamp = (stat.st_mtime_ns, stat.st_size)
    kept = _CACHE.get(path)
    if kept is not None and kept[0] == stamp:
        return kept[1]
    shown = f"docs/{OUTLINE}"
    try:
        data = yamlfast.safe_load(path.read_text(encoding="utf-8")) or {}
        parsed = OutlineFile.model_validate(data)
    except yaml.YAMLError as exc:
        raise PageError(f"{shown}: not valid YAML: {exc}") from None
    except ValidationError as exc:
        raise PageError(f"{shown}: {_problems(exc)}") from None
    _CACHE[path] = (stamp, parsed)
    return parsed


def _problems(exc: ValidationError) -> str:
    """Every problem of the file, each with its key and, for an unknown key, the close match."""
    lines = []
    for error in exc.errors():
        loc = error["loc"]
        where = ".".join(str(p) for p in loc) or "(top)"
        message = error["msg"].removeprefix("Value error, ")
        if error["type"] == "extra_forbidden":
            model: type[BaseModel] = OutlineFile
            if len(loc) > 1:
                model = LessonEntry if "lessons" in loc[:-1] else PartEntry
            close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1)
            message = f"unknown key{f' (did you mean {close[0]!r}?)' if close else ''}"
        lines.append(f"  - {where}: {message}")
    noun = "problem" if len(lines) == 1 else "problems"
    return f"{len(lines)} {noun}:\n" + "\n".join(lines)


def load_outline(docs: Path) -> Outline:
    """The outline of a docs/ folder, each lesson numbered and its page looked up.

    A docs/ folder without course.yml has an empty outline (every page on the authors' side).
    """
    path = docs / OUTLINE
    if not path.is_file():
        return Outline((), (), None)
    data = read_outline_file(path)
    parts = []
    for index, entry in enumerate(data.parts, start=1):
        number = entry.number or index
        folder = (entry.folder or f"part-{number}").strip("/")
        lessons = []
        for offset, item in enumerate(entry.lessons):
            src = item.page or f"{folder}/{item.id}.md"
            lessons.append(
                Lesson(
                    id=item.id,
                    title=item.title,
                    number=f"{number}.{entry.first + offset}",
                    part_number=number,
                    part_title=entry.title,
                    src=src,
                    written=(docs / src).is_file(),
                )
            )
        parts.append(Part(number, entry.title, tuple(lessons)))
    return Outline(tuple(parts), tuple(data.authors), path, tuple(data.guides))


def is_lesson_id(text: str) -> bool:
    """Whether a read-first entry names a lesson by id (lowercase, no spaces), not a topic."""
    return bool(re.match(LESSON_ID, text.strip()))


def merged_meta(
    outline: Outline, src: str, raw: dict[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A page's front matter with the outline's facts (lesson, title, part, number) put in.

    Returns the merged mapping and the contradictions found: front matter may repeat what the
    outline says, never say otherwise.
    """
    lesson = outline.by_page(src)
    if lesson is None:
        return raw, []
    facts = {
        "lesson": lesson.id,
        "title": lesson.title,
        "part": lesson.part,
        "number": lesson.number,
    }
    problems = []
    for key, value in facts.items():
        given = raw.get(key)
        if given is not None and str(given) != value:
            problems.append(
                f"front matter says {key}: {given!r}, but docs/{OUTLINE} makes it {value!r} "
                f"(remove `{key}:` from the front matter: the outline decides it)"
            )
    return {**raw, **facts}, problems
