"""The lab kit: what every lab of the course shares, in one place.

Brought into each lab by `include: [../common/labkit]` in its lab.yml: a run copies it beside
the lab's scripts, and the lesson zip carries it, so a learner's copy runs on its own. A script
imports the parts it needs:

    from labkit import checks, results, units          # standard library only
    from labkit import configs, shapes, facts           # standard library only
    from labkit import device, timing, memory           # PyTorch, imported when first used
    from labkit.decoder import Decoder                  # PyTorch

checks     check(ok, what): stop with "SANITY CHECK FAILED: ..." and exit status 2
results    write_results / read_results: results/<name>.json, deterministic, no NaN or inf
units      byte and rate constants; human(), duration(), byte_rate(), flop_rate()
configs    a model's config.json: its text part, heads, head size, cache bytes, weight bytes
shapes     Shape: one decoder's sizes and attention design (MHA, GQA, MQA, MLA, sliding
           window), its weight and cache bytes on paper; Shape.of_config() for a Qwen3 config
facts      the course's facts (facts.toml): cards, prices, models, engines' memory rules
timing     Spread (median, min, quartiles, max, n) and derive(); timing with warm-up, CUDA
           events and CUDA graphs, one side stream per GPU
device     --device and --tiny, the device, the line naming it, synchronising
gpuwatch   the GPU's clocks, power and temperatures sampled while a measurement runs
memory     peak GPU memory of a step and of its parts; freeing a part and checking it is gone
logs       a library's log messages (an engine's planner, its blocks) collected for the script
kernels    the decoder's small pieces: RMSNorm, rotary tables, split-K products, fp8 vectors
decoder    the compact decoder: one sequence, CUDA graphs, five attention designs, fp8 cache
reference  the textbook model the decoder is checked against

Nothing here imports PyTorch at the top of a module that a paper step needs: `checks`,
`results`, `units`, `configs`, `shapes`, `facts`, `logs`, `gpuwatch` and `timing.Spread` run
on the standard library.
"""

from __future__ import annotations

KIT_VERSION = 1
"""Bumped when a module's behaviour changes in a way a lab's numbers could show."""
