"""A learner's path through the course as the built site gives it (the repository's own site,
built once: conftest.py's `repo_site`).

- Each lesson zip's START-HERE.md, followed in order on this CPU machine (tests/walk.py): every
  step's CPU form, then compare.py, whose every line must be true of what ran. The project's
  Python stands for the fresh virtual environment START-HERE.md makes (the install lines are
  checked against their one source instead), and the steps that need llama.cpp built are left to
  the slow suite (`python tests/walk.py site/downloads/lesson-2.4.zip --fresh-venv --builds`).
  Lessons 2.4 and 2.6 run every CPU form here; 2.3's and 2.5's GPU steps take minutes on two
  cores, so they run with COURSE_SLOW=1 (their steps on paper and compare.py run always), and so
  do 3.1's, whose CPU forms tests/labs/test_paged_attention.py runs already. 3.2's and 3.3's GPU
  steps need llama.cpp built, so here only their steps on paper and compare.py run
  (tests/labs/test_prefix_caching.py and tests/labs/test_quantized_kv_cache.py run their CPU
  forms against stand-ins for llama.cpp's programs).
- No terminal line wraps, on any lesson page at 1280 px nor in its PDF; a line within the width
  budget shows whole; charts fit a phone's screen.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from html import unescape
from pathlib import Path
from typing import Any

import pytest
import walk
from support import ENGINE_524, REPO, chromium_browser, python_524

from course.lab.load import load_lab
from course.pages.choose import lesson_page_runs
from course.pages.facts import build_seconds
from course.pages.format import duration
from course.pages.install import cpu_install_commands, install_commands
from course.pages.outline import load_outline
from course.pages.widgets import TERMINAL_COLUMNS
from course.record.models import Run
from course.record.store import Store

LESSONS = {
    "2.3": "prefill-decode",
    "2.4": "kv-cache",
    "2.5": "gpu-memory",
    "2.6": "smaller-cache",
    "3.1": "paged-attention",
    "3.2": "prefix-caching",
    "3.3": "quantized-kv-cache",
}
PART = {lesson: f"part-{number.split('.')[0]}" for number, lesson in LESSONS.items()}
"""Each lesson's folder, under docs/ and the site."""
FULL = {"2.4", "2.6"} | ({"2.3", "2.5", "3.1"} if os.environ.get("COURSE_SLOW") else set())
"""Lessons whose GPU steps' CPU forms run here too."""


