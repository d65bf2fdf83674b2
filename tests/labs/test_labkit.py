"""The lab kit (lab/common/labkit) on the CPU: timing and its spread, results files, peak memory,
the device options, the facts' memory rules, and the compact decoder against transformers' own
Qwen3 and against the textbook model in every attention design."""

from __future__ import annotations

import copy
import json
import math
import shutil
import subprocess
import sys
import time
import tomllib
import weakref
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

REPO = Path(__file__).resolve().parents[2]
KIT = REPO / "lab" / "common" / "labkit"
NO_TORCH = "import sys; sys.modules['torch'] = None\n"


@pytest.fixture(scope="module")
def kit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """The kit's modules, imported from a copy (importing writes caches beside the sources)."""
    folder = tmp_path_factory.mktemp("kit")
    shutil.copytree(KIT, folder / "labkit", ignore=shutil.ignore_patterns("__pycache__"))
    sys.path.insert(0, str(folder))
    try:
        import labkit.checks
        import labkit.decoder
        import labkit.device
        import labkit.facts
        import labkit.logs
        import labkit.memory
        import labkit.reference
        import labkit.results
        import labkit.shapes
        import labkit.timing

        yield {m.__name__.split(".")[1]: m for m in (
            labkit.checks, labkit.decoder, labkit.device, labkit.facts, labkit.logs,
            labkit.memory, labkit.reference, labkit.results, labkit.shapes, labkit.timing,
        )}  # fmt: skip
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n == "labkit" or n.startswith("labkit.")]:
            del sys.modules[name]


def python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """Run code in a fresh interpreter with the kit importable, as a lab's script would."""
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=120,
        env={"PYTHONPATH": str(KIT.parent), "PYTHONDONTWRITEBYTECODE": "1", "PATH": "/usr/bin"},
    )  # fmt: skip


# --- standard library only ---------------------------------------------------------------------


def test_the_paper_modules_run_without_torch(tmp_path: Path) -> None:
    code = NO_TORCH + (
        "from labkit import checks, configs, facts, logs, results, shapes, timing, units\n"
        "s = timing.derive(timing.Spread.of([0.02, 0.01, 0.04]), lambda x: 1 / x)\n"
        "timing.bytes_bound(timing.Spread.of([0.01]), 1e3, 10, held=True)\n"
        "print(results.write_results('paper', {'tok_s': s}, folder='out'))\n"
        "print(facts.room('rtx-4090').bytes)\n"
        "import torch\n"
    )
    done = python(code, tmp_path)
    assert done.returncode == 1 and "import of torch halted" in done.stderr, done.stderr
    lines = done.stdout.split()
    assert lines[0] == "out/paper.json"
    written = json.loads((tmp_path / "out" / "paper.json").read_text())
    # the seconds' quartiles are 0.015 and 0.03: tokens per second swap them
    assert written == {"tok_s": {"max": 100.0, "median": 50.0, "min": 25.0, "n": 3,
                                 "q1": 1 / 0.03, "q3": 1 / 0.015}}  # fmt: skip


# --- timing ------------------------------------------------------------------------------------


def test_a_spread_holds_median_quartiles_extremes_and_count(kit: dict[str, ModuleType]) -> None:
    spread = kit["timing"].Spread.of([5.0, 1.0, 3.0, 2.0, 4.0])
    assert spread.as_dict() == {"median": 3.0, "min": 1.0, "q1": 2.0, "q3": 4.0, "max": 5.0, "n": 5}
    one = kit["timing"].Spread.of([0.25])
    assert (one.min, one.q1, one.median, one.q3, one.max, one.n) == (0.25,) * 5 + (1,)
    with pytest.raises(ValueError, match="at least one sample"):
        kit["timing"].Spread.of([])


