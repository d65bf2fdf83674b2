"""The four calculators of Part 2, each seeded from its lesson's recorded run.

Each names the lesson's recorded values: when a record renames one, the page's build names the
calculator and the value. The arithmetic behind each is in docs/assets/calculator.js, held to the
lab's own functions (labkit's configs, shapes and facts rules, 2.5's planner, 2.3's pdlab) by
tests/pages/test_calculator_arith.py.
"""

from __future__ import annotations

from .spec import Calculator, CardOption, Cell, Grid, Input, Output, Point, Table

T = Cell  # a cell of words


def _v(expr: str, unit: str | None = None, decimals: int | None = None) -> Cell:
    return Cell(expr=expr, unit=unit, decimals=decimals)


def _gap(expr: str, unit: str | None = None, decimals: int | None = None) -> Cell:
    return Cell(expr=expr, unit=unit, decimals=decimals, signed=True)


def _pct(expr: str, decimals: int = 1) -> Cell:
    return Cell(expr=expr, decimals=decimals, percent=True, signed=True)


LAYERS = Input("num_hidden_layers", "Layers", "model:num_hidden_layers")
KV_HEADS = Input("num_key_value_heads", "Key-value heads per layer", "model:num_key_value_heads")
HEADS = Input("num_attention_heads", "Query heads per layer", "model:num_attention_heads")
HEAD_DIM = Input("head_dim", "Numbers per head", "model:head_dim")
HIDDEN = Input("hidden_size", "Hidden size", "model:hidden_size")
INTERMEDIATE = Input("intermediate_size", "MLP size", "model:intermediate_size")
VOCAB = Input("vocab_size", "Vocabulary", "model:vocab_size")
TIED = Input(
    "tie_word_embeddings", "One table at both ends", "model:tie_word_embeddings", checkbox=True
)
BYTES = Input("bytes_per_number", "Bytes per cached number (2 for bf16, 1 for 8 bits)", "const:2")
TOKENS = Input("tokens", "Tokens in one conversation", "const:32768", unit="tok")
CARD_MEMORY = Input(
    "torch_total", "Memory PyTorch sees", "card:torch_total", "GiB", "card", "any", decimals=2
)

DECODE_DEPTHS = (0, 2048, 8192, 16384, 32768)
"""The depths 2.4's decode-speed step measured."""

# fmt: off
KV_CACHE = Calculator(
    name="kv-cache",
    title="The KV cache of your model, and the conversations a card holds",
    model="qwen3-8b",
    inputs=(
        LAYERS, KV_HEADS, HEAD_DIM, HEADS, HIDDEN, INTERMEDIATE, VOCAB, TIED, BYTES, TOKENS,
        CARD_MEMORY,
        Input("bandwidth", "Memory bandwidth (a large copy's: bytes read plus written)",
              "card:bandwidth", "GB/s", "card", "any", decimals=1),
        Input("gpu_memory_utilization", "vLLM's gpu_memory_utilization",
              "value:cache-budget.share", group="engine", step="0.01",
              decimals=2),
        Input("weights", "Weights", "value:cache-budget.weights", "GiB", "engine", "any",
              decimals=2),
        Input("activation_peak", "Working space of a forward pass", "value:cache-budget.work",
              "MiB", "engine", "any", decimals=1),
        Input("non_torch", "Memory outside PyTorch (CUDA context, libraries)",
              "value:cache-budget.outside", "MiB", "engine", "any", decimals=1),
    ),
    outputs=(
        Output("bytes_per_token", "Bytes per token", "B"),
        Output("cache_bytes", "Cache of one conversation", "MiB"),
        Output("room", "Room for the cache on the card, by vLLM's rule", "GiB"),
        Output("tokens_fit", "Tokens that fit", "tok"),
        Output("conversations", "Conversations of that length at once"),
        Output("weights_read", "Weights one decode step reads", "GiB"),
        Output("decode_d0", "Fastest decoding with an empty cache, by the bytes", "tok/s"),
        Output("decode_depth", "Fastest decoding at the end of that conversation", "tok/s"),
    ),
    card_figures={"h200": {"bandwidth": "decode-speed.copy_bandwidth"}},
    points=(
        Point("allocated", 4096, "gpu-check.allocated_4096_8b", "allocated for 4,096 tokens"),
        Point("allocated", 32768, "gpu-check.allocated_32768_8b", "allocated for 32,768 tokens"),
    )
    + tuple(Point("decode_8b", d, f"decode-speed.tok_s_8b_d{d}", f"Qwen3-8B at depth {d:,}")
            for d in DECODE_DEPTHS)
    + tuple(Point("decode_06b", d, f"decode-speed.tok_s_06b_d{d}", f"Qwen3-0.6B at depth {d:,}")
            for d in DECODE_DEPTHS),
    values={"context_tokens": "size.context_tokens"},
    facts={"vllm_block_size": "engines.vllm.block_size"},
    chart="Cache size against the tokens of one conversation: the formula's line for the inputs, "
    "with what PyTorch's allocator handed out in the lab",
    chart2="Decoding speed against the tokens already cached: the bytes bound for the inputs, "
    "with the speeds the lab measured for Qwen3-8B and Qwen3-0.6B",
    table=Table(
        "Worked rows: Qwen3-8B on the H200",
        ("Qwen3-8B", "On paper", "On the GPU", "Gap"),
        (
            (T("Cache of 4,096 tokens (allocated)"), _v("size.cache_4096_8b", "MiB", 1),
             _v("gpu-check.allocated_4096_8b", "MiB", 3),
             _gap("gpu-check.allocated_4096_8b - size.cache_4096_8b")),
            (T("Cache of 32,768 tokens (allocated)"), _v("size.cache_32768_8b", "MiB", 1),
             _v("gpu-check.allocated_32768_8b", "MiB", 3),
             _gap("gpu-check.allocated_32768_8b - size.cache_32768_8b")),
            (T("Room for the cache by vLLM's rule (reserved)"),
             _v("cache-budget.room", "GiB", 2), _v("cache-budget.reserved", "GiB", 2),
             _gap("cache-budget.reserved - cache-budget.room")),
            (T("Full-length conversations at once"), _v("cache-budget.conversations"),
             T("not measured"), T("")),
            (T("Decoding with an empty cache, tok/s (gap: the share of the bound reached)"),
             _v("decode-speed.bound_8b_d0", None, 0),
             _v("decode-speed.tok_s_8b_d0", None, 0), _v("decode-speed.frac_8b_d0", None, 0)),
            (T("Decoding after 32,768 tokens, tok/s (the same)"),
             _v("decode-speed.bound_8b_d32768", None, 0),
             _v("decode-speed.tok_s_8b_d32768", None, 0),
             _v("decode-speed.frac_8b_d32768", None, 0)),
        ),
    ),
)
# fmt: on

