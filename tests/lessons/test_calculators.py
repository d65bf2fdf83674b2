"""The four lesson calculators on the built site (conftest.py's `repo_site`), in Chromium.

Each is filled with Qwen3-8B's config and must give what its page states, from the record the
page shows; a config.json is pasted; the JSON the lesson zip's compare.py writes for a learner's
run (results made from the recorded ones, the speeds slowed as on a smaller card, judged for an
RTX 4090) is loaded and plotted beside the recorded points. Also: neither the form nor its script
is fetched before a calculator nears the screen, a calculator works by keyboard and after
Material's instant navigation and mounts once, axe finds nothing serious in either colour
scheme, and the PDF prints the worked rows, not the form.
"""

from __future__ import annotations

import json
import math
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import REPO, chromium_browser

from course.pages.calculators.data import release_choice
from course.pages.calculators.lessons import GPU_MEMORY
from course.pages.choose import lesson_page_runs
from course.record.store import Store

pytestmark = pytest.mark.browser

NUMBERS = {"prefill-decode": "2.3", "kv-cache": "2.4", "gpu-memory": "2.5", "smaller-cache": "2.6"}
GPU_MEMORY_RELEASES = next(f.choices for f in GPU_MEMORY.inputs if f.name == "release")
QWEN3_8B = json.loads((REPO / "lab/kv-cache/models/Qwen3-8B/config.json").read_text())


def run_engine(lesson: str, engine: str) -> str:
    """The version of `engine` the run the lesson's page shows recorded."""
    run_id = next(p.run_id for p in lesson_page_runs(REPO) if p.lesson == lesson)
    version = Store(REPO / "build").get(lesson, run_id).record.engine[engine]
    assert version, (lesson, engine)
    return version


def recorded(lesson: str, name: str) -> Any:
    """`step.value` of the run the lesson's page shows."""
    run_id = next(p.run_id for p in lesson_page_runs(REPO) if p.lesson == lesson)
    step, value = name.split(".", 1)
    return Store(REPO / "build").get(lesson, run_id).record.step(step).values[value].value


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    with chromium_browser() as browser:
        yield browser


