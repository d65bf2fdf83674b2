"""The calculators' arithmetic (docs/assets/calculator.js) against the lab's own, in Chromium.

The page's script transcribes the lab's functions: the lab kit's configs.py (bytes per token,
weights), shapes.py (the attention designs), facts.py (the engines' memory rules), lesson 2.5's
planner.py (transformers' memory planner, in both releases it transcribes) and lesson 2.3's
pdlab.py (the roofline). Each is run here in Python, imported from a copy of the lab (importing
writes caches beside the sources), over every config.json the labs ship, the cards of the
course's facts and a grid of settings; the script, loaded into a blank page, must give the same
numbers: counts and bytes exactly, ratios to a few parts in 10^12.
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
import sys
from collections.abc import Iterator
from dataclasses import replace
from itertools import product
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from support import CHROMIUM, REPO

pytestmark = pytest.mark.browser

SCRIPT = REPO / "docs" / "assets" / "calculator.js"
CONFIGS = sorted({p.parent.name: p for p in REPO.glob("lab/*/models/*/config.json")}.values())
TOKENS = (1, 17, 4096, 32768, 40960, 131072)


@pytest.fixture(scope="module")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, ModuleType]]:
    """The lab kit, 2.5's planner and 2.3's pdlab, imported from a copy."""
    folder = tmp_path_factory.mktemp("lab")
    shutil.copytree(REPO / "lab/common/labkit", folder / "labkit")
    for source in ("gpu-memory/planner.py", "prefill-decode/pdlab.py"):
        shutil.copy(REPO / "lab" / source, folder / Path(source).name)
    # another test module of this process may have imported a lab's own copy of the kit
    for name in [n for n in sys.modules if n.split(".")[0] in ("labkit", "planner", "pdlab")]:
        del sys.modules[name]
    sys.path.insert(0, str(folder))
    try:
        modules = {}
        for name in ("labkit.configs", "labkit.facts", "labkit.shapes", "planner", "pdlab"):
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.origin and spec.origin.startswith(str(folder))
            modules[name] = importlib.import_module(name)
        yield modules
    finally:
        sys.path.remove(str(folder))
        for name in [n for n in sys.modules if n.split(".")[0] in ("labkit", "planner", "pdlab")]:
            del sys.modules[name]


@pytest.fixture(scope="module")
def js(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A blank page in Chromium with calculator.js loaded (nothing else: no site)."""
    from playwright import sync_api

    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        tab = browser.new_page()
        tab.set_content("<!doctype html><html><body></body></html>")
        tab.add_script_tag(path=str(SCRIPT))
        assert tab.evaluate("window.CourseCalculator.version") == 1
        yield tab
        browser.close()


def same(ours: Any, theirs: Any, where: str) -> None:
    """Equal to the byte for whole numbers, to 1e-12 relative for the rest, recursively."""
    if isinstance(ours, dict):
        assert isinstance(theirs, dict), where
        for key, value in ours.items():
            same(value, theirs.get(key), f"{where}.{key}")
    elif isinstance(ours, (list, tuple)):
        assert isinstance(theirs, list) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
            same(a, b, f"{where}[{i}]")
    elif isinstance(ours, float) and isinstance(theirs, (int, float)):
        if math.isinf(ours):
            assert theirs is None or math.isinf(theirs), where  # JSON carries Infinity as null
        else:
            assert math.isclose(ours, theirs, rel_tol=1e-12, abs_tol=1e-12), (where, ours, theirs)
    else:
        assert ours == theirs, (where, ours, theirs)


def configs(lab: dict[str, ModuleType]) -> list[tuple[str, dict[str, Any]]]:
    return [(p.parent.name, lab["labkit.configs"].load_config(p)) for p in CONFIGS]