STEP1 = "as step 1 counts it: nvidia-smi's total, less what the H200 lost"
RELEASE = Input(
    "release", "transformers' memory planner, by release", "engine:transformers", group="engine",
    choices=(("5.17", "5.17: the batch and the blocks solved for together"),
             ("5.24", "5.24: the batch at its setting, the cache in sectors")),
)  # fmt: skip
"""Whose planner the form works out: lesson 2.5's planner.py transcribes both (Engine.release);
the first choice is the release the page's run had installed, as planner.release_of picks it."""
# fmt: off
GPU_MEMORY = Calculator(
    name="gpu-memory",
    title="The serving budget of your model on your card, under each engine's rule",
    model="qwen3-8b",
    inputs=(
        LAYERS, HEADS, KV_HEADS, HEAD_DIM, HIDDEN, INTERMEDIATE, VOCAB, TIED, BYTES, TOKENS,
        Input("torch_total", "Memory the engine plans from", "card:torch_total", "GiB", "card",
              "any", decimals=2),
        Input("cuda_context", "Lost to the CUDA context and libraries", "card:cuda_context",
              "GiB", "card", "any", decimals=2),
        Input("max_memory_percent", "transformers' max_memory_percent",
              "fact:engines.transformers.max_memory_percent", group="engine", step="0.01",
              decimals=2),
        Input("block_size", "transformers' block size", "fact:engines.transformers.block_size",
              "tok", "engine"),
        RELEASE,
        Input("gpu_memory_utilization", "vLLM's gpu_memory_utilization",
              "fact:engines.vllm.gpu_memory_utilization", group="engine", step="0.01",
              decimals=2),
        Input("activation_peak", "vLLM's activation peak (the published A100 log's)",
              "fact:crosschecks.vllm-a100.activation_peak", "GiB", "engine", "any", decimals=2),
        Input("non_torch", "vLLM's memory outside PyTorch (the same log's)",
              "fact:crosschecks.vllm-a100.non_torch", "GiB", "engine", "any", decimals=2),
    ),
    outputs=(
        Output("weights", "Weights, counted from config.json", "GiB"),
        Output("free", "Free once the weights are in", "GiB"),
        Output("batch_tokens", "transformers' largest batch", "tok"),
        Output("blocks", "transformers' cache blocks"),
    ),
    grid=Grid(
        "Conversations of that length at once, by each engine's rule",
        (
            ("transformers", "transformers continuous batching: a share of what is free"),
            ("vllm", "vLLM: a share of the whole card"),
            ("llama_cpp", "llama.cpp: the context it is given, all of what is free"),
        ),
        (
            Output("cache", "Memory for the cache", "GiB"),
            Output("cache_tokens", "Tokens of cache", "tok"),
            Output("conversations", "Conversations"),
        ),
    ),
    card_seed="step1-h200",
    facts={"vllm_block_size": "engines.vllm.block_size"},
    extra_cards=(
        CardOption("step1-h200", f"H200, {STEP1}",
                   {"torch_total": "paper.total_h200", "cuda_context": "paper.context_h200"}),
        CardOption("step1-24gb", f"24 GB card, {STEP1}",
                   {"torch_total": "paper.total_24gb",
                    "cuda_context": "paper.total_24gb - paper.free_24gb_8b - paper.weights_8b"}),
    ),
    points=(
        Point("engine", 0.5, "settings.tokens_f50", "the engine's cache at 0.5"),
        Point("engine", 0.7, "settings.tokens_f70", "the engine's cache at 0.7"),
        Point("engine", 0.9, "settings.tokens_f90", "the engine's cache at 0.9"),
    ),
    chart="Tokens of KV cache against the memory fraction, by transformers' rule and by "
    "vLLM's, with the engine's own caches from the lab",
    table=Table(
        "Worked rows: Qwen3-8B on the H200, transformers continuous batching (the {release}"
        " planner)",
        ("Memory fraction", "On paper (blocks)", "The engine's (blocks)", "Gap"),
        (
            (T("0.9, from step 1's figures"), _v("paper.blocks_h200_8b"), _v("paged.blocks"),
             _gap("paged.blocks - paper.blocks_h200_8b")),
            (T("0.5, from what the engine found free"), _v("settings.paper_blocks_f50"),
             _v("settings.blocks_f50"), _gap("settings.blocks_f50 - settings.paper_blocks_f50")),
            (T("0.7, from what the engine found free"), _v("settings.paper_blocks_f70"),
             _v("settings.blocks_f70"), _gap("settings.blocks_f70 - settings.paper_blocks_f70")),
            (T("0.9, from what the engine found free"), _v("settings.paper_blocks_f90"),
             _v("settings.blocks_f90"), _gap("settings.blocks_f90 - settings.paper_blocks_f90")),
            (T("0.9: conversations of 32,768 tokens"), _v("paper.conv_32k_h200_8b"),
             _v("paged.conv_32k"), _gap("paged.conv_32k - paper.conv_32k_h200_8b")),
        ),
    ),
)
# fmt: on