@pytest.fixture()
def tab(chromium: Any, repo_site: tuple[Path, str]) -> Iterator[Any]:
    """A fresh tab whose every request must stay on the local server; `tab.requests` lists them."""
    _, base = repo_site
    context = chromium.new_context(base_url=base, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(8000)
    page = context.new_page()
    page.requests = []
    page.on("request", lambda r: page.requests.append(r.url))
    yield page
    outside = [u for u in page.requests if not u.startswith((base, "data:", "blob:"))]
    context.close()
    assert outside == [], f"requests left the site: {outside}"


def open_calculator(tab: Any, lesson: str) -> Any:
    """The lesson page with its calculator scrolled to and mounted."""
    tab.goto(f"part-2/{lesson}/")
    return mounted(tab, lesson)


def mounted(tab: Any, lesson: str) -> Any:
    """The calculator of the page shown, scrolled to (its form and script come) and mounted."""
    tab.locator(f"#calc-{lesson}").scroll_into_view_if_needed()
    tab.locator(f"form[data-calculator='{lesson}'][data-calc-state=ready]").wait_for()
    return tab.locator(f"form[data-calculator='{lesson}']")


def settle(tab: Any) -> None:
    """Let the calculator's next frame (when it recomputes) pass."""
    tab.evaluate("() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))")


def out(form: Any, name: str) -> float:
    value = form.locator(f"output[name='{name}']").get_attribute("data-value")
    return float(value)


def fill(tab: Any, form: Any, values: dict[str, Any]) -> None:
    for name, value in values.items():
        form.locator(f"[name='{name}']").fill(str(value))
    settle(tab)


def qwen3_8b(*names: str) -> dict[str, Any]:
    return {n: QWEN3_8B[n] for n in names}


DEPTHS = (0, 2048, 8192, 16384, 32768)


def test_the_kv_cache_calculator_bounds_decoding_as_step_4_did(tab: Any) -> None:
    """Qwen3-8B on the H200: the bytes bound at depth 0 and its line pass through the recorded
    bounds, the recorded speeds of both models are drawn, and the gaps are the recorded shares."""
    tab.goto("part-2/kv-cache/")
    form = mounted(tab, "kv-cache")
    assert form.locator("select[name=card]").input_value() == "h200"
    rec = lambda name: recorded("kv-cache", f"decode-speed.{name}")  # noqa: E731
    assert out(form, "weights_read") == rec("weights_read_8b")
    assert math.isclose(out(form, "decode_d0"), rec("bound_8b_d0"), rel_tol=1e-4)
    assert "tok/s" in form.locator("output[name=decode_d0]").inner_text()
    chart = form.locator("[data-chart2]")
    for d in DEPTHS:  # the line's value at each recorded depth: the recorded bound
        fill(tab, form, {"tokens": d})
        assert math.isclose(out(form, "decode_depth"), rec(f"bound_8b_d{d}"), rel_tol=1e-4), d
    # drawn: the line, in the chart's pixels, at each 8B point's depth stands above the point as
    # far as the recorded bound is above the speed (to a pixel's rounding)
    drawn = chart.locator("svg").evaluate(
        """svg => {
        const base = Number(svg.querySelector(".course-calc__axis-line").getAttribute("y1"));
        const line = svg.querySelector("path.course-calc__line--formula").getAttribute("d")
          .split(/[ML]/).filter(Boolean).map(p => p.trim().split(" ").map(Number));
        const eight = ".course-calc__point--recorded:not(.course-calc__s1)";
        return [...svg.querySelectorAll(eight)].map(c => {
          const x = Number(c.getAttribute("cx")), y = Number(c.getAttribute("cy"));
          const at = line.find(p => Math.abs(p[0] - x) < 0.06);
          return [c.getAttribute("data-name"), at ? (base - at[1]) / (base - y) : null]; }); }"""
    )
    assert len(drawn) == len(DEPTHS)
    for name, ratio in drawn:
        d = name.rsplit("_d", 1)[1]
        assert ratio is not None, name
        assert math.isclose(ratio, rec(f"bound_8b_d{d}") / rec(f"tok_s_8b_d{d}"), rel_tol=0.01)
    marks = chart.locator(".course-calc__point--recorded")
    assert marks.count() == 10
    ys = sorted(float(marks.nth(i).get_attribute("data-y")) for i in range(10))
    want = sorted(
        [rec(f"tok_s_8b_d{d}") for d in DEPTHS] + [rec(f"tok_s_06b_d{d}") for d in DEPTHS]
    )
    assert ys == want
    gap = form.locator("[data-gap2]").inner_text()
    for d in DEPTHS:
        assert f"{d:,} tokens {rec(f'frac_8b_d{d}'):,.0f}\u00a0%" in gap, (d, gap)


def test_the_kv_cache_calculator_gives_the_pages_numbers(tab: Any) -> None:
    tab.goto("part-2/kv-cache/")
    tab.wait_for_load_state("networkidle")
    assert tab.evaluate("typeof window.CourseCalculator") == "undefined"
    fetched = [u for u in tab.requests if "calculator" in u]
    assert fetched == [] and tab.locator("form[data-calculator]").count() == 0  # not before use
    form = mounted(tab, "kv-cache")
    fill(tab, form, qwen3_8b("num_hidden_layers", "num_key_value_heads", "head_dim"))
    fill(tab, form, {"bytes_per_number": 2, "tokens": 32768})
    assert out(form, "bytes_per_token") == recorded("kv-cache", "size.bytes_per_token_8b")
    assert out(form, "cache_bytes") == recorded("kv-cache", "size.cache_32768_8b")
    assert form.locator("output[name=cache_bytes]").inner_text() == "4,608\u00a0MiB"
    assert out(form, "room") == recorded("kv-cache", "cache-budget.room")
    assert out(form, "tokens_fit") == recorded("kv-cache", "cache-budget.tokens")
    fill(tab, form, {"tokens": recorded("kv-cache", "size.context_tokens")})
    assert out(form, "conversations") == recorded("kv-cache", "cache-budget.conversations")
    points = form.locator("[data-chart] .course-calc__point--recorded")
    assert points.count() == 2
    assert [float(points.nth(i).get_attribute("data-y")) for i in range(2)] == [
        recorded("kv-cache", "gpu-check.allocated_4096_8b"),
        recorded("kv-cache", "gpu-check.allocated_32768_8b"),
    ]
    gap = recorded("kv-cache", "gpu-check.allocated_4096_8b") - recorded(
        "kv-cache", "size.cache_4096_8b"
    )
    assert f"+{gap:,} B" in form.locator("[data-gap]").inner_text()
    # Llama-2-7B's config without num_key_value_heads (older files lack it): one per query head
    llama2 = json.loads((REPO / "lab/smaller-cache/models/Llama-2-7B/config.json").read_text())
    del llama2["num_key_value_heads"]
    form.locator("textarea[name=config_json]").fill(json.dumps(llama2))
    form.locator("[data-action=read-config]").click()
    settle(tab)
    assert form.locator("[name=num_key_value_heads]").input_value() == "32"
    assert out(form, "bytes_per_token") == recorded(
        "smaller-cache", "configs.bytes_per_token_llama_2_7b"
    )
    status = form.locator(".course-calc__status").first.inner_text()
    assert "num_key_value_heads 32 (none given: one per query head)" in status
    assert "are Qwen3-8B's" in form.locator("[data-gap]").inner_text()
    form.locator("[data-action=reset]").click()
    settle(tab)
    assert out(form, "bytes_per_token") == recorded("kv-cache", "size.bytes_per_token_8b")
    assert len([u for u in tab.requests if u.endswith("calculator.js")]) == 1


def test_the_gpu_memory_calculator_gives_each_rule_as_the_page_states(tab: Any) -> None:
    form = open_calculator(tab, "gpu-memory")
    names = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
             "hidden_size", "intermediate_size", "vocab_size")  # fmt: skip
    fill(tab, form, qwen3_8b(*names) | {"bytes_per_number": 2, "tokens": 32768})
    rec = lambda name: recorded("gpu-memory", name)  # noqa: E731
    assert out(form, "weights") == rec("paper.weights_8b")
    assert out(form, "blocks") == rec("paper.blocks_h200_8b")
    assert out(form, "cache_tokens_transformers") == rec("paper.tokens_h200_8b")
    assert out(form, "conversations_transformers") == rec("paper.conv_32k_h200_8b")
    # the planner is the release the run had installed (as step 1 planned); the other one the
    # form offers plans otherwise, and the gaps stay those of the run's own release
    release = form.locator("select[name=release]")
    ran = release_choice(GPU_MEMORY_RELEASES, run_engine("gpu-memory", "transformers"))
    assert release.input_value() == ran
    other = next(c for c, _ in GPU_MEMORY_RELEASES if c != ran)
    release.select_option(other)
    settle(tab)
    assert out(form, "blocks") != rec("paper.blocks_h200_8b")
    assert f"The line follows the {other} planner" in form.locator("[data-gap]").inner_text()
    release.select_option(ran)
    settle(tab)
    assert out(form, "blocks") == rec("paper.blocks_h200_8b")
    fill(tab, form, {"tokens": 8192})
    assert out(form, "conversations_transformers") == rec("paper.conv_8k_h200_8b")
    form.locator("select[name=card]").select_option("step1-24gb")
    settle(tab)
    assert out(form, "conversations_transformers") == rec("paper.conv_8k_24gb_8b")
    assert out(form, "batch_tokens") == rec("paper.batch_tokens_24gb_8b")
    fill(tab, form, {"tokens": 40960})
    assert out(form, "conversations_transformers") == rec("paper.conv_full_24gb_8b")
    # vLLM's rule, fed the published A100 log's figures, gives the log's own cache and concurrency
    llama3 = {k: v for k, v in QWEN3_8B.items() if k not in ("head_dim",)}
    llama3 |= {"model_type": "llama", "num_hidden_layers": 32, "intermediate_size": 14336,
               "vocab_size": 128256, "tie_word_embeddings": False}  # fmt: skip
    form.locator("textarea[name=config_json]").fill(json.dumps(llama3))
    form.locator("[data-action=read-config]").click()
    form.locator("select[name=card]").select_option("a100-40gb")
    fill(tab, form, {"gpu_memory_utilization": "0.90", "tokens": 8192})
    assert round(out(form, "cache_vllm") / 2**30, 2) == rec("paper.crosscheck_cache_gib")
    assert out(form, "conversations_vllm") == int(rec("paper.crosscheck_concurrency"))
    grid = form.locator("table.course-calc__grid").inner_text()
    assert "transformers" in grid and "vLLM" in grid and "llama.cpp" in grid
    assert form.locator(".course-calc__point--recorded").count() == 3
    release.select_option(other)
    form.locator("[data-action=reset]").click()
    settle(tab)
    assert release.input_value() == ran
    assert out(form, "blocks") == rec("paper.blocks_h200_8b")