def test_bytes_per_token_and_weights_follow_configs_py(lab: dict[str, ModuleType], js: Any) -> None:
    c = lab["labkit.configs"]
    cases, expected = [], []
    for _, cfg in configs(lab):
        for nbytes in (1, 2, 4):
            cases.append({"f": "kv", "cfg": cfg, "n": nbytes, "heads": None})
            expected.append(c.kv_bytes_per_token(cfg, nbytes))
        cases.append({"f": "kv", "cfg": cfg, "n": 2, "heads": 1})
        expected.append(c.kv_bytes_per_token(cfg, 2, heads=1))
        cases.append({"f": "head", "cfg": cfg})
        expected.append([c.head_size(cfg), c.kv_heads(cfg), c.number_bytes(cfg)[0]])
        if all(k in cfg for k in ("intermediate_size", "vocab_size", "hidden_size")):
            cases.append({"f": "weights", "cfg": cfg})
            expected.append(c.weight_bytes(cfg))
    raw = json.loads((REPO / "lab/smaller-cache/models/Gemma-3-27B/config.json").read_text())
    got = js.evaluate(
        """([cases, raw]) => { const A = window.CourseCalculator.arith;
        return [cases.map(c => c.f === "kv" ? A.kvBytesPerToken(c.cfg, c.n, c.heads)
          : c.f === "head" ? [A.headSize(c.cfg), A.kvHeads(c.cfg), A.numberBytes(c.cfg)[0]]
          : A.weightBytes(c.cfg)), A.languageFields(raw)]; }""",
        [cases, raw],
    )
    assert len(cases) > 60
    same(expected, got[0], "configs")
    same(c.load_config(REPO / "lab/smaller-cache/models/Gemma-3-27B/config.json"), got[1], "text")


def test_the_five_designs_follow_shapes_py(lab: dict[str, ModuleType], js: Any) -> None:
    Shape = lab["labkit.shapes"].Shape
    cases, expected = [], []
    for _, cfg in configs(lab):
        if "intermediate_size" not in cfg or "rms_norm_eps" not in cfg:
            continue
        try:
            base = replace(Shape.of_config(cfg, name=""), qk_norm=False)
        except KeyError:
            continue
        kv = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
        designs = [  # as lesson 2.6's designs.py builds them
            replace(base, name="mha", kv_heads=base.heads),
            replace(base, name="gqa", kv_heads=kv),
            replace(base, name="mqa", kv_heads=1),
            replace(base, name="mla", kv_heads=0, kv_lora_rank=512, rope_dim=64),
            replace(base, name="sliding", kv_heads=kv, window=4096),
        ]
        for s in designs:
            formats = ("bf16",) if s.kv_lora_rank else ("bf16", "fp8")
            for fmt in formats:
                cases.append({"base": base.__dict__, "kv": kv, "design": s.name, "fmt": fmt})
                expected.append(
                    [
                        s.bytes_per_token(fmt),
                        [s.cache_bytes(t, fmt) for t in TOKENS],
                        s.weight_bytes(),
                        s.window_layers,
                        s.kind,
                    ]  # fmt: skip
                )
    got = js.evaluate(
        """([cases, tokens]) => { const A = window.CourseCalculator.arith;
        return cases.map(c => { const b = c.base;
          const base = A.shape({layers: b.layers, hidden: b.hidden, heads: b.heads,
            head_dim: b.head_dim, intermediate: b.intermediate, vocab: b.vocab, tied: b.tied});
          const s = A.designs(base, c.kv, 512, 64, 4096)[c.design];
          const kind = s.kv_lora_rank ? "MLA" : s.kv_heads === s.heads ? "MHA"
            : s.kv_heads === 1 ? "MQA" : "GQA";
          return [A.bytesPerToken(s, c.fmt), tokens.map(t => A.cacheBytes(s, t, c.fmt)),
                  A.shapeWeightBytes(s), A.windowLayers(s), kind]; }); }""",
        [cases, TOKENS],
    )
    assert len(cases) > 50
    same(expected, got, "designs")
    dense = ("qwen3", "llama", "mistral")
    plain = [(cfg, Shape.of_config(cfg)) for _, cfg in configs(lab)
             if cfg.get("model_type") in dense and cfg.get("rope_theta")]  # fmt: skip
    as_is = js.evaluate(
        """(cfgs) => cfgs.map(cfg => { const A = window.CourseCalculator.arith;
        const s = A.shapeOfConfig(cfg); return [A.shapeWeightBytes(s), A.bytesPerToken(s)]; })""",
        [cfg for cfg, _ in plain],
    )
    assert any(s.qk_norm for _, s in plain) and any(not s.qk_norm for _, s in plain)
    same([[s.weight_bytes(), s.bytes_per_token()] for _, s in plain], as_is, "of_config")