@pytest.fixture(scope="module")
def zips(repo_site: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every lesson zip of the site, unzipped side by side."""
    site_dir, _ = repo_site
    out = tmp_path_factory.mktemp("zips")
    for number in LESSONS:
        with zipfile.ZipFile(site_dir / "downloads" / f"lesson-{number}.zip") as archive:
            archive.extractall(out)
    return out


def guide(zips: Path, number: str) -> list[walk.Section]:
    return walk.read((zips / f"lesson-{number}" / "START-HERE.md").read_text(encoding="utf-8"))


def page_run_of(lesson: str) -> Run:
    """The run the lesson's page shows, as the build chooses it."""
    (chosen,) = [c for c in lesson_page_runs(REPO) if c.lesson == lesson]
    return Store(REPO / "build").get(lesson, chosen.run_id)


def page_steps(lesson: str) -> list[str]:
    """The numbers of the page's "### Step N" headings."""
    text = (REPO / "docs" / PART[lesson] / f"{lesson}.md").read_text(encoding="utf-8")
    return re.findall(r"^### Step (\d+):", text, re.MULTILINE)


@pytest.mark.parametrize("number", list(LESSONS))
def test_start_here_gives_each_step_its_commands_numbered_as_the_page(
    zips: Path, number: str
) -> None:
    lesson = LESSONS[number]
    lab = load_lab(REPO / "lab" / lesson / "lab.yml")
    run = page_run_of(lesson)  # the run the page shows (its pin, else the newest good)
    sections = guide(zips, number)
    steps = [s for s in sections if s.label]
    # every step of the recipe once, in order, numbered by the page's own steps
    assert [s.step for s in steps] == [step.id for step in lab.lab.steps]
    numbers = list(dict.fromkeys(re.match(r"\d+", s.label or "").group(0) for s in steps))  # type: ignore[union-attr]
    assert numbers == page_steps(lesson)
    # every GPU step has its CPU form; a step that stops a service has nothing to type
    for section, step in zip(steps, lab.lab.steps, strict=True):
        if step.needs == "gpu":
            # the command and its CPU form, and the command with real weights where it has one
            blocks = 2 + bool(step.real_weights)
            assert section.needs_gpu and len(section.blocks) == blocks, section.heading
        assert bool(section.blocks) != bool(section.stops), section.heading
    # the install lines are the generated ones, the CPU build of PyTorch first without a GPU
    (before,) = [s for s in sections if s.heading == "Before you start"]
    cpu = cpu_install_commands(lab, run)
    if cpu is None:  # a lab that installs no PyTorch (3.2, 3.3) installs the same way on either
        assert before.blocks == ["\n".join(install_commands(lab, run))]
        assert "torch" not in before.blocks[0]
    else:
        assert before.blocks == ["\n".join(install_commands(lab, run)), "\n".join(cpu)]
        assert "--index-url https://download.pytorch.org/whl/cpu" in before.blocks[1]
    assert "(our estimate, not a timing)" in before.text and "On our machine" not in before.text


def test_lesson_24s_llama_cpp_comes_in_order_and_every_step_runs_without_a_gpu(zips: Path) -> None:
    sections = guide(zips, "2.4")
    headings = [s.heading for s in sections]
    get = headings.index("Before step 6: get llama.cpp")
    assert headings[get + 1] == "Step 6a: llama-gguf-06b (needs a GPU)"
    labels = [s.label for s in sections if s.label]
    assert labels == ["1", "2", "3", "4", "5", *[f"6{c}" for c in "abcdefghi"]]
    assert sections[get].blocks == [
        "pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d "
        "$HOME/llama.cpp-source\n"
        "bash llamakit/llama_build.sh $HOME/llama.cpp-source/llama_cpp_python-0.3.36.tar.gz "
        "$HOME/llama.cpp cuda\n"
        "export LLAMA_CPP_DIR=$HOME/llama.cpp\n"
        'export PATH="$HOME/llama.cpp/bin:$PATH"',
        "bash llamakit/llama_build.sh $HOME/llama.cpp-source/llama_cpp_python-0.3.36.tar.gz "
        "$HOME/llama.cpp cpu",
    ]
    # both build times count: the GPU build as the page's run recorded it, the CPU one as
    # lab.yml declares it (1,238 s)
    took = build_seconds(page_run_of("kv-cache"), "llama.cpp")
    assert took is not None and took > 60
    assert (
        f"Building it took for the GPU on the machine of our NVIDIA H200, {duration(took)}; for"
        " the CPU on 2 cores, 20 min 38 s." in sections[get].text
    )
    servers = [s for s in sections if s.ready]
    assert len(servers) == 2
    for server in servers:  # a second terminal: llama.cpp made findable there first
        for block in server.blocks:
            assert block.startswith('export PATH="$HOME/llama.cpp/bin:$PATH"\nllama-server -m ')
        assert "gguf/qwen3-0_6b-tiny-bf16.gguf" in server.blocks[1]
    (before,) = [s for s in sections if s.heading == "Before you start"]
    # the most a fixed GPU step took (reserved, as the GPU handed it over) and the peak of the
    # step that sizes itself, as the page's run recorded them
    run, lab = page_run_of("kv-cache"), load_lab(REPO / "lab" / "kv-cache" / "lab.yml")
    fixed, sized = [], []
    for step in lab.lab.steps:
        values = run.record.step(step.id).values
        found = values.get("peak_gpu_memory_reserved") or values.get("peak_gpu_memory")
        if step.needs == "gpu" and found is not None:
            (sized if step.sizes_to_card else fixed).append((float(found.value), step.id))
    peak, top = max(fixed)
    ((own, own_id),) = sized
    label = {s.heading.split(": ")[1].split(" ")[0]: s.label for s in sections if s.label}
    assert (
        f"They need at least {peak / 2**30:.1f} GiB of GPU memory, the most one of them took on"
        f" our NVIDIA H200 (step {label[top]}): a 24 GB card such as an RTX 4090 runs every step."
        in before.text
    )
    assert peak < 23.52 * 2**30  # the RTX 4090 as PyTorch sees it
    assert (
        f"Step {label[own_id]} sizes itself to the card it finds: its peak on our NVIDIA H200"
        f" ({own / 2**30:.1f} GiB)" in before.text
    )


GPU_25 = ("paged", "settings", "edge", "concurrency")
"""Lesson 2.5's steps that size themselves to the card (lab.yml `sizes_to_card`)."""


def test_lesson_25_says_its_steps_size_themselves_to_the_card(zips: Path) -> None:
    (before,) = [s for s in guide(zips, "2.5") if s.heading == "Before you start"]
    run = page_run_of("gpu-memory")
    peaks = [run.record.step(s).values["peak_gpu_memory"].value / 2**30 for s in GPU_25]
    assert (
        "Steps 2, 3, 4, 5 size themselves to the card they find: their peaks on our NVIDIA H200 "
        f"({min(peaks):.1f}–{max(peaks):.1f} GiB) are a share of its memory, not what they need; "
        "on a smaller card they take less."
    ) in before.text
    assert min(peaks) > 100  # a share of the H200's 139 GiB, as the sentence says


def test_lesson_33_gives_step_2_with_the_real_weights_after_its_cpu_form(zips: Path) -> None:
    (step,) = [s for s in guide(zips, "3.3") if s.step == "gguf"]
    real = load_lab(REPO / "lab" / "quantized-kv-cache" / "lab.yml").lab.step("gguf").real_weights
    assert real and "--weights Qwen/Qwen3-8B-GGUF" in real
    assert step.blocks[1].endswith("--device cpu --tiny")  # the CPU form the walk types
    assert step.blocks[2] == real
    assert "numbers are not the page's" in " ".join(step.text.split())


@pytest.mark.parametrize("number", list(LESSONS))
def test_a_learner_without_a_gpu_follows_start_here_to_a_true_verdict(
    zips: Path, number: str, tmp_path: Path
) -> None:
    top = zips / f"lesson-{number}"
    expected = json.loads((top / "expected.json").read_text(encoding="utf-8"))
    needs = {s["id"]: s["needs"] for s in expected["steps"]}
    commands = [c for c in walk.cpu_path(guide(zips, number)) if c.section != "Before you start"]
    if number not in FULL:
        commands = [c for c in commands if c.step is None or needs.get(c.step) != "gpu"]
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "HOME": str(tmp_path)}
    recorded = page_run_of(LESSONS[number]).record.engine.get("transformers")
    if recorded == "5.24.0" and importlib.metadata.version("transformers") != recorded:
        # the learner installs the release the page's run was made with, as START-HERE pins it
        if python_524() is None:
            pytest.skip("transformers 5.24.0 could not be installed from the package index")
        env["PYTHONPATH"] = str(ENGINE_524 / "site")
    outputs = walk.follow(commands, top / "lab", env)  # compare.py's exit status 0 included
    ran = {c.step for c in commands if c.step and not c.build}
    tiny = walk.shrunk(commands)
    assert walk.verdict_problems(expected, ran, outputs["compare"], tiny) == [], outputs["compare"]
    assert len(walk.compare_rows(outputs["compare"])) == len(expected["values"])