def test_the_smaller_cache_calculator_counts_each_design_as_the_page_does(tab: Any) -> None:
    form = open_calculator(tab, "smaller-cache")
    names = ("num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim",
             "hidden_size", "intermediate_size", "vocab_size")  # fmt: skip
    fill(tab, form, qwen3_8b(*names) | {"tokens": 32768})
    rec = lambda name: recorded("smaller-cache", name)  # noqa: E731
    for design in ("mha", "gqa", "mqa", "mla", "sliding"):
        assert out(form, f"bytes_per_token_{design}") == rec(f"designs.bytes_per_token_{design}")
        assert out(form, f"cache_{design}") == rec(f"designs.cache_32k_{design}")
        assert out(form, f"conversations_{design}") == rec(f"serving.conversations_h200_{design}")
    assert out(form, "cache_gqa_fp8") == rec("fp8-cache.cache_32k_fp8")
    assert out(form, "conversations_gqa_fp8") == rec("serving.conversations_h200_gqa_fp8")
    form.locator("select[name=card]").select_option("rtx-4090")
    settle(tab)
    for design in ("mha", "gqa", "mqa", "mla", "sliding", "gqa_fp8"):
        assert out(form, f"conversations_{design}") == rec(f"serving.conversations_24gb_{design}")
    assert form.locator(".course-calc__point--recorded").count() == 6
    deepseek = (REPO / "lab/smaller-cache/models/DeepSeek-V3/config.json").read_text()
    form.locator("textarea[name=config_json]").fill(deepseek)
    form.locator("[data-action=read-config]").click()
    settle(tab)
    assert out(form, "bytes_per_token_mla") == rec("configs.bytes_per_token_deepseek_v3")


