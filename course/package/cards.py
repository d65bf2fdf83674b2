"""Datasheet figures of GPUs people rent, for the expectation of a run on another card.

The lesson zip's expected.json carries this table (with each figure's source), and the zip's
compare.py (`compare_lab.py`) scales the page's values by it: decode speeds by memory bandwidth,
prefill by dense bf16 tensor FLOP/s, what fills the card by its memory.

`match` are the words that must all appear in the upper-cased name nvidia-smi prints ("NVIDIA
GeForce RTX 4090", "NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "NVIDIA H200"), `avoid`
the words that must not: the first row that fits is the card.
"""

from __future__ import annotations

from typing import Any

# Sources, as the vendor publishes them. Data-center datasheets print tensor FLOP/s "with
# sparsity" (marked *): the dense figure is half of it (H100 SXM and H200: 1,979* -> 989.5).
ADA = (
    "NVIDIA Ada GPU Architecture whitepaper v2.1, appendix A, table 2: GeForce RTX 4090, "
    "1,008 GB/s, peak BF16 tensor 165.2 TFLOPS with FP32 accumulate (330.4 with sparsity), 24 GB "
    "(images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf)"
)
L40S = (
    "NVIDIA L40S datasheet: 864 GB/s, BF16 tensor 362.05 TFLOPS (733* with sparsity), 48 GB "
    "(resources.nvidia.com/en-us-l40s/l40s-datasheet-28413)"
)
A100 = (
    "NVIDIA A100 Tensor Core GPU datasheet: BF16 tensor 312 TFLOPS (624* with sparsity); 40GB: "
    "1,555 GB/s; 80GB PCIe: 1,935 GB/s; 80GB SXM: 2,039 GB/s "
    "(nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf)"
)
H100 = (
    "NVIDIA H100 Tensor Core GPU datasheet, H100 SXM: 3.35 TB/s, BF16 tensor 1,979* TFLOPS "
    "with sparsity, 80 GB (resources.nvidia.com/en-us-tensor-core/nvidia-tensor-core-gpu-datasheet)"
)
H200 = (
    "NVIDIA H200 product page and datasheet: H200 SXM 4.8 TB/s, BF16 tensor 1,979* TFLOPS with "
    "sparsity, 141 GB; H200 NVL 4.8 TB/s, 1,671* TFLOPS (nvidia.com/en-us/data-center/h200)"
)


def _card(
    name: str,
    bandwidth_gb_s: float,
    bf16_tflops: float,
    memory_gb: int,
    source: str,
    match: list[str],
    avoid: list[str] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "bandwidth_gb_s": bandwidth_gb_s,
        "bf16_tflops": bf16_tflops,
        "memory_gb": memory_gb,
        "source": source,
        "match": match,
        "avoid": avoid or [],
    }


CARDS: list[dict[str, Any]] = [
    _card("RTX 4090", 1008, 165.2, 24, ADA, ["4090"], ["LAPTOP", "4090 D"]),
    _card("L40S", 864, 362.05, 48, L40S, ["L40S"]),
    _card("A100 40GB", 1555, 312, 40, A100, ["A100", "40GB"]),
    _card("A100 80GB PCIe", 1935, 312, 80, A100, ["A100", "80GB", "PCIE"]),
    _card("A100 80GB SXM", 2039, 312, 80, A100, ["A100", "80GB"], ["PCIE"]),
    _card("H100 SXM", 3350, 989.5, 80, H100, ["H100"], ["PCIE", "NVL"]),
    _card("H200 NVL", 4800, 835.5, 141, H200, ["H200", "NVL"]),
    _card("H200", 4800, 989.5, 141, H200, ["H200"], ["NVL"]),
]
"""Memory bandwidth (GB/s), dense bf16 tensor TFLOP/s, memory as the datasheet prints it (the
cards report about as many GiB: nvidia-smi says 24,564 MiB on an RTX 4090, 143,771 on an H200)."""
