"""`course new demo --part 9 --part-title "Demo part" && course run demo && course build`,
exactly, on a fresh copy of the repository, on a machine without a GPU: the new lesson, in a new
part, runs and builds at once.

The copy is of conftest.py's `repo_published` clone, with the `.cache/` its publication left
(drawn figures, cards, the lessons' PDFs and zips, each kept under a hash of its inputs), and the
build is for the address it was published for (COURSE_SITE_URL, which mkdocs.yml reads): the
repository's own lessons, printed cold there, are reused here as a second build reuses them; the
new lesson's page, figure, PDF and zip are made from nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from support import COURSE, Published

from course.errors import LabError
from course.lab.load import load_lab
from course.pages.lessons import lesson_pages
from course.scaffold.new import TEMPLATES, new_lesson, placement


def course(
    root: Path, *args: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`course ARGS` typed in the copy's folder (its own `course/` package)."""
    return subprocess.run(
        [*COURSE, *args],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(env or {})},
    )


def copy_of(published: Published, dst: Path) -> Path:
    """The published clone with its `.cache/`, less the published site and its staging."""

    def left_out(folder: str, names: list[str]) -> set[str]:
        here = Path(folder)
        return {
            name
            for name in names
            if name == "__pycache__"
            or (here == published.root and name == "out")
            or (here == published.root / ".cache" and name == "publish")
        }

    shutil.copytree(published.root, dst, ignore=left_out)
    return dst


@pytest.mark.slow
def test_course_new_then_run_then_build_works_at_once(
    repo_published: Published, tmp_path: Path
) -> None:
    root = copy_of(repo_published, tmp_path / "clone")
    assert not (root / "lab" / "demo").exists() and not (root / "site").exists()
    untitled = course(root, "new", "demo", "--part", "9")
    assert untitled.returncode == 1 and not (root / "lab" / "demo").exists()
    assert (
        "part 9 is not in the course's outline, docs/course.yml (its parts: Part 2 · The maths of "
        "one request, Part 3 · One GPU, many requests); a new part needs a title: course new demo "
        '--part 9 --part-title "..."' in untitled.stderr
    )
    made = course(root, "new", "demo", "--part", "9", "--part-title", "Demo part")
    assert made.returncode == 0, made.stderr
    place = placement(root, 9)  # the part the lesson joined: now with the lesson in it
    assert (place.part, place.part_title, place.number) == (9, "Part 9 · Demo part", "9.2")
    place = type(place)(9, place.part_title, "9.1")  # the new lesson's place: a new part's first
    written = re.findall(r"^wrote (\S+)$", made.stdout, re.MULTILINE)
    assert sorted(written) == [
        f"docs/part-{place.part}/demo.md",
        f"docs/part-{place.part}/demo.yml",
        "figures/demo_latency.py",
        "lab/demo/README.md",
        "lab/demo/client.py",
        "lab/demo/lab.yml",
        "lab/demo/pyproject.toml",
        "lab/demo/server.py",
        "lab/demo/work.py",
        "lab/lab.schema.json",
    ]
    assert f"Lesson {place.number}, 'Demo'" in made.stdout

    ran = course(root, "run", "demo")
    assert ran.returncode == 0, ran.stderr + ran.stdout
    (run_dir,) = (root / "build" / "demo").iterdir()
    assert run_dir.name.endswith("-cpu")
    kept = run_dir / "files" / "requests" / "results" / "latency.json"
    assert len(json.loads(kept.read_text())["latencies_ms"]) == 200

    built = course(root, "build", env={"COURSE_SITE_URL": repo_published.url})
    assert built.returncode == 0, built.stderr + built.stdout
    # the repository's own site too, from its committed records: home, authors' pages, lessons
    site = root / "site"
    for page in ("index.html", "writing-a-lesson/index.html", "authors/lab-yml/index.html"):
        assert (site / page).is_file(), page
    lessons = lesson_pages(root / "docs")
    assert len(lessons) >= 2
    for entry in lessons:
        assert (site / entry.url / "index.html").is_file(), entry.src
        assert (site / "downloads" / f"lesson-{entry.meta.number}.pdf").is_file(), entry.src
    page = (root / "site" / f"part-{place.part}/demo/index.html").read_text(encoding="utf-8")
    assert f'data-source="{run_dir.name}/requests.p50"' in page
    assert "any machine: no step of the lab needs a GPU" in page
    # a minute a step to read and type it, and the steps' own second or so, to the hundredth
    assert re.search(r"about 4 min: the recorded steps took \d\.\d\d s, plus 4 min to read", page)
    assert 'data-claim-state="holds"' in page and 'data-claim-state="fails"' not in page
    assert "course-error" not in page
    svg = root / "site" / "assets" / "figures" / "demo" / "demo_latency.svg"
    assert svg.read_text(encoding="utf-8").count("<path") > 20
    for download in (f"lesson-{place.number}.pdf", f"lesson-{place.number}.zip"):
        assert (root / "site" / "downloads" / download).stat().st_size > 1000
    outline = (root / "docs" / "course.yml").read_text(encoding="utf-8")
    assert "  - number: 9\n    title: Demo part\n    lessons:\n      - {id: demo, title: Demo}" in (
        outline
    )  # listed in the course's outline, in its new part
    kicker = re.search(r'<p class="course-kicker">([^<]*)</p>', page)
    assert kicker is not None and kicker.group(1).startswith("Part 9 · Demo part"), kicker
    home = (site / "index.html").read_text(encoding="utf-8")
    assert "Part 9 · Demo part" in home and 'href="part-9/demo/"' in home

    again = course(root, "new", "demo")
    assert again.returncode == 1
    assert "lesson 'demo' exists already (lab/demo" in again.stderr