def test_the_roofline_calculator_draws_the_measured_ridge(tab: Any) -> None:
    form = open_calculator(tab, "prefill-decode")
    names = ("num_attention_heads", "num_key_value_heads", "head_dim", "hidden_size",
             "intermediate_size")  # fmt: skip
    fill(tab, form, qwen3_8b(*names) | {"tokens": 1})
    rec = lambda name: recorded("prefill-decode", name)  # noqa: E731
    assert out(form, "ridge_tokens") == pytest.approx(rec("limits.ridge_tokens_measured"), 1e-9)
    assert out(form, "ridge") == pytest.approx(rec("limits.ridge_measured"), 1e-9)
    assert form.locator("output[name=bound]").inner_text().startswith("memory")
    fill(tab, form, {"tokens": 8192})
    assert form.locator("output[name=bound]").inner_text().startswith("arithmetic")
    assert out(form, "tflop_s") == pytest.approx(rec("limits.peak_tflop_s") * 1e12, 1e-9)
    assert form.locator(".course-calc__point--recorded").count() == 6
    assert form.locator("line.course-calc__vline--measured").count() == 1
    ridge = f"was measured at {rec('limits.ridge_tokens_measured'):.0f}"
    assert ridge in form.locator("[data-gap]").inner_text()


def slower(data: Any, factor: float) -> None:
    """Every sweep row's TFLOP/s, as a smaller card's run would measure them."""
    for row in data.get("sweep", {}).values():
        row["tflop_s"]["median"] *= factor


