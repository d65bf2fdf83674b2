"""The device a GPU step runs on, and its `--device cpu --tiny` mode.

Every GPU script takes the same options, so a learner can run any step on a CPU in seconds before
renting a GPU, and the tests run the real code that way:

    parser = device.arguments(__doc__)              # --device, --tiny (and --weights if asked;
                                                    # --bandwidth, --no-compile with speed=True)
    parser.add_argument(...)                        # the script's own options
    args = parser.parse_args()
    dev = device.pick(args)                         # stops with the fix when CUDA is missing
    print(device.describe(dev, "torch", "transformers"))

PyTorch is imported when a function needs it; building the parser needs only the standard library.
"""

from __future__ import annotations

import argparse
from importlib import metadata
from typing import Any

from .checks import check, fail

NO_CUDA = "no CUDA GPU is visible; for a quick run on the CPU use --device cpu --tiny"


def add_device_args(parser: argparse.ArgumentParser, weights: bool = False) -> None:
    """The options every GPU script shares: --device, --tiny, and with `weights` --weights."""
    parser.add_argument("--device", default="cuda", help="cuda (default), cuda:N or cpu")
    parser.add_argument(
        "--tiny",
        action="store_true",
        help="shrunken models and shorter sweeps, to run in seconds on a CPU (tests)",
    )
    if weights:
        parser.add_argument(
            "--weights",
            help="real weights: a Hugging Face model id (Qwen/Qwen3-0.6B) or a local folder",
        )


def add_speed_args(parser: argparse.ArgumentParser) -> None:
    """The options of a script that times decode steps against their bytes bound: --bandwidth
    (B/s, given instead of measured) and --no-compile (the small operations left unfused)."""
    parser.add_argument(
        "--bandwidth", type=float, help="use this copy bandwidth (B/s) instead of measuring"
    )
    parser.add_argument(
        "--no-compile", action="store_true", help="leave the small operations unfused"
    )


def arguments(
    doc: str | None, weights: bool = False, speed: bool = False
) -> argparse.ArgumentParser:
    """A parser described by the first paragraph of the script's docstring, with the shared
    options already added (with `speed`, add_speed_args' too)."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    add_device_args(parser, weights=weights)
    if speed:
        add_speed_args(parser)
    return parser


def pick_device(name: str, tiny: bool = False, cpu_needs_tiny: bool = False) -> Any:
    """The torch device; stop with the fix when CUDA was asked for and none is visible. On the
    CPU with --tiny, PyTorch runs one thread (a tiny model gains nothing from threads that wait
    on each other); with `cpu_needs_tiny`, the CPU is refused without --tiny."""
    import torch

    if name.startswith("cuda") and not torch.cuda.is_available():
        fail(NO_CUDA)
    if name == "cpu":
        check(tiny or not cpu_needs_tiny, "on the CPU this script runs only with --tiny")
        if tiny:
            torch.set_num_threads(1)
    return torch.device(name)


def pick(args: argparse.Namespace, cpu_needs_tiny: bool = False) -> Any:
    """pick_device() for parsed arguments (`args.device`, `args.tiny`)."""
    return pick_device(args.device, bool(getattr(args, "tiny", False)), cpu_needs_tiny)


def version(package: str) -> str:
    """An installed package's version, or 'not installed'."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def describe(device: Any, *packages: str) -> str:
    """One line naming the device and the engines' versions, printed first by every GPU step:
    'device: cuda (NVIDIA H200); torch 2.11.0, transformers 5.17.0'."""
    import torch

    what = torch.cuda.get_device_name(device) if device.type == "cuda" else "CPU"
    versions = ", ".join(
        f"{p} {torch.__version__ if p == 'torch' else version(p)}" for p in packages or ("torch",)
    )
    return f"device: {device.type} ({what}); {versions}"


def is_cuda(device: Any) -> bool:
    """Whether the device is a GPU (CUDA)."""
    return bool(device.type == "cuda")