# --- what the pages show ------------------------------------------------------------------------

LINE_BOXES = """() => {
  const pres = [...document.querySelectorAll('.course-terminal pre')];
  const out = [];
  for (const [n, pre] of pres.entries()) {
    const box = pre.getBoundingClientRect();
    const style = getComputedStyle(pre);
    const right = box.left + pre.clientLeft + pre.clientWidth - parseFloat(style.paddingRight);
    const height = parseFloat(style.lineHeight);  // a rect's middle says which line box it is in
    const walker = document.createTreeWalker(pre, NodeFilter.SHOW_TEXT);
    let line = '', tops = new Set(), end = 0;
    const flush = () => {
      out.push({pre: n, line, boxes: tops.size, end, right});
      line = ''; tops = new Set(); end = 0;
    };
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      let start = 0;
      const text = node.textContent;
      for (let i = 0; i <= text.length; i++) {
        if (i === text.length || text[i] === '\\n') {
          if (i > start) {
            const range = document.createRange();
            range.setStart(node, start); range.setEnd(node, i);
            for (const r of range.getClientRects()) {
              tops.add(Math.floor((r.top + r.height / 2 - box.top) / height));
              end = Math.max(end, r.right);
            }
            line += text.slice(start, i);
          }
          if (i < text.length) flush();
          start = i + 1;
        }
      }
    }
    flush();
  }
  const probe = document.createElement('span');
  probe.textContent = 'x'.repeat(200);
  pres[0].appendChild(probe);
  const char = probe.getBoundingClientRect().width / 200;
  probe.remove();
  const style = getComputedStyle(pres[0]);
  const pad = parseFloat(style.paddingLeft) + parseFloat(style.paddingRight);
  const inner = pres[0].clientWidth - pad;
  return {lines: out, columns: Math.floor(inner / char)};
}"""


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with chromium_browser() as browser:
        yield browser


@pytest.mark.browser
@pytest.mark.parametrize("lesson", list(LESSONS.values()))
def test_no_terminal_line_wraps_at_1280_and_the_budget_is_what_it_shows(
    repo_site: tuple[Path, str], chromium: Any, lesson: str
) -> None:
    _, base = repo_site
    tab = chromium.new_page(viewport={"width": 1280, "height": 900})
    tab.goto(f"{base}{PART[lesson]}/{lesson}/")
    found = tab.evaluate(LINE_BOXES)
    tab.close()
    assert found["columns"] == TERMINAL_COLUMNS  # the budget course check holds the labs to
    lines = [x for x in found["lines"] if x["line"]]
    assert len(lines) > 20
    wrapped = [x["line"] for x in lines if x["boxes"] != 1]
    assert wrapped == []  # each line is one line box, whatever its length
    for x in lines:  # a line within the budget shows whole; a longer one runs past the edge
        assert (x["end"] <= x["right"] + 0.5) == (len(x["line"]) <= TERMINAL_COLUMNS), x