def test_derive_maps_every_statistic_and_swaps_for_a_decreasing_one(
    kit: dict[str, ModuleType],
) -> None:
    t = kit["timing"]
    seconds = t.Spread.of([0.010, 0.020, 0.040, 0.050, 0.025])
    tok_s = t.derive(seconds, lambda s: 1 / s)  # decreasing: the slowest repeat is the min
    assert (tok_s.min, tok_s.q1, tok_s.median, tok_s.q3, tok_s.max) == (
        1 / 0.050, 1 / 0.040, 1 / 0.025, 1 / 0.020, 1 / 0.010
    )  # fmt: skip
    assert tok_s.n == 5
    percent = t.derive(seconds, lambda s: 100 * s / 0.1)  # increasing: order kept
    assert (percent.min, percent.max) == (10.0, 50.0)
    assert t.derive(0.5, lambda s: 1 / s) == 2.0  # a plain number passes through
    with pytest.raises(ValueError, match="monotonic"):
        t.derive(seconds, lambda s: (s - 0.03) ** 2)


def test_a_ratio_pairs_the_extremes(kit: dict[str, ModuleType]) -> None:
    t = kit["timing"]
    a, b = t.Spread.of([4.0, 6.0, 8.0]), t.Spread.of([1.0, 2.0, 4.0])
    r = t.ratio(a, b)
    assert (r.min, r.median, r.max, r.n) == (1.0, 3.0, 8.0, 3)
    assert t.ratio(6.0, 3.0) == 2.0


def test_gpu_timing_on_the_cpu_warms_up_then_times_each_repeat(kit: dict[str, ModuleType]) -> None:
    import torch

    t, cpu, calls = kit["timing"], torch.device("cpu"), []

    def work() -> None:
        calls.append(time.perf_counter())
        time.sleep(0.002)

    spread = t.time_gpu(work, cpu, repeats=4, warmup=3, calls=2)
    assert len(calls) == 3 + 4 * 2 and spread.n == 4
    assert 0.002 <= spread.min <= spread.q1 <= spread.median <= spread.q3 <= spread.max
    calls.clear()
    # as many calls a sample as last min_seconds, at most max_calls: 1 + a probe + 2 x 3
    auto = t.time_gpu(work, cpu, repeats=2, warmup=1, min_seconds=10.0, max_calls=3)
    assert len(calls) == 1 + 1 + 2 * 3 and auto.n == 2
    copy = t.copy_bandwidth(cpu, 2**20, repeats=3)
    assert copy.n == 3 and 0 < copy.min <= copy.median <= copy.max


def test_wall_timing_runs_setup_outside_the_timed_region(kit: dict[str, ModuleType]) -> None:
    import torch

    made: list[int] = []

    def setup() -> int:
        time.sleep(0.02)  # outside: it must not show in the timing
        made.append(len(made))
        return made[-1]

    seen: list[int] = []
    spread = kit["timing"].time_wall(
        seen.append, torch.device("cpu"), repeats=3, warmup=2, setup=setup
    )
    assert seen == [0, 1, 2, 3, 4] and spread.n == 3 and spread.max < 0.01
    assert kit["timing"].graphed(len, torch.device("cpu")) is len  # no graphs on the CPU