@pytest.fixture(scope="module")
def learner(repo_site: tuple[Path, str], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """For each lesson, the JSON its zip's compare.py writes for a learner's run on an RTX 4090:
    the recorded results files put where the learner's run writes them, the speeds slowed."""
    site_dir, _ = repo_site
    out = tmp_path_factory.mktemp("learner")
    for lesson, number in NUMBERS.items():
        with zipfile.ZipFile(site_dir / "downloads" / f"lesson-{number}.zip") as archive:
            archive.extractall(out)
        lab = out / f"lesson-{number}" / "lab"
        run_id = next(p.run_id for p in lesson_page_runs(REPO) if p.lesson == lesson)
        for kept in (REPO / "build" / lesson / run_id / "files").glob("*/results/*.json"):
            (lab / "results").mkdir(exist_ok=True)
            data = json.loads(kept.read_text())
            if kept.name == "limits.json":
                slower(data, 0.2)
            (lab / "results" / kept.name).write_text(json.dumps(data))
        done = subprocess.run(
            [sys.executable, "-I", "compare.py", "--gpu", "NVIDIA GeForce RTX 4090",
             "--json", str(out / f"{lesson}.json")],
            cwd=lab, capture_output=True, text=True, timeout=60, env={"PATH": "/usr/bin:/bin"},
        )  # fmt: skip
        assert "give it to the calculator" in done.stdout, done.stdout + done.stderr
        shutil.rmtree(out / f"lesson-{number}")
    return out


@pytest.mark.parametrize("lesson", list(NUMBERS))
def test_a_learners_compare_json_is_plotted_beside_ours(
    tab: Any, learner: Path, lesson: str
) -> None:
    form = open_calculator(tab, lesson)
    recorded_points = form.locator(".course-calc__point--recorded").count()
    ours = form.locator("[data-gap]").inner_text()
    form.locator("input[name=compare_file]").set_input_files(str(learner / f"{lesson}.json"))
    form.locator(".course-calc__point--mine").first.wait_for()
    settle(tab)
    data = json.loads((learner / f"{lesson}.json").read_text())
    rows = {r["name"]: r for r in data["values"]}
    mine = form.locator(".course-calc__point--mine")
    names = [mine.nth(i).get_attribute("data-name") for i in range(mine.count())]
    assert len(names) == recorded_points and all(isinstance(rows[n]["theirs"], float | int)
                                                 for n in names)  # fmt: skip
    assert form.locator(".course-calc__point--recorded").count() == recorded_points
    scaled = [r for n, r in rows.items() if n in names and r["kind"] in ("bandwidth", "compute")]
    assert form.locator(".course-calc__point--scaled").count() == len(scaled)
    said = form.locator("[data-mine]").inner_text()
    assert f"Plotted {recorded_points} of your values from a run on NVIDIA GeForce RTX 4090" in said
    assert form.locator("select[name=card]").input_value() == "rtx-4090"
    if lesson == "prefill-decode":  # the speeds scale with the card: ours scaled, theirs slower
        assert len(scaled) >= 3
        assert form.locator("[name=bandwidth]").input_value() == "1008.0"
    legend = form.locator(".course-calc__legend").first.inner_text()
    assert "your run" in legend
    # the gaps stay the recorded run's, whatever card the line is now drawn for
    gap = form.locator("[data-gap]").inner_text()
    first = ours.split(". ")[0].rstrip(".")
    assert gap.startswith(first) and "Your run against ours" in gap


def test_a_calculator_mounts_once_after_instant_navigation(tab: Any) -> None:
    open_calculator(tab, "kv-cache")
    tab.evaluate("window.__marker = 1")
    tab.locator(".md-footer__link--next").click()  # Material's instant navigation
    tab.wait_for_url("**/part-2/gpu-memory/")
    other = mounted(tab, "gpu-memory")
    assert out(other, "blocks") == recorded("gpu-memory", "paper.blocks_h200_8b")
    tab.locator(".md-footer__link--prev").click()
    tab.wait_for_url("**/part-2/kv-cache/")
    form = mounted(tab, "kv-cache")
    fill(tab, form, {"tokens": 4096})
    assert out(form, "cache_bytes") == recorded("kv-cache", "size.cache_4096_8b")
    for chart in ("[data-chart]", "[data-chart2]"):  # each drawn once, not twice
        assert form.locator(f"{chart} svg.course-calc__svg").count() == 1, chart
    assert tab.evaluate("window.__marker") == 1  # no page load in between
    assert len([u for u in tab.requests if u.endswith("calculator.js")]) == 1


def test_a_form_that_comes_by_itself_takes_the_focus_its_button_had(tab: Any) -> None:
    """Tabbing to the button brings it near the screen, and the form comes without a key
    pressed: the focus goes into the form instead of being lost with the button."""
    tab.goto("part-2/kv-cache/")
    tab.locator("#calc-kv-cache .course-calc__slot[data-watched]").wait_for(state="attached")
    assert tab.locator("form[data-calculator=kv-cache]").count() == 0  # far below: not yet
    tab.locator("#calc-kv-cache [data-action=open-calculator]").focus()  # scrolls it near
    tab.locator("form[data-calculator=kv-cache][data-calc-state=ready]").wait_for()
    tab.wait_for_function("document.activeElement && document.activeElement.name === 'config_json'")


def test_a_calculator_works_by_keyboard(tab: Any) -> None:
    tab.goto("part-2/kv-cache/")
    # the page's script has wired the button (it marks the slot as it does): a key pressed
    # before that does nothing, as on any page whose script has not run yet
    tab.locator("#calc-kv-cache .course-calc__slot[data-watched]").wait_for(state="attached")
    tab.locator("#calc-kv-cache [data-action=open-calculator]").focus()
    tab.keyboard.press("Enter")  # the button brings the form and puts the focus in it
    tab.locator("form[data-calculator=kv-cache][data-calc-state=ready]").wait_for()
    assert tab.evaluate("document.activeElement.name") == "config_json"
    for _ in range(2):
        tab.keyboard.press("Tab")  # past "Read config.json"
    assert tab.evaluate("document.activeElement.name") == "num_hidden_layers"
    tab.keyboard.press("Control+A")
    tab.keyboard.type("28")
    tab.keyboard.press("Tab")
    assert tab.evaluate("document.activeElement.name") == "num_key_value_heads"
    settle(tab)
    form = tab.locator("form[data-calculator=kv-cache]")
    assert out(form, "bytes_per_token") == recorded("kv-cache", "size.bytes_per_token_06b")


@pytest.mark.parametrize("scheme", ["light", "dark"])
@pytest.mark.parametrize("lesson", list(NUMBERS))
def test_axe_finds_nothing_serious_in_a_calculator(
    tab: Any, learner: Path, lesson: str, scheme: str
) -> None:
    from axe_playwright_python.sync_playwright import Axe

    tab.emulate_media(color_scheme=scheme)
    form = open_calculator(tab, lesson)
    form.locator("input[name=compare_file]").set_input_files(str(learner / f"{lesson}.json"))
    form.locator(".course-calc__point--mine").first.wait_for()
    results = Axe().run(tab, context=f"#calc-{lesson}")
    serious = [
        f"{v['id']} ({v['impact']}): {v['help']} -> {[n['target'] for n in v['nodes']][:4]}"
        for v in results.response["violations"]
        if v["impact"] in ("serious", "critical")
    ]
    assert serious == [], "\n".join(serious)
    assert results.response["passes"], "axe checked nothing"


def test_the_pdf_prints_the_worked_rows_not_the_form(repo_site: tuple[Path, str]) -> None:
    site_dir, _ = repo_site
    for lesson, number in NUMBERS.items():
        pdf = site_dir / "downloads" / f"lesson-{number}.pdf"
        text = subprocess.run(
            ["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True, check=True
        ).stdout
        assert "Worked rows" in text, lesson
        assert "Paste your config.json" not in text and "compare.py --json" not in text, lesson
    text = subprocess.run(
        ["pdftotext", str(site_dir / "downloads" / "lesson-2.4.pdf"), "-"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    gap = recorded("kv-cache", "gpu-check.allocated_4096_8b") - recorded(
        "kv-cache", "size.cache_4096_8b"
    )
    assert f"+{gap:,} B" in text
    bound = recorded("kv-cache", "decode-speed.bound_8b_d0")
    assert "Decoding with an empty cache" in text and f"{bound:,.0f}" in text