def test_the_engines_rules_follow_facts_py(lab: dict[str, ModuleType], js: Any) -> None:
    f = lab["labkit.facts"]
    cards = [k for k, t in f.load()["cards"].items() if "torch_total" in t]
    cases, expected = [], []
    for key in cards:
        card = f.card(key)
        for share in (0.05, 0.5, 0.9, 0.92, 0.95):
            for weights in (1_192_099_840, 16_381_470_720, 40_000_000_000):
                v = f.vllm(key, activation_peak=1_392_508_928, non_torch=804_061_184,
                           weights=weights, share=share)  # fmt: skip
                t = f.transformers(key, weights=weights, share=share)
                cases.append([card.torch_total, share, weights, t.lines["context"]])
                expected.append([v.lines["requested"], v.cache, t.lines["free"], t.cache])
    counts, wanted = [], []
    for cache in (0, -5, 117_736_134_656, 4_653_935_532, 11_940_000_000):
        for bpt in (18_432, 114_688, 147_456, 589_824):
            for tokens in (1, 8192, 32768, 40960):
                for block in (1, 16, 256):
                    counts.append([cache, bpt, tokens, block])
                    wanted.append(f.conversations(cache, bpt, tokens, block))
    got = js.evaluate(
        """([cases, counts]) => { const A = window.CourseCalculator.arith;
        return [cases.map(([total, share, w, ctx]) => { const v = A.vllm(total, share, w,
            804061184, 1392508928); const t = A.transformers(total, ctx, w, share);
            return [v.requested, v.cache, t.free, t.cache]; }),
          counts.map(([c, b, t, k]) => A.conversations(c, b, t, k))]; }""",
        [cases, counts],
    )
    same(expected, got[0], "rules")
    same(wanted, got[1], "conversations")
    assert f.llama_cpp(32_768, 147_456).cache == js.evaluate(
        "window.CourseCalculator.arith.llamaCpp(32768, 147456)"
    )


ENGINES = (
    {"block_size": 256, "cache_bytes": 2},
    {"block_size": 256, "cache_bytes": 1},
    {"block_size": 16, "cache_bytes": 2},
    # the branches the form does not reach: flash attention, asynchronous batching, every token's
    # logits, log-probabilities, a batch size given
    {"block_size": 256, "cache_bytes": 2, "attention_masks": 0, "io_copies": 2},
    {"block_size": 64, "cache_bytes": 2, "logits_to_keep": False, "output_rows": 2},
    {"block_size": 256, "cache_bytes": 2, "max_batch_tokens": 2048, "max_requests_per_batch": 64},
)
"""Engine settings the planner is worked out with, the same for each release."""


def test_the_planner_follows_lesson_2_5s(lab: dict[str, ModuleType], js: Any) -> None:
    """Both releases' planners (planner.py's Engine.release: 5.17's blocks, 5.24's sectors) over
    the same grid of models, cards, fractions and engine settings: every count and byte of the
    budget and its plan as planner.py gives them, and the same words when the planner finds no
    room (but for a float's digits)."""
    planner, facts = lab["planner"], lab["labkit.facts"]
    models = [lab["labkit.configs"].load_config(p) for p in
              sorted(REPO.glob("lab/gpu-memory/models/*/config.json"))]  # fmt: skip
    memories = [(150_754_820_096, 1_504_706_560), (25_757_220_864, 1_504_706_560)]
    memories += [(facts.card(k).torch_total, facts.context_of(k)[0])
                 for k in ("h200", "a100-40gb", "rtx-4090")]  # fmt: skip
    assert planner.RELEASES == ("5.17", "5.24")  # a third release needs its transcription
    cases, expected = [], []
    grid = product(
        planner.RELEASES, models, memories, (0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95), ENGINES
    )
    for release, cfg, (total, context), fraction, settings in grid:
        weights = lab["labkit.configs"].weight_bytes(cfg)
        eng = planner.Engine(release=release, **settings)
        b = planner.budget(cfg, total, context, weights, fraction, eng)
        cases.append([cfg, total, context, weights, fraction, settings | {"release": release}])
        keys = ("free", "available", "cache_tokens", "conversations")
        expected.append({k: b[k] for k in keys} | {"plan": b["plan"]})
        if "solution" not in b.get("problem", "solution"):  # a float's digits differ in JS
            expected[-1]["problem"] = b["problem"]
    got = js.evaluate(
        """(cases) => { const P = window.CourseCalculator.arith.planner;
        return cases.map(([cfg, total, ctx, w, f, settings]) => P.budget(cfg, total, ctx, w, f,
          P.engine(settings))); }""",
        cases,
    )
    for release in planner.RELEASES:
        plans = [e["plan"] for e in expected if e["plan"] and e["plan"]["release"] == release]
        assert len(plans) > 150, release
        assert sum(e["plan"] is None for e, c in zip(expected, cases, strict=True)
                   if c[-1]["release"] == release) >= 5  # fmt: skip
    assert sum("num_sectors" in (e["plan"] or {}) for e in expected) > 150
    assert sum("problem" in e for e in expected) >= 10
    # the two releases plan differently for most settings (else the grid tells them apart poorly)
    half = len(expected) // 2
    plans = [(e["cache_tokens"], (e["plan"] or {}).get("max_batch_tokens")) for e in expected]
    assert sum(a != b for a, b in zip(plans[:half], plans[half:], strict=True)) > 0.8 * half
    same(expected, got, "planner")