def test_a_speed_is_held_to_its_bytes_bound_on_a_gpu_only(
    kit: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    t = kit["timing"]
    # 10 B a token at 1,000 B/s: at most 100 tok/s; a token in 10 to 40 ms is 25 to 100 tok/s
    tok_s, bound, fraction = t.bytes_bound(t.Spread.of([0.01, 0.02, 0.04]), 1000.0, 10, True)
    assert (tok_s.min, tok_s.median, tok_s.max) == (25.0, 50.0, 100.0)
    assert bound == 100.0 and (fraction.min, fraction.median, fraction.max) == (0.25, 0.5, 1.0)
    bw = t.Spread.of([900.0, 1000.0, 1100.0])  # a measured bandwidth: the bound is a spread too
    _, bound, fraction = t.bytes_bound(t.Spread.of([0.02]), bw, 10, True)
    assert (bound.min, bound.median, bound.max) == (90.0, 100.0, 110.0)
    assert fraction.min == pytest.approx(50 / 110) and fraction.max == pytest.approx(50 / 90)
    fast = t.Spread.of([0.009, 0.009])  # 111 tok/s: more than the bytes allow
    t.bytes_bound(fast, 1000.0, 10, held=False)  # on a CPU no bound holds
    with pytest.raises(SystemExit):
        t.bytes_bound(fast, 1000.0, 10, held=True, what="gqa")
    assert "SANITY CHECK FAILED: gqa: 111.1 tok/s is faster than the bytes allow (100.0)" in (
        capsys.readouterr().err
    )


def test_a_given_bandwidth_is_checked_and_the_speed_options_parse(
    kit: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    t, cpu = kit["timing"], torch.device("cpu")
    assert t.bandwidth(cpu, 2**20, given=4e12) == 4e12
    assert t.bandwidth(cpu, 2**20).n == 10  # measured when not given
    with pytest.raises(SystemExit):
        t.bandwidth(cpu, 2**20, given=1e13)
    assert "a copy bandwidth of 10.00 TB/s is beyond any memory of today" in capsys.readouterr().err
    parser = kit["device"].arguments("Step 9.", speed=True)
    args = parser.parse_args(["--bandwidth", "4e12", "--no-compile"])
    assert (args.bandwidth, args.no_compile, args.tiny) == (4e12, True, False)
    plain = kit["device"].arguments("Step 9.").parse_args([])
    assert not hasattr(plain, "bandwidth") and not hasattr(plain, "no_compile")


# --- logs --------------------------------------------------------------------------------------


def test_a_loggers_messages_are_collected_and_only_the_chosen_shown(
    kit: dict[str, ModuleType],
) -> None:
    import logging

    name = "labkit-test-engine"
    logger, printed = logging.getLogger(name), []

    class Printed(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            printed.append(record.getMessage())

    handler = Printed()
    logger.addHandler(handler)
    logger.setLevel(logging.ERROR)
    try:
        with kit["logs"].collect(name) as lines:
            logger.debug("too detailed")
            logger.info("Paged cache initialized: 12 blocks")
            logger.warning("out of blocks")
        assert lines == ["Paged cache initialized: 12 blocks", "out of blocks"] and not printed

        def warnings(record: logging.LogRecord) -> bool:
            return record.levelno >= logging.WARNING

        with kit["logs"].collect(name, show=warnings) as lines:
            logger.info("planned")
            logger.warning("offloaded a request")
        assert lines == ["planned", "offloaded a request"]
        assert printed == ["offloaded a request"]
        assert logger.level == logging.ERROR and not logger.filters  # as it was
        logger.error("after")  # printed as ever, no longer collected
        assert lines == ["planned", "offloaded a request"]
        assert printed == ["offloaded a request", "after"]
    finally:
        logger.removeHandler(handler)
        logger.setLevel(logging.NOTSET)


# --- results -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"qwen3-8b": {"depths": {"0": {"tok_s": math.nan}}}},
         "the value at qwen3-8b.depths.0.tok_s is nan; JSON has no NaN or infinity: check what"
         " produced it (a division by zero, a timing of 0 s, an empty list)"),
        ({"ratios": [1.0, math.inf]}, "the value at ratios.1 is inf; JSON has no NaN or infinity"),
        ({"models": {"qwen3-0.6b": 1}},
         "key 'qwen3-0.6b' at models holds a '.', which a capture's key path cannot reach: write"
         " 'qwen3-0_6b' (results.key_of)"),
        ({"when": object()}, "the value at when is a object, not a JSON value"),
    ],
)  # fmt: skip
def test_results_refuse_what_json_cannot_hold_naming_the_key(
    kit: dict[str, ModuleType], tmp_path: Path, capsys: pytest.CaptureFixture[str],
    data: dict[str, Any], message: str,
) -> None:  # fmt: skip
    with pytest.raises(SystemExit) as stopped:
        kit["results"].write_results("decode", data, folder=tmp_path)
    assert stopped.value.code == 2
    said = capsys.readouterr().err
    assert f"SANITY CHECK FAILED: {tmp_path / 'decode.json'}: {message}" in said
    assert list(tmp_path.iterdir()) == []  # nothing half-written