DESIGNS = (
    ("mha", "multi-head"),
    ("gqa", "grouped-query"),
    ("mqa", "multi-query"),
    ("mla", "latent (MLA)"),
    ("sliding", "sliding window"),
    ("gqa_fp8", "grouped-query, 8-bit cache"),
)


ACTIVATIONS = {
    "mha": "serving.activation_mha",
    "gqa": "serving.activation_gqa",
    "mla": "serving.activation_mla",
    # without a prompt pass of its own, a design pays the largest one measured (serving.py)
    "sliding": "designs.prefill_work",
    # not captured: what the recorded budget on the H200 leaves, less the weights as counted
    # (the allocator rounds the weights it holds up by up to 2 MiB, which this adds here)
    "mqa": "serving.requested_h200 - designs.weights_mqa - designs.outside - serving.room_h200_mqa",
}
"""The activation peak each design's count paid in the lab."""


def _design_row(key: str, label: str) -> tuple[Cell, ...]:
    if key == "gqa_fp8":
        formula, measured = "32768 * fp8-cache.bytes_per_token_fp8", "fp8-cache.cache_32k_fp8"
    else:
        formula, measured = f"designs.cache_32k_formula_{key}", f"designs.cache_32k_{key}"
    return (
        T(label),
        _v(formula, "GiB", 3),
        _v(measured, "GiB", 3),
        _v(f"serving.conversations_h200_{key}"),
        _v(f"serving.conversations_24gb_{key}"),
    )