def test_the_new_lab_is_valid_and_named_for_editors(tmp_path: Path) -> None:
    made = new_lesson(
        tmp_path, "first-steps", part=3, title="First steps: a lab", part_title="Firsts"
    )
    lab = load_lab(tmp_path / "lab" / "first-steps" / "lab.yml")
    assert lab.lab.title == "First steps: a lab"
    kinds = [type(s).__name__ for s in lab.lab.steps]
    assert kinds == ["RunStep", "StartStep", "RunStep", "StopStep"]
    assert {c.json_file is None for c in lab.lab.step("requests").capture.values()} == {
        True,
        False,
    }  # captures from the output and from a JSON file
    assert lab.lab.step("requests").files == ["results/latency.json"]
    assert all(s.needs is None for s in lab.lab.steps)
    text = (tmp_path / "lab" / "first-steps" / "lab.yml").read_text()
    assert text.startswith("# yaml-language-server: $schema=../lab.schema.json\n")
    assert (tmp_path / "lab" / "lab.schema.json").is_file()
    assert made.placement.number == "3.1" and made.placement.part_title == "Part 3 · Firsts"
    assert made.outline == "listed as lesson 3.1 of Part 3 · Firsts in docs/course.yml"
    page = (tmp_path / "docs" / "part-3" / "first-steps.md").read_text()
    assert 'title: "First steps: a lab"' in page and 'number: "3.1"' in page
    assert 'figure("first_steps_latency"' in page


def test_the_new_page_uses_every_lesson_macro() -> None:
    from course.pages.macros import MACROS
    from course.pages.render import hint  # noqa: F401 - registers every macro

    text = "".join(p.read_text() for p in (TEMPLATES / "docs").rglob("*.tmpl"))
    # for authors' pages, the landing page and the learners' guide, or naming another lesson,
    # which a new course lacks
    # a calculator names its own lesson's values (course/pages/calculators/lessons.py)
    authors_only = {
        "lab_reference", "freshness", "run_histories", "course_outline", "lesson_link",
        "lesson_number", "lab_costs", "lab_installs", "calculator",
    }  # fmt: skip
    unused = [name for name in MACROS if name not in authors_only and f"{name}(" not in text]
    assert "lab_reference" in MACROS and "get_files" in MACROS
    assert unused == []


def test_a_new_lesson_joins_the_last_part_after_its_last_lesson(tmp_path: Path) -> None:
    for part, number, name in ((1, "1.1", "a"), (2, "2.3", "b"), (2, "2.4", "c")):
        page = tmp_path / "docs" / f"part-{part}" / f"{name}.md"
        page.parent.mkdir(parents=True, exist_ok=True)
        page.write_text(
            f'---\nlesson: {name}\npart: "Part {part} · Things"\nnumber: "{number}"\n---\n'
        )
    assert placement(tmp_path, None).number == "2.5"
    assert placement(tmp_path, None).part_title == "Part 2 · Things"
    assert placement(tmp_path, 1).number == "1.2"
    assert placement(tmp_path, 7) == placement(tmp_path, 7).__class__(7, "Part 7", "7.1")
    with pytest.raises(LabError, match="parts are numbered from 1"):
        placement(tmp_path, 0)


def test_a_part_new_to_the_course_needs_a_title(tmp_path: Path) -> None:
    with pytest.raises(LabError) as untitled:
        new_lesson(tmp_path, "first-steps", part=3)
    assert str(untitled.value) == (
        "lab/first-steps: 1 problem:\n  - part 3 is not in the course's outline, "
        "docs/course.yml (its parts: none yet); a new part needs a title: course new "
        'first-steps --part 3 --part-title "..."'
    )
    assert not (tmp_path / "lab" / "first-steps").exists()
    new_lesson(tmp_path, "first-steps", part=3, part_title="Firsts")
    with pytest.raises(LabError) as retitled:
        new_lesson(tmp_path, "second", part=3, title="Second", part_title="Seconds")
    assert str(retitled.value) == (
        "lab/second: 1 problem:\n  - --part-title: part 3 exists already, with 'Firsts'; leave "
        "--part-title out, or change the part's title in docs/course.yml"
    )
    made = new_lesson(tmp_path, "second", part=3, title="Second")  # an existing part: no title
    assert made.outline == "listed as lesson 3.2 of Part 3 · Firsts in docs/course.yml"


def test_a_bad_name_or_a_taken_one_is_refused(tmp_path: Path) -> None:
    with pytest.raises(LabError, match="'Demo_1' is not a lesson name"):
        new_lesson(tmp_path, "Demo_1")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "demo_latency.py").write_text("")
    with pytest.raises(LabError, match=r"exists already \(figures/demo_latency.py\)"):
        new_lesson(tmp_path, "demo")
    assert not (tmp_path / "lab" / "demo").exists()
