"""`course new LESSON [--part N [--part-title T]]`: a new lesson that runs and builds at once, on
any machine.

    new_lesson(root, "demo", part=2)

writes, from the templates beside this module (`templates/`, placeholders `__NAME__`):

    lab/<lesson>/lab.yml              a step, a service with readiness, captures from its output and
                                      from a JSON file, a kept file, a stop step
    lab/<lesson>/*.py, README.md, pyproject.toml     the lab's scripts (standard library only)
    docs/part-<N>/<lesson>.md         a page using every macro a lesson page has
    docs/part-<N>/<lesson>.yml        its checks, questions and glossary
    figures/<lesson>_latency.py       a histogram drawn from the file the lab keeps
    lab/lab.schema.json               the JSON Schema its lab.yml names for editors

and places the lesson in the course (`register_lesson`). Nothing is overwritten: a lesson whose
lab, page or figure exists already is refused.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from ..errors import LabError, PageError
from ..lab.editor_schema import SCHEMA_FILE, json_schema
from ..lab.load import load_lab
from ..lab.schema import STEP_ID
from ..pages.lessons import lesson_pages
from ..pages.outline import OUTLINE, load_outline, part_label
from ..pages.outline_edit import add_lesson

TEMPLATES = Path(__file__).parent / "templates"
SUFFIX = ".tmpl"


@dataclass(frozen=True)
class Placement:
    """Where a new lesson sits in the course."""

    part: int
    part_title: str
    """The part's label, as the front matter of its other lessons spells it ('Part 2 · ...')."""
    number: str
    """'2.5': the part, then one more than the part's last lesson."""


@dataclass(frozen=True)
class NewLesson:
    """What `new_lesson` made."""

    lesson: str
    title: str
    placement: Placement
    files: list[Path]
    """Every file written, under the project folder."""
    outline: str
    """How the lesson was placed in the course, as a sentence."""


def new_lesson(
    root: Path,
    lesson: str,
    part: int | None = None,
    title: str | None = None,
    part_title: str | None = None,
) -> NewLesson:
    """Write a new lesson's lab, page, data file and figure; LabError when it cannot be made.

    A part the outline does not have yet needs `part_title`; a part it has keeps its title.
    """
    shown = f"lab/{lesson}"
    if not re.match(STEP_ID, lesson):
        raise LabError(
            shown,
            [f"'{lesson}' is not a lesson name: lowercase letters, digits and '-', e.g. demo"],
        )
    given_title, title = title, title or lesson.replace("-", " ").capitalize()
    place = placement(root, part, part_title)
    values = {
        "__LESSON__": lesson,
        "__TITLE__": title,
        "__TITLE_YAML__": json.dumps(title, ensure_ascii=False),
        "__PART_YAML__": json.dumps(place.part_title, ensure_ascii=False),
        "__NUMBER__": place.number,
        "__PAGE_DIR__": f"part-{place.part}",
        "__FIGURE__": f"{lesson.replace('-', '_')}_latency",
    }
    planned = {
        root / fill(str(t.relative_to(TEMPLATES)), values).removesuffix(SUFFIX): t
        for t in sorted(TEMPLATES.rglob(f"*{SUFFIX}"))
    }
    taken = [p for p in [root / "lab" / lesson, *planned] if p.exists()]
    if taken:
        names = ", ".join(str(p.relative_to(root)) for p in taken)
        raise LabError(shown, [f"lesson '{lesson}' exists already ({names}); pick another name"])
    part_problem = new_part_problem(root, lesson, place.part, part_title, given_title)
    if part_problem:
        raise LabError(shown, [part_problem])
    for target, template in planned.items():
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(fill(template.read_text(encoding="utf-8"), values), encoding="utf-8")
    schema = root / "lab" / SCHEMA_FILE
    schema.write_text(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n", "utf-8")
    load_lab(root / "lab" / lesson / "lab.yml")  # the templates must make a valid lab
    outline = register_lesson(root, lesson, place, title)
    return NewLesson(lesson, title, place, [*planned, schema], outline)


def fill(text: str, values: dict[str, str]) -> str:
    """A template with its placeholders replaced."""
    for placeholder, value in values.items():
        text = text.replace(placeholder, value)
    return text


def placement(root: Path, part: int | None, part_title: str | None = None) -> Placement:
    """The part a new lesson joins (default: the course's last part, else 1) and its number; a
    part no lesson is in yet is labelled with `part_title`, when given."""
    docs = root / "docs"
    known: dict[int, tuple[str, list[int]]] = {}
    for page in lesson_pages(docs) if docs.is_dir() else []:
        numbers = [int(n) for n in re.findall(r"\d+", page.meta.number or "")]
        if numbers:
            label = page.meta.part or f"Part {numbers[0]}"
            known.setdefault(numbers[0], (label, []))[1].append(
                numbers[1] if len(numbers) > 1 else 0
            )
    chosen = part if part is not None else max(known, default=1)
    if chosen < 1:
        raise LabError("lab", [f"--part {chosen}: parts are numbered from 1"])
    outlined = {p.number: p.label for p in load_outline(docs).parts} if docs.is_dir() else {}
    label = outlined.get(chosen) or part_label(chosen, part_title)
    label, taken = known.get(chosen, (label, []))
    return Placement(chosen, label, f"{chosen}.{max(taken, default=0) + 1}")


def new_part_problem(
    root: Path, lesson: str, part: int, part_title: str | None, title: str | None
) -> str | None:
    """What is wrong with the part a new lesson asks for: a part the outline lacks, without a
    title; a title given for a part that has one already. None when all is well."""
    docs = root / "docs"
    parts = {p.number: p for p in load_outline(docs).parts} if docs.is_dir() else {}
    again = f"course new {lesson} --part {part}{' --title ' + json.dumps(title) if title else ''}"
    if part not in parts and not (part_title or "").strip():
        listed = ", ".join(p.label for p in parts.values()) or "none yet"
        return (
            f"part {part} is not in the course's outline, docs/{OUTLINE} (its parts: {listed}); "
            f'a new part needs a title: {again} --part-title "..."'
        )
    existing = parts.get(part)
    if existing is not None and part_title is not None and part_title != existing.title:
        named = f"'{existing.title}'" if existing.title else "no title"
        return (
            f"--part-title: part {part} exists already, with {named}; leave --part-title out, or "
            f"change the part's title in docs/{OUTLINE}"
        )
    return None


def register_lesson(root: Path, lesson: str, place: Placement, title: str) -> str:
    """Place the new lesson in the course's outline, `docs/course.yml`, at the end of part
    `place.part` (`pages.outline_edit.add_lesson`); how it was placed, as a sentence."""
    label = place.part_title.split(" · ", 1)
    part_title = label[1] if len(label) == 2 else None
    try:
        added = add_lesson(root / "docs", lesson, place.part, title, part_title)
    except PageError as exc:
        raise LabError(f"lab/{lesson}", [str(exc)]) from None
    return f"listed as lesson {added.number} of {added.part} in docs/course.yml"
