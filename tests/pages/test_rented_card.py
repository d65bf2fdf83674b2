"""The card a lab's hands-on part is priced on: the RTX 4090 a learner rents when the lab's largest
fixed peak fits the 4090's memory as the course's facts give it, else the recorded card; the
minimum GPU memory from the recorded peaks, a step that sizes itself to the card left out; the
llama.cpp build counted in the hands-on time."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

from support import REPO

from course.lab.facts import FACTS_FILE
from course.lab.load import load_lab
from course.pages import facts
from course.pages.choose import newest_page_run
from course.record.store import Store


def test_lesson_24_is_priced_on_a_4090_and_needs_what_its_largest_fixed_step_took() -> None:
    lab = load_lab(REPO / "lab" / "kv-cache" / "lab.yml")
    run = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert run is not None
    need = facts.gpu_need(run, lab)
    sized = {s.id for s in lab.lab.steps if s.sizes_to_card}
    assert sized == {"cache-budget"}
    peaks = {
        r.id: r.values["peak_gpu_memory_reserved"].value
        for r in run.record.steps
        if "peak_gpu_memory_reserved" in r.values and r.id not in sized
    }
    largest = max(peaks, key=lambda step: peaks[step])
    assert need.step == largest and need.peak == peaks[largest]  # ~20 GiB, not step 5's 125 GiB
    assert [step for step, _ in need.sized] == ["cache-budget"]
    assert facts.card_bytes(REPO, facts.RENTED_CARD) == 23.52 * 2**30  # the facts file's
    assert facts.rented_card(REPO, run, lab) == "NVIDIA GeForce RTX 4090"
    offers = [p.offer for p in facts.card_prices(REPO, facts.RENTED_CARD)]
    assert offers == ["RTX 4090, community cloud", "RTX 4090, secure cloud"]
    # the build of llama.cpp, as the record timed it on the GPU's machine, is hands-on time
    spent = facts.hands_on(run, lab)
    built = run.record.step("build-llama-cpp").values["build_seconds"].value
    assert spent.builds == built and 60 < spent.builds < 900  # minutes, as the record timed it
    assert "to build llama.cpp" in facts.hands_on_text(spent, ["llama.cpp"])


def test_a_lab_whose_fixed_peak_does_not_fit_the_4090_is_priced_on_its_own_card(
    tmp_path: Path,
) -> None:
    (tmp_path / FACTS_FILE).parent.mkdir(parents=True)
    text = (REPO / FACTS_FILE).read_text(encoding="utf-8")
    start = text.index("[cards.rtx-4090]")
    smaller = re.sub(
        r"torch_total = \{ value = 23\.52,", "torch_total = { value = 12.0,", text[start:], count=1
    )
    (tmp_path / FACTS_FILE).write_text(text[:start] + smaller, encoding="utf-8")
    shutil.copytree(REPO / "lab" / "kv-cache", tmp_path / "lab" / "kv-cache")
    # the kits it includes (the lab kit and the llama.cpp kit), beside the smaller card's facts
    # written above
    shutil.copytree(REPO / "lab" / "common", tmp_path / "lab" / "common", dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("facts.toml", "__pycache__"))  # fmt: skip
    lab = load_lab(tmp_path / "lab" / "kv-cache" / "lab.yml")
    run = newest_page_run(Store(REPO / "build"), "kv-cache")
    assert run is not None
    assert facts.card_bytes(tmp_path, facts.RENTED_CARD) == 12 * 2**30
    assert facts.rented_card(tmp_path, run, lab) == "NVIDIA H200"
    # a lab without GPU steps rents nothing
    recipe = tmp_path / "lab" / "kv-cache" / "lab.yml"
    recipe.write_text(recipe.read_text(encoding="utf-8").replace("    needs: gpu\n", ""))
    assert facts.rented_card(tmp_path, run, load_lab(recipe)) is None
