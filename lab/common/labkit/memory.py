"""Peak GPU memory: what a step (and each part of it) took, and whether it fits a rented card.

    peak = memory.PeakMemory(dev)        # resets PyTorch's peak counters
    ...                                  # a part of the step
    part = peak.part()                   # {"allocated", "reserved"} since the start or last part()
    ...
    results["peak_gpu_memory"] = peak.report()   # printed; the step's worst moment

`allocated` counts bytes in tensors at the worst moment; `reserved` the bytes PyTorch's allocator
held from the GPU then, which is what must fit on the card beside the CUDA context. On the CPU
both are 0 (no GPU memory is used) and `device` says "cpu".

Between parts, `release()` hands back what nothing references (cuBLAS's workspaces included) and
`check_freed()` stops the script when a part left objects or memory behind, which the next
part's peak would otherwise count as its own. PyTorch is imported when a function needs it.
"""

from __future__ import annotations

import gc
import textwrap
from collections.abc import Callable
from typing import Any

from . import facts
from .checks import check
from .units import human

LEFT_TOLERANCE = 2**21
"""What a freed part may leave allocated: a few small tensors, rounded up by the allocator. One
leftover cuBLAS workspace (32 MiB on an H100 or H200) is far above it."""
CARD = "rtx-4090"
"""The card every step is checked against: learners rent 24 GB cards."""


def cuda(device: Any) -> bool:
    """Whether the device is a GPU."""
    return bool(device.type == "cuda")


def allocated(device: Any) -> int:
    """Bytes the allocator has handed to tensors now (0 on the CPU, which has no counter)."""
    import torch

    if not cuda(device):
        return 0
    torch.cuda.synchronize(device)
    return int(torch.cuda.memory_allocated(device))


def reserved(device: Any) -> int:
    """Bytes PyTorch's allocator holds from the GPU now (0 on the CPU)."""
    import torch

    return int(torch.cuda.memory_reserved(device)) if cuda(device) else 0


def total_bytes(device: Any) -> int | None:
    """The card's memory as PyTorch sees it (torch.cuda.mem_get_info()'s total); None on the CPU."""
    import torch

    return int(torch.cuda.mem_get_info(device)[1]) if cuda(device) else None


def free_bytes(device: Any) -> int | None:
    """GPU memory free now, once PyTorch has handed back its cached blocks; None on the CPU."""
    import torch

    if not cuda(device):
        return None
    torch.cuda.synchronize(device)
    torch.cuda.empty_cache()
    return int(torch.cuda.mem_get_info(device)[0])


def outside_bytes(device: Any) -> int:
    """GPU memory in use outside PyTorch's allocator: the CUDA context and libraries (0 on the
    CPU). It grows as libraries load their kernels: read it again at the end of a step."""
    import torch

    if not cuda(device):
        return 0
    free, total = torch.cuda.mem_get_info(device)
    return int(total - free - torch.cuda.memory_reserved(device))


def release(device: Any) -> None:
    """Free what nothing references any more, cuBLAS's workspaces included, and give it back to
    the GPU. Call it only once no CUDA graph that used those workspaces is left."""
    import torch

    gc.collect()  # a decoder refers to itself through its compiled methods: a reference cycle
    if cuda(device):
        torch.cuda.synchronize(device)
        clear = getattr(torch._C, "_cuda_clearCublasWorkspaces", None)
        if clear is not None:
            clear()
        torch.cuda.empty_cache()


def check_freed(
    device: Any, before: int, what: str, gone: list[Callable[[], Any]], strict: bool = True
) -> int:
    """Free a finished part and make sure it is all gone; the bytes it left allocated.

    `gone` holds weak references to the part's objects (model, decoder, weights): none may still
    be referenced (this holds on the CPU too). On a GPU the allocated bytes must come back to
    `before`, what was allocated when the part began, within LEFT_TOLERANCE. A miss stops the
    script, or with strict=False prints a WARNING and carries on.
    """
    release(device)
    kept = sum(ref() is not None for ref in gone)
    left = allocated(device) - before
    problems = []
    if kept:
        problems.append(
            f"{what}: {kept} of its objects are still referenced after it was freed: a list, a"
            " dict, a closure or a compiled function keeps them"
        )
    if abs(left) > LEFT_TOLERANCE:
        problems.append(
            f"{what}: once freed, {left:+,} B allocated against before it began (at most"
            f" {LEFT_TOLERANCE:,} B either way): something keeps GPU memory from one part to the"
            " next (CUDA graphs, cuBLAS workspaces of extra streams, cached tensors)"
        )
    for problem in problems:
        check(not strict, problem)
        print(f"  WARNING: {problem}")
    return left


class PeakMemory:
    """The peak GPU memory of a whole step, kept across the resets that measure its parts."""

    def __init__(self, device: Any) -> None:
        import torch

        self.device = device
        self.allocated = self.reserved = 0
        if cuda(device):
            torch.cuda.synchronize(device)
            torch.cuda.reset_peak_memory_stats(device)

    def _read(self) -> dict[str, int]:
        import torch

        if not cuda(self.device):
            return {"allocated": 0, "reserved": 0}
        torch.cuda.synchronize(self.device)
        return {
            "allocated": int(torch.cuda.max_memory_allocated(self.device)),
            "reserved": int(torch.cuda.max_memory_reserved(self.device)),
        }

    def part(self) -> dict[str, int]:
        """The peaks since the start or the last part(), folded into the step's; the counters
        start afresh (zeros on the CPU)."""
        import torch

        got = self._read()
        self.allocated = max(self.allocated, got["allocated"])
        self.reserved = max(self.reserved, got["reserved"])
        if cuda(self.device):
            torch.cuda.reset_peak_memory_stats(self.device)
        return got

    def step(self) -> dict[str, Any]:
        """The step's peak so far: {"allocated", "reserved", "device"}."""
        got = self._read()
        self.allocated = max(self.allocated, got["allocated"])
        self.reserved = max(self.reserved, got["reserved"])
        return {"allocated": self.allocated, "reserved": self.reserved, "device": self.device.type}

    def report(
        self, paper: int | None = None, what: str = "", sized_to_card: str = ""
    ) -> dict[str, Any]:
        """Print the step's peak (beside its sum on paper, when given) and whether it fits a 24 GB
        card; return it for the results file: allocated, reserved, device, fits_24gb (and paper).

        `sized_to_card` is the sentence saying how a step that fills any card sizes itself; such a
        step does not claim to fit.
        """
        peak = self.step()
        room = facts.room(CARD)
        if paper is not None:
            said = f"peak GPU memory of this step, on paper: {paper:,} B ({human(paper)}) = {what}"
            print(textwrap.fill(said, width=98, subsequent_indent="  "))
            peak["paper"] = paper
        if cuda(self.device):
            print(
                f"peak GPU memory: {peak['allocated']:,} B in tensors ({human(peak['allocated'])}),"
                f"\n  {peak['reserved']:,} B taken by PyTorch from the GPU"
                f" ({human(peak['reserved'])})"
            )
        else:
            print("peak GPU memory: none, this run used the CPU")
        if sized_to_card:
            print(f"  {sized_to_card}")
            peak["fits_24gb"] = None
            return peak
        need = peak["reserved"] if cuda(self.device) else (paper or 0)
        fits = need <= room.bytes
        peak["fits_24gb"] = fits
        said = f"{'fits' if fits else 'does NOT fit'} {room.text}"
        print(textwrap.fill(said, width=98, initial_indent="  ", subsequent_indent="    "))
        return peak