@pytest.mark.browser
def test_charts_fit_a_phones_screen(repo_site: tuple[Path, str], chromium: Any) -> None:
    _, base = repo_site
    tab = chromium.new_page(viewport={"width": 390, "height": 844})
    seen = 0
    for lesson in LESSONS.values():
        tab.goto(f"{base}{PART[lesson]}/{lesson}/")
        figures = tab.evaluate(
            """() => [...document.querySelectorAll('.course-figure')].map(f => ({
                 fig: f.scrollWidth <= f.clientWidth + 1,
                 img: f.querySelector('img').getBoundingClientRect().right
                      <= document.documentElement.clientWidth + 1}))"""
        )
        assert figures and all(f["fig"] and f["img"] for f in figures), (lesson, figures)
        seen += len(figures)
    tab.close()
    assert seen >= 4


def test_terminal_lines_within_the_budget_do_not_wrap_in_the_pdfs(
    repo_site: tuple[Path, str],
) -> None:
    site_dir, _ = repo_site
    checked = 0
    for number, lesson in LESSONS.items():
        html = (site_dir / PART[lesson] / lesson / "index.html").read_text(encoding="utf-8")
        shown = []
        for pre in re.findall(r'<div class="course-terminal".*?<pre[^>]*>(.*?)</pre>', html, re.S):
            text = unescape(re.sub(r"<[^>]+>", "", pre))
            shown += [x for x in text.split("\n") if len(x) <= TERMINAL_COLUMNS]
        pdf = site_dir / "downloads" / f"lesson-{number}.pdf"
        layout = subprocess.run(
            ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
        printed = [" ".join(x.split()) for x in layout.splitlines()]
        joined = "\n".join(printed)
        for line in (" ".join(x.split()) for x in shown):
            if len(line) < 30 or line not in joined.replace("\n", " "):
                continue  # short, too wide, or left out of the PDF (a long terminal is trimmed)
            assert line in joined, f"lesson {number}: wraps in the PDF: {line!r}"
            checked += 1
    assert checked > 100


# --- before the first step ----------------------------------------------------------------------


def text_of(page: str) -> str:
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", page)).split())


def test_before_you_start_is_linked_and_its_costs_and_lines_are_the_lessons(
    repo_site: tuple[Path, str],
) -> None:
    site_dir, _ = repo_site
    guide_page = (site_dir / "before-you-start" / "index.html").read_text(encoding="utf-8")
    landing = (site_dir / "index.html").read_text(encoding="utf-8")
    assert 'href="before-you-start/"' in landing  # the landing page's sentence and costs
    article = guide_page[guide_page.index("<article") : guide_page.index("</article>")]
    words = text_of(article)
    for phrase in ("Community cloud", "secure cloud", "SSH", "web terminal", "wget", "scp"):
        assert phrase.lower() in words.lower(), phrase
    for number, lesson in LESSONS.items():
        page = (site_dir / PART[lesson] / lesson / "index.html").read_text(encoding="utf-8")
        start = page.index('class="course-lesson-header"')
        header = text_of(page[start : page.index("</header>", start)])
        assert "How to rent one and connect: Before you start" in header
        assert 'href="../../before-you-start/"' in page
        # the guide's cost is the header's: the same hands-on time at the same dated prices
        cost = re.search(r"hands-on part costs (\S+)", header).group(1)  # type: ignore[union-attr]
        low, high = cost.split("–")
        title = load_outline(REPO / "docs").lesson(lesson).title
        row = re.search(rf"{re.escape(f'{number} {title}')} [^$]*? RTX 4090 (\$\S+) (\$\S+)", words)
        assert row is not None and (row.group(1), row.group(2)) == (low, high), (number, words)
        # and its install lines are the ones the lesson's "Get the files" and START-HERE.md give
        lab = load_lab(REPO / "lab" / lesson / "lab.yml")
        run = page_run_of(lesson)  # the run the page shows (its pin, else the newest good)
        for line in [*install_commands(lab, run), *(cpu_install_commands(lab, run) or [])]:
            assert unescape(line) in unescape(article), (lesson, line)
            assert line in unescape(page), (lesson, line)
    # "Read first" points somewhere real: a lesson still coming links to its outline entry
    kv = (site_dir / "part-2" / "kv-cache" / "index.html").read_text(encoding="utf-8")
    assert (
        '<a class="course-coming" href="../../#lesson-attention">2.2 The attention step of a '
        "transformer (coming)</a>: queries, keys, values and heads" in kv
    )
    assert 'id="lesson-attention"' in landing