# fmt: off
SMALLER_CACHE = Calculator(
    name="smaller-cache",
    title="Five attention designs for your model, and the conversations each leaves room for",
    model="qwen3-8b",
    inputs=(
        LAYERS, HEADS, KV_HEADS, HEAD_DIM, HIDDEN, INTERMEDIATE, VOCAB, TIED,
        Input("kv_lora_rank", "Latent width (MLA)", "const:512"),
        Input("qk_rope_head_dim", "Rotary part of each key (MLA)", "const:64"),
        Input("sliding_window", "Window of the window layers", "const:4096", "tok"),
        TOKENS, CARD_MEMORY,
        Input("gpu_memory_utilization", "vLLM's gpu_memory_utilization",
              "fact:engines.vllm.gpu_memory_utilization", group="engine", step="0.01",
              decimals=2),
        Input("non_torch", "Memory outside PyTorch (CUDA context, libraries)",
              "value:designs.outside", "MiB", "engine", "any", decimals=1),
    ),
    grid=Grid(
        "Each design, by vLLM's rule on the card",
        DESIGNS,
        (
            Output("bytes_per_token", "Bytes per token", "B"),
            Output("cache", "Cache of one conversation", "GiB"),
            Output("weights", "Weights", "GiB"),
            Output("conversations", "Conversations"),
        ),
    ),
    points=tuple(
        Point(key, 32768, f"designs.cache_32k_{key}", f"{label}: allocated for 32,768 tokens")
        for key, label in DESIGNS[:5]
    )
    + (Point("gqa_fp8", 32768, "fp8-cache.cache_32k_fp8", "8-bit: allocated for 32,768 tokens"),),
    # the 8-bit cache changes the cache, not the model: its count paid grouped-query's peak
    values={f"activation_{k}": expr for k, expr in ACTIVATIONS.items()},
    chart="Cache size against the tokens of one conversation for each design, with what the "
    "GPU's allocator handed out for 32,768 tokens",
    table=Table(
        "Worked rows: the lab's 8B model built five ways, 32,768 tokens, vLLM's rule",
        ("Design", "Cache on paper", "Allocated on the GPU", "H200", "RTX 4090"),
        tuple(_design_row(key, label) for key, label in DESIGNS),
    ),
)
# fmt: on

# fmt: off
PREFILL_DECODE = Calculator(
    name="prefill-decode",
    title="The roofline of one layer of your model on your card",
    model="qwen3-8b",
    inputs=(
        HEADS, KV_HEADS, HEAD_DIM, HIDDEN, INTERMEDIATE,
        Input("tokens", "Tokens multiplied at once", "const:1", "tok", "work"),
        Input("bandwidth", "Memory bandwidth", "card:bandwidth", "GB/s", "card", "any",
              decimals=1),
        Input("bf16_flops", "Peak bf16 matrix arithmetic", "card:bf16_flops", "TFLOP/s", "card",
              "any", decimals=1),
    ),
    outputs=(
        Output("time", "Time of the layer's four products", "µs"),
        Output("bound", "What bounds it"),
        Output("tflop_s", "Arithmetic reached", "TFLOP/s"),
        Output("ridge", "Ridge point, FLOP per byte"),
        Output("ridge_tokens", "Ridge point, tokens at once", "tok"),
    ),
    card_needs=("bandwidth", "bf16_flops"),
    card_seed="step2-h200",
    extra_cards=(
        CardOption(
            "step2-h200",
            "H200, as step 2 measured it",
            {"bandwidth": "limits.bandwidth", "bf16_flops": "limits.peak_tflop_s * 1e12"},
        ),
    ),
    points=tuple(
        Point("measured", t, f"limits.tflop_s_{t}", f"{t:,} token{'s' if t > 1 else ''} at once")
        for t in (1, 16, 128, 256, 1024, 8192)
    ),
    values={"ridge_tokens_measured": "limits.ridge_tokens_measured"},
    chart="Time of one layer's matrix products against the tokens multiplied at once: the "
    "roofline's line for the inputs, with the lab's measured times and ridge",
    table=Table(
        "Worked rows: Qwen3-8B on the H200",
        ("Quantity", "On paper", "Measured", "Gap"),
        (
            (T("Peak bf16 matrix arithmetic, TFLOP/s"), _v("paper.assumed_peak_tflop_s", None, 1),
             _v("limits.peak_tflop_s", None, 1),
             _pct("limits.peak_tflop_s / paper.assumed_peak_tflop_s - 1")),
            (T("Copy bandwidth"), _v("paper.assumed_bandwidth", "TB/s", 3),
             _v("limits.bandwidth", "TB/s", 3),
             _pct("limits.bandwidth / paper.assumed_bandwidth - 1")),
            (T("Ridge point, tokens at once"), _v("paper.ridge_tokens_predicted", None, 1),
             _v("limits.ridge_tokens_measured", None, 1),
             _pct("limits.ridge_tokens_measured / paper.ridge_tokens_predicted - 1")),
            (T("Time to first token, 8,192 tokens"), _v("prefill.ttft_predicted_8192", "ms", 1),
             _v("prefill.ttft_8192", "ms", 1),
             _pct("prefill.ttft_8192 / prefill.ttft_predicted_8192 - 1")),
            (T("Time per output token, empty cache"), _v("decode.bound_short", "ms", 2),
             _v("decode.tpot_short", "ms", 2), _pct("decode.tpot_short / decode.bound_short - 1")),
        ),
    ),
)
# fmt: on

CALCULATORS = {c.name: c for c in (KV_CACHE, GPU_MEMORY, SMALLER_CACHE, PREFILL_DECODE)}
"""Every calculator a page may place, by name."""