def test_results_are_deterministic_and_write_spreads(
    kit: dict[str, ModuleType], tmp_path: Path
) -> None:
    r, t = kit["results"], kit["timing"]
    data = {"b": t.Spread.of([2.0, 1.0]), "a": (1, "x", None, True)}
    path = r.write_results("step", data, folder=tmp_path)
    first = path.read_bytes()
    r.write_results("step", dict(reversed(list(data.items()))), folder=tmp_path)
    assert path.read_bytes() == first
    assert first.decode().splitlines() == [
        "{", '  "a": [', "    1,", '    "x",', "    null,", "    true", "  ],", '  "b": {',
        '    "max": 2.0,', '    "median": 1.5,', '    "min": 1.0,', '    "n": 2,',
        '    "q1": 1.25,', '    "q3": 1.75', "  }", "}",
    ]  # fmt: skip
    assert first.endswith(b"}\n")
    assert r.read_results("step", folder=tmp_path) == json.loads(first)
    assert r.read_results("missing", folder=tmp_path) is None
    assert r.key_of("Qwen/Qwen3-0.6B") == "qwen3-0_6b"


# --- peak memory and the device ----------------------------------------------------------------


def test_peak_memory_on_the_cpu_is_zero_and_says_so(
    kit: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    m, cpu = kit["memory"], torch.device("cpu")
    peak = m.PeakMemory(cpu)
    big = torch.ones(1 << 20)
    assert peak.part() == {"allocated": 0, "reserved": 0}
    report = peak.report(paper=big.nbytes, what="one tensor")
    assert report == {"allocated": 0, "reserved": 0, "device": "cpu", "paper": 4_194_304,
                      "fits_24gb": True}  # fmt: skip
    said = capsys.readouterr().out
    assert "peak GPU memory: none, this run used the CPU" in said
    assert max(len(line) for line in said.splitlines()) <= 100  # a terminal block shows it whole
    assert (
        "fits a 24 GB card (RTX 4090: 23.52 GiB as PyTorch sees it, less about 618.8 MiB of" in said
    )
    assert (m.free_bytes(cpu), m.total_bytes(cpu), m.outside_bytes(cpu), m.allocated(cpu)) == (
        None, None, 0, 0
    )  # fmt: skip
    assert m.PeakMemory(cpu).report(sized_to_card="it fills any card")["fits_24gb"] is None


def test_a_part_still_referenced_after_it_was_freed_stops_the_step(
    kit: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    m, cpu = kit["memory"], torch.device("cpu")
    kept = torch.ones(4)
    gone = [weakref.ref(kept)]
    assert m.check_freed(cpu, 0, "design gqa", gone, strict=False) == 0
    assert "WARNING: design gqa: 1 of its objects are still referenced" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        m.check_freed(cpu, 0, "design gqa", gone)
    assert "SANITY CHECK FAILED: design gqa: 1 of its objects" in capsys.readouterr().err
    del kept
    assert m.check_freed(cpu, 0, "design gqa", gone) == 0


def test_the_device_options_and_a_missing_gpu(
    kit: dict[str, ModuleType], capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    d = kit["device"]
    args = d.arguments("Step 9: a test.\n\nMore.", weights=True).parse_args(
        ["--device", "cpu", "--tiny", "--weights", "Qwen/Qwen3-0.6B"]
    )
    assert (args.device, args.tiny, args.weights) == ("cpu", True, "Qwen/Qwen3-0.6B")
    assert d.pick(args).type == "cpu"
    assert d.describe(torch.device("cpu"), "torch", "surely-not-a-package") == (
        f"device: cpu (CPU); torch {torch.__version__}, surely-not-a-package not installed"
    )
    if torch.cuda.is_available():
        pytest.skip("a GPU is visible here")
    with pytest.raises(SystemExit):
        d.pick_device("cuda")
    assert ("SANITY CHECK FAILED: no CUDA GPU is visible; for a quick run on the CPU use"
            " --device cpu --tiny") in capsys.readouterr().err  # fmt: skip
    with pytest.raises(SystemExit):
        d.pick_device("cpu", tiny=False, cpu_needs_tiny=True)


# --- the facts and the engines' rules ----------------------------------------------------------


def test_vllm_rule_gives_the_published_logs_own_answer(kit: dict[str, ModuleType]) -> None:
    """The A100 log's working space put in, the rule gives its 11.12x; the weights counted from
    Llama-3-8B's config are the log's 14.96 GiB."""
    f = kit["facts"]
    log = "crosschecks.vllm-a100"

    def gib(name: str) -> int:
        return round(f.fact(f"{log}.{name}").base)

    budget = f.vllm(f.get(f"{log}.card"), weights=gib("weights"), non_torch=gib("non_torch"),
                    activation_peak=gib("activation_peak"),
                    share=f.fact(f"{log}.gpu_memory_utilization").value)  # fmt: skip
    per_token = 2 * 32 * 8 * 128 * 2  # Llama-3-8B: layers, kv heads, head size, bf16
    tokens = int(f.fact(f"{log}.tokens_per_request").value)
    assert (
        round(f.concurrency(budget.cache, per_token, tokens), 2)
        == f.fact(f"{log}.concurrency").value
    )
    assert round(budget.cache / 2**30, 2) == f.fact(f"{log}.kv_cache").value
    assert budget.rule.startswith("vLLM: gpu_memory_utilization 0.90 of the 39.50 GiB PyTorch sees")
    from labkit.configs import weight_bytes

    assert round(weight_bytes(f.model("llama-3-8b")) / 2**30, 2) == f.fact(f"{log}.weights").value
    # the default share is the newest release's
    assert f.vllm("h200", weights=0, non_torch=0, activation_peak=0).share == 0.92


def test_each_engine_rule_names_itself_and_counts_conversations(kit: dict[str, ModuleType]) -> None:
    f = kit["facts"]
    h200 = f.card("h200")
    t = f.transformers("h200", model_key="qwen3-8b", share=0.5)
    weights = 2 * (36 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 12288 + 2 * 4096 + 256)
                   + 2 * 151_936 * 4096 + 4096)  # fmt: skip
    assert t.lines["weights"] == weights
    assert t.cache == int((h200.torch_total - h200.cuda_context - weights) * 0.5)
    assert t.rule.startswith("transformers: max_memory_percent 0.50 of the memory free after")
    assert t.as_dict()["engine"] == "transformers" and t.as_dict()["card"] == "h200"
    small = f.transformers("rtx-4090", model_key="qwen3-8b")  # no measured context: the H200's
    assert "about 618.8 MiB of CUDA context (as measured on the H200)" in small.rule
    ll = f.llama_cpp(32_768, 147_456)
    assert ll.cache == 32_768 * 147_456 and ll.conversations(147_456, 32_768) == 1
    assert f.conversations(3 * 256 * 100, 100, 300, block=256) == 1  # 3 blocks, 2 a conversation
    assert f.conversations(3 * 256 * 100, 100, 300) == 2
    assert f.conversations(-5, 100, 300) == 0


def test_a_missing_fact_names_the_close_match(kit: dict[str, ModuleType]) -> None:
    f = kit["facts"]
    with pytest.raises(KeyError) as caught:
        f.fact("cards.rtx-4090.torch_totl")
    assert str(caught.value) == (
        "no fact 'cards.rtx-4090.torch_totl' in facts.toml (did you mean"
        " 'cards.rtx-4090.torch_total'?)"
    )
    with pytest.raises(KeyError, match="cards.l40s.torch_total is not in facts.toml: measure it"):
        f.room("l40s")
    assert f.card_named("NVIDIA H200 NVL").key == "h200-nvl" and f.card_named("Tesla T4") is None


def test_the_facts_agree_with_the_labs_configs_and_the_records() -> None:
    """Each model's fields equal the config.json a lab ships, and each measured fact equals the
    value its run recorded."""
    facts = tomllib.loads((KIT / "facts.toml").read_text())
    shipped = {"qwen3-0_6b": "Qwen3-0.6B", "qwen3-8b": "Qwen3-8B"}
    for key, folder in shipped.items():
        config = json.loads(
            (REPO / "lab" / "kv-cache" / "models" / folder / "config.json").read_text()
        )
        fields = {k: v for k, v in facts["models"][key].items() if not isinstance(v, dict)}
        for field, value in fields.items():
            if field not in ("name", "source", "date"):
                assert config[field] == value, f"models.{key}.{field}"
    measured = [
        (f"cards.{card}.{name}", fact)
        for card, table in facts["cards"].items()
        for name, fact in table.items()
        if isinstance(fact, dict) and fact.get("source") == "measured"
    ]
    assert len(measured) == 5
    for name, fact in measured:
        record = json.loads(
            (REPO / "build" / fact["lesson"] / fact["run"] / "run.json").read_text()
        )
        if fact["value_of"] == "host.gpu.memory_mib":
            recorded = record["host"]["gpu"]["memory_mib"]
        else:
            step, value = fact["value_of"].split(".")
            recorded = next(s for s in record["steps"] if s["id"] == step)["values"][value]["value"]
        assert recorded == fact["value"], name


# --- the compact decoder -----------------------------------------------------------------------


def test_the_decoder_computes_what_transformers_qwen3_computes(kit: dict[str, ModuleType]) -> None:
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM
    from transformers.utils import logging

    logging.set_verbosity_error()
    ref, dec_mod = kit["reference"], kit["decoder"]
    config = json.loads((REPO / "lab/kv-cache/models/Qwen3-8B/config.json").read_text())
    from labkit.configs import tiny_config

    cfg = tiny_config(config, vocab=512, bos_token_id=None, eos_token_id=None)
    torch.manual_seed(0)
    model = Qwen3ForCausalLM(Qwen3Config(**cfg)).to(torch.bfloat16).eval()
    exact = copy.deepcopy(model).float()
    ids = torch.randint(0, cfg["vocab_size"], (1, 12))
    with torch.no_grad():
        want = exact(input_ids=ids).logits[0, -1]
        engine = model(input_ids=ids).logits[0, -1]
    dec = dec_mod.Decoder.from_transformers(model, slots=16)
    assert dec.shape.qk_norm and dec.shape.kind == "GQA" and dec.splits["qkv"] == 1
    ours = ref.reference_logits(dec.shape, dec.w, ids[0]), ref.decode_tokens(dec, ids[0])
    assert ref.relative_error(ours[0], want) < 1e-3  # the textbook model, in float32
    engine_off = ref.relative_error(engine, want)
    assert 0 < ref.relative_error(ours[1], want) < 2 * engine_off + 0.01  # bf16 rounding alone
    with torch.no_grad():  # the model keeps working on its joined weights
        assert torch.equal(model(input_ids=ids).logits[0, -1], engine)
    assert dec.weight_bytes_read() == dec.shape.weight_bytes_read()
    assert dec_mod.weight_nbytes(dec.w) == dec.shape.weight_bytes()


@pytest.mark.parametrize("design", ["mha", "gqa", "mqa", "mla", "sliding"])
def test_every_design_decodes_the_textbook_model_and_reserves_the_formula(
    kit: dict[str, ModuleType], design: str
) -> None:
    import torch

    s, ref, dec_mod = kit["shapes"], kit["reference"], kit["decoder"]
    base = s.Shape("gqa", 4, 128, 4, 32, 256, 512, 1e6, 1e-6, kv_heads=2)
    shape = {
        "mha": replace(base, name="mha", kv_heads=4),
        "gqa": base,
        "mqa": replace(base, name="mqa", kv_heads=1),
        "mla": replace(base, name="mla", kv_heads=0, kv_lora_rank=32, rope_dim=16),
        "sliding": replace(base, name="sliding", window=8),  # 20 tokens: the ring wraps
    }[design]
    dec = dec_mod.Decoder.random(shape, torch.device("cpu"), slots=32, seed=1)
    assert dec.cache_nbytes() == dec.cache_reserved == shape.cache_bytes(32)
    tokens = torch.randint(0, shape.vocab, (20,))
    ours = ref.decode_tokens(dec, tokens)
    exact = ref.reference_logits(shape, dec.w, tokens, torch.float32)
    plain = ref.reference_logits(shape, dec.w, tokens, torch.bfloat16)
    assert ref.relative_error(ours, exact) < 2 * ref.relative_error(plain, exact) + 0.01
    assert dec_mod.weight_nbytes(dec.w) == shape.weight_bytes()
    if design == "sliding":  # without its window the model is another one
        wrong = ref.reference_logits(replace(shape, window=None), dec.w, tokens, torch.float32)
        assert ref.relative_error(ours, wrong) > 10 * ref.relative_error(ours, exact)


def test_the_fp8_cache_keeps_a_scale_per_vector_and_stays_close(kit: dict[str, ModuleType]) -> None:
    import torch

    s, ref, dec_mod = kit["shapes"], kit["reference"], kit["decoder"]
    shape = s.Shape("gqa", 2, 128, 4, 32, 256, 512, 1e6, 1e-6, kv_heads=2, qk_norm=True)
    bf16 = dec_mod.Decoder.random(shape, torch.device("cpu"), slots=64, seed=2)
    fp8 = dec_mod.Decoder(shape, bf16.w, 64, cache="fp8")
    assert fp8.cache_nbytes() == shape.cache_bytes(64, "fp8") == 2 * 2 * 2 * (32 + 4) * 64
    tokens = torch.randint(0, shape.vocab, (40,))
    assert torch.equal(fp8.prefill(tokens), bf16.prefill(tokens))  # the prompt attends in bf16
    # the prefill computes what stepping through the prompt computes
    stepped = dec_mod.Decoder(shape, bf16.w, 64)
    assert ref.relative_error(ref.decode_tokens(stepped, tokens), bf16.prefill(tokens)[0]) < 0.05
    bf16.token.fill_(7)
    fp8.token.fill_(7)
    assert 0 < ref.relative_error(fp8.step(40), bf16.step(40)) < 0.1
    with pytest.raises(ValueError, match="without latents or windows"):
        dec_mod.Decoder(replace(shape, window=8), bf16.w, 64, cache="fp8")


def test_split_products_add_up_and_a_second_copy_of_the_kit_imports(
    kit: dict[str, ModuleType],
) -> None:
    import importlib.util

    import torch

    path = Path(kit["decoder"].__file__).with_name("kernels.py")
    spec = importlib.util.spec_from_file_location("labkit.kernels_again", path)
    assert spec is not None and spec.loader is not None
    again = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(again)  # the op is registered once per process: no error
    x = torch.randn(1, 64, dtype=torch.float32)
    w = torch.randn(48, 64, dtype=torch.float32)
    for splits in (1, 2, 8):
        got = again.matvec(x, w, splits)
        assert got.shape == (1, 48) and torch.allclose(got, x @ w.t(), atol=1e-4)


def test_the_split_choice_takes_the_fewest_slices_that_win_beyond_noise(
    kit: dict[str, ModuleType],
) -> None:
    import labkit.kernels as kernels

    spread = kit["timing"].Spread.of

    def times(**medians: float) -> dict[int, Any]:
        # 9 samples around each median, quartiles +-0.5 %
        return {int(k[1:]): spread([m * (1 + d) for d in (-0.01, -0.005, -0.005, 0, 0, 0, 0.005,
                                                          0.005, 0.01)])  # fmt: skip
                for k, m in medians.items()}  # fmt: skip

    # 4 slices lead 2 by 1 %: noise, so 2; 1 slice is 30 % slower: kept out
    assert kernels.choose_splits(times(s1=130, s2=101, s4=100, s8=120)) == 2
    # a lead of 3 % over 1 slice is inside the 5 % margin: 1, on any host
    assert kernels.choose_splits(times(s1=103, s2=100, s4=100.5)) == 1
    # a lead beyond the margin counts
    assert kernels.choose_splits(times(s1=110, s2=100, s16=104)) == 2
    # wide quartiles widen the margin: a 12 % lead within 30 % of spread is no lead
    wide = {1: spread([100, 80, 120, 90, 110]), 4: spread([88, 87, 89, 88, 88])}
    assert kernels.choose_splits(wide) == 1
    assert kernels.choose_splits(wide, margin=0.0) == 1
    narrow = {1: spread([100, 99, 101, 100, 100]), 4: spread([88, 87, 89, 88, 88])}
    assert kernels.choose_splits(narrow) == 4
    # on the CPU nothing is timed
    import torch

    assert kernels.fastest_splits([torch.zeros(8, 16)]) == 1