def test_the_calculator_seeds_the_release_as_planner_py_picks_it(
    lab: dict[str, ModuleType],
) -> None:
    """The form's first planner is the release the page's run recorded for transformers, chosen
    from the form's releases by the course's rule; planner.py's release_of picks the same."""
    from course.pages.calculators.data import release_choice
    from course.pages.calculators.lessons import GPU_MEMORY

    planner = lab["planner"]
    field = next(f for f in GPU_MEMORY.inputs if f.name == "release")
    assert tuple(c for c, _ in field.choices) == planner.RELEASES
    assert field.seed == "engine:transformers"
    versions = ["5.17.0", "5.18.2", "5.23.9", "5.24.0", "5.24.0rc1", "5.30.1", "6.0.0", "10.1"]
    runs = [json.loads(p.read_text()) for p in REPO.glob("build/gpu-memory/*/run.json")]
    versions += sorted(
        {r["engine"]["transformers"] for r in runs if r["engine"].get("transformers")}
    )
    assert {"5.17.0", "5.24.0"} <= set(versions)
    for version in versions:
        assert release_choice(field.choices, version) == planner.release_of(version), version
    assert release_choice(field.choices, "5.16.1") is None  # older than both transcriptions


def test_the_roofline_follows_lesson_2_3s(lab: dict[str, ModuleType], js: Any) -> None:
    pd = lab["pdlab"]
    cases, expected = [], []
    for _, cfg in configs(lab):
        if "intermediate_size" not in cfg:
            continue
        shapes = list(pd.fused_products(cfg).values())
        cases.append(cfg)
        expected.append(
            [[list(s) for s in shapes], [pd.intensity(t, shapes) for t in TOKENS],
             [pd.tokens_for_intensity(r, shapes) for r in (1.0, 173.67, 183.5, 600.0)],
             [list(pd.roofline(2 * t * 1e9, 2e9 + t * 1e6, 7.3e14, 4.2e12)) for t in TOKENS]]
        )  # fmt: skip
    got = js.evaluate(
        """([cases, tokens]) => { const R = window.CourseCalculator.arith.roofline;
        return cases.map(cfg => { const s = R.fusedProducts(cfg);
          return [s, tokens.map(t => R.intensity(t, s)),
            [1.0, 173.67, 183.5, 600.0].map(r => R.tokensForIntensity(r, s)),
            tokens.map(t => R.time(2 * t * 1e9, 2e9 + t * 1e6, 7.3e14, 4.2e12))]; }); }""",
        [cases, TOKENS],
    )
    assert len(cases) > 8
    same(expected, got, "roofline")


def test_the_decode_bound_follows_lesson_2_4s(lab: dict[str, ModuleType], js: Any) -> None:
    """decode_speed.py's bytes bound: the copy bandwidth over the weights a step reads (shapes.py's
    weight_bytes_read, which the decoder's tensors give too) and depth x configs.py's bytes per
    token."""
    c, Shape = lab["labkit.configs"], lab["labkit.shapes"].Shape
    dense = ("qwen3", "llama", "mistral")
    plain = [
        cfg for _, cfg in configs(lab) if cfg.get("model_type") in dense and cfg.get("rope_theta")
    ]
    depths, bandwidths = (0, 2048, 32768, 131072), (1008e9, 4228.35e9, 4.8e12)
    expected = []
    for cfg in plain:
        read = Shape.of_config(cfg).weight_bytes_read()
        per_token = c.kv_bytes_per_token(cfg)
        expected.append(
            [read, [[bw / (read + d * per_token) for d in depths] for bw in bandwidths]]
        )
    got = js.evaluate(
        """([cfgs, depths, bws]) => cfgs.map(cfg => { const A = window.CourseCalculator.arith;
        const read = A.shapeWeightBytesRead(A.shapeOfConfig(cfg)), n = A.kvBytesPerToken(cfg);
        return [read, bws.map(bw => depths.map(d => A.decodeBound(bw, read, n, d)))]; })""",
        [plain, depths, bandwidths],
    )
    assert any(cfg.get("tie_word_embeddings") for cfg in plain)
    assert any(not cfg.get("tie_word_embeddings") for cfg in plain)
    same(expected, got, "decode bound")
