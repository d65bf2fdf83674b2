"""GGUF files, llama.cpp's model format: read what one holds, write one with random weights.

A GGUF file is a header (b"GGUF", the version, the number of tensors and of metadata entries),
the metadata (key, type, value), one record per tensor (name, dimensions, number format, offset)
and then the tensors' bytes, each starting at a multiple of `general.alignment` (32). Dimensions
are listed innermost first: a matrix that multiplies a vector of 4,096 numbers into 1,024 is
[4096, 1024], and a block format (Q8_0: 32 numbers in 34 bytes) packs along the first one.

Standard library only. The writer fills the tensors in parallel worker processes, each writing
its own tensor at its offset, so an 8 GB file takes seconds on a many-core host.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import random
import struct
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ALIGN = 32
# ggml's number formats (ggml.h, enum ggml_type): id -> name, numbers per block, bytes per block
GGML_TYPES: dict[int, tuple[str, int, int]] = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    30: ("BF16", 1, 2),
}
TYPE_ID = {name: tid for tid, (name, _, _) in GGML_TYPES.items()}
# the file's `general.file_type` (llama.h, enum llama_ftype) for files of one matrix format
FILE_TYPE = {"F32": 0, "F16": 1, "Q4_0": 2, "Q8_0": 7, "BF16": 32}

# metadata value types (gguf.h, enum gguf_type) and their struct formats
UINT8, INT8, UINT16, INT16, UINT32, INT32, FLOAT32, BOOL, STRING, ARRAY, UINT64, INT64 = (
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11,
)  # fmt: skip
FLOAT64 = 12
_SCALARS = {
    UINT8: "<B", INT8: "<b", UINT16: "<H", INT16: "<h", UINT32: "<I", INT32: "<i",
    FLOAT32: "<f", BOOL: "<?", UINT64: "<Q", INT64: "<q", FLOAT64: "<d",
}  # fmt: skip


def block_bytes(type_name: str, numbers: int) -> int:
    """Bytes of `numbers` numbers in a ggml format (whole blocks: `numbers` must fill them)."""
    _, block, nbytes = GGML_TYPES[TYPE_ID[type_name]]
    if numbers % block:
        raise ValueError(f"{numbers} numbers do not fill whole {type_name} blocks of {block}")
    return numbers // block * nbytes


# --- reading -------------------------------------------------------------------------------


class _Reader:
    """Little-endian reads from a memory-mapped GGUF file."""

    def __init__(self, buf: mmap.mmap) -> None:
        self.buf, self.pos = buf, 0

    def scalar(self, fmt: str) -> Any:
        (value,) = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += struct.calcsize(fmt)
        return value

    def string(self) -> str:
        n = self.scalar("<Q")
        text = self.buf[self.pos : self.pos + n].decode("utf-8", errors="replace")
        self.pos += n
        return text

    def value(self, kind: int, keep: bool) -> Any:
        if kind == STRING:
            return self.string()
        if kind == ARRAY:
            item, n = self.scalar("<I"), self.scalar("<Q")
            if item in _SCALARS:  # a numeric array: read (or skip) it in one jump
                size = struct.calcsize(_SCALARS[item])
                start, self.pos = self.pos, self.pos + n * size
                fmt = f"<{n}{_SCALARS[item][1]}"
                return list(struct.unpack_from(fmt, self.buf, start)) if keep else n
            items = [self.value(item, keep) for _ in range(n)]
            return items if keep else n
        return self.scalar(_SCALARS[kind])


def read_gguf(path: str | Path, arrays: Sequence[str] = ()) -> dict[str, Any]:
    """A GGUF file's metadata and its tensors' formats and bytes.

    Arrays (the vocabulary's tokens, merges) are shortened to their length, except those named in
    `arrays`. Each tensor's bytes come from its format's block size when the format is known,
    else from the distance to the next tensor (which includes the padding).
    """
    path = Path(path)
    size = path.stat().st_size
    with path.open("rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        if buf[:4] != b"GGUF":
            raise ValueError(f"{path} is not a GGUF file (it starts with {bytes(buf[:4])!r})")
        r = _Reader(buf)
        r.pos = 4
        version = r.scalar("<I")
        n_tensors, n_kv = r.scalar("<Q"), r.scalar("<Q")
        meta: dict[str, Any] = {}
        kinds: dict[str, int] = {}
        for _ in range(n_kv):
            key = r.string()
            kind = r.scalar("<I")
            kinds[key] = kind
            meta[key] = r.value(kind, keep=kind != ARRAY or key in arrays)
        infos = []
        for _ in range(n_tensors):
            name = r.string()
            dims = [r.scalar("<Q") for _ in range(r.scalar("<I"))]
            infos.append((name, dims, r.scalar("<I"), r.scalar("<Q")))
        align = int(meta.get("general.alignment", ALIGN))
        data_start = (r.pos + align - 1) // align * align
    starts = sorted(off for *_, off in infos)
    next_start = dict(zip(starts, starts[1:] + [size - data_start], strict=True))
    tensors = {}
    for name, dims, kind, offset in infos:
        count = 1
        for d in dims:
            count *= d
        tname, block, nbytes = GGML_TYPES.get(kind, (f"type{kind}", 0, 0))
        length = count // block * nbytes if block else next_start[offset] - offset
        tensors[name] = {"type": tname, "shape": dims, "numbers": count, "bytes": length,
                         "offset": data_start + offset}  # fmt: skip
    return {"version": version, "file_bytes": size, "metadata": meta, "kinds": kinds,
            "tensors": tensors, "data_start": data_start}  # fmt: skip


def summary(path: str | Path) -> dict[str, Any]:
    """What a decode step reads from a GGUF file, and the shapes that size its cache.

    Of the embedding table a decode step reads one row, so it is left out when the file has a
    separate output matrix; with tied embeddings (no output.weight) the same table is the output
    matrix and is read whole.
    """
    g = read_gguf(path)
    meta, tensors = g["metadata"], g["tensors"]
    arch = meta["general.architecture"]
    tensor_bytes = sum(t["bytes"] for t in tensors.values())
    numbers = sum(t["numbers"] for t in tensors.values())
    embed = tensors.get("token_embd.weight", {"bytes": 0})["bytes"]
    heads = int(meta[f"{arch}.attention.head_count"])
    head_k = int(meta.get(f"{arch}.attention.key_length", 0)) or (
        int(meta[f"{arch}.embedding_length"]) // heads
    )
    types: dict[str, int] = {}
    for t in tensors.values():
        types[t["type"]] = types.get(t["type"], 0) + t["bytes"]
    return {
        "architecture": arch,
        "file_bytes": g["file_bytes"],
        "tensor_bytes": tensor_bytes,
        "weights": numbers,
        "bytes_per_weight": tensor_bytes / numbers,
        "bits_per_weight": 8 * tensor_bytes / numbers,
        "read_bytes_per_token": tensor_bytes - embed
        if "output.weight" in tensors
        else tensor_bytes,
        "tied_embeddings": "output.weight" not in tensors,
        "layers": int(meta[f"{arch}.block_count"]),
        "heads": heads,
        "kv_heads": int(meta.get(f"{arch}.attention.head_count_kv", heads)),
        "head_dim_k": head_k,
        "head_dim_v": int(meta.get(f"{arch}.attention.value_length", head_k)),
        "context_length": int(meta.get(f"{arch}.context_length", 0)),
        "file_type": int(meta.get("general.file_type", -1)),
        "bytes_by_type": types,
    }


# --- writing -------------------------------------------------------------------------------

Fill = Callable[[int, int], bytes]
"""A tensor's bytes from (start, length) within it: the writer asks for pieces of at most
CHUNK bytes, each starting on a whole block."""
CHUNK = 1 << 24


@dataclass(frozen=True)
class Tensor:
    """One tensor to write: its name, dimensions (innermost first), format and how to fill it."""

    name: str
    dims: tuple[int, ...]
    type: str
    fill: Fill

    @property
    def numbers(self) -> int:
        n = 1
        for d in self.dims:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return block_bytes(self.type, self.numbers)


def _string(text: str) -> bytes:
    data = text.encode("utf-8")
    return struct.pack("<Q", len(data)) + data


def _value(kind: int, value: Any) -> bytes:
    if kind == STRING:
        return _string(value)
    return struct.pack(_SCALARS[kind], value)


def encode_metadata(entries: Sequence[tuple[str, int, Any]]) -> bytes:
    """Metadata entries (key, type, value) as GGUF bytes; an ARRAY's value is (item type, items)."""
    out = bytearray()
    for key, kind, value in entries:
        out += _string(key) + struct.pack("<I", kind)
        if kind == ARRAY:
            item, items = value
            out += struct.pack("<IQ", item, len(items))
            if item == STRING:
                out += b"".join(_string(s) for s in items)
            else:
                out += struct.pack(f"<{len(items)}{_SCALARS[item][1]}", *items)
        else:
            out += _value(kind, value)
    return bytes(out)


def layout(tensors: Sequence[Tensor], header: int) -> tuple[int, list[int], int]:
    """Where the data starts, each tensor's offset from there, and the file's size."""
    data_start = (header + ALIGN - 1) // ALIGN * ALIGN
    offsets, at = [], 0
    for t in tensors:
        offsets.append(at)
        at += (t.nbytes + ALIGN - 1) // ALIGN * ALIGN
    return data_start, offsets, data_start + at


def _fill_one(path: str, start: int, tensor: Tensor) -> str:
    """In a worker: write one tensor's bytes at its place in the file."""
    _, block, nbytes = GGML_TYPES[TYPE_ID[tensor.type]]
    step = CHUNK // nbytes * nbytes  # whole blocks per piece
    fd = os.open(path, os.O_WRONLY)
    try:
        done = 0
        while done < tensor.nbytes:
            length = min(step, tensor.nbytes - done)
            data = tensor.fill(done, length)
            if len(data) != length:
                raise ValueError(f"{tensor.name}: filled {len(data)} bytes, not {length}")
            os.pwrite(fd, data, start + done)
            done += length
    finally:
        os.close(fd)
    return tensor.name


def write_gguf(
    path: str | Path,
    metadata: Sequence[tuple[str, int, Any]],
    tensors: Sequence[Tensor],
    workers: int | None = None,
) -> int:
    """Write a GGUF v3 file: the header and metadata, then every tensor, filled by `workers`
    processes (default: one per core) at once; the file's size in bytes."""
    path = Path(path)
    head = bytearray(b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(metadata)))
    head += encode_metadata(metadata)
    infos = bytearray()
    for t in tensors:  # offsets are known once the header's length is: two passes
        infos += _string(t.name) + struct.pack("<I", len(t.dims))
        infos += b"".join(struct.pack("<Q", d) for d in t.dims) + struct.pack("<IQ", 0, 0)
    data_start, offsets, size = layout(tensors, len(head) + len(infos))
    for t, offset in zip(tensors, offsets, strict=True):
        head += _string(t.name) + struct.pack("<I", len(t.dims))
        head += b"".join(struct.pack("<Q", d) for d in t.dims)
        head += struct.pack("<IQ", TYPE_ID[t.type], offset)
    tmp = path.with_name(f".{path.name}.partial")
    with tmp.open("wb") as f:
        f.write(head + b"\0" * (data_start - len(head)))
        f.truncate(size)
    count = workers or os.cpu_count() or 1
    if count == 1:
        for t, offset in zip(tensors, offsets, strict=True):
            _fill_one(str(tmp), data_start + offset, t)
    else:
        with ProcessPoolExecutor(count) as pool:
            jobs = [pool.submit(_fill_one, str(tmp), data_start + o, t)
                    for t, o in zip(tensors, offsets, strict=True)]  # fmt: skip
            for job in jobs:
                job.result()
    os.replace(tmp, path)
    return size


# --- random numbers in ggml's formats -------------------------------------------------------


def _f16(x: float) -> bytes:
    return struct.pack("<e", x)


def _bf16(x: float) -> bytes:
    return struct.pack("<f", x)[2:]  # the top half of a float32 (rounded toward zero)


@dataclass(frozen=True)
class RandomFill:
    """Numbers spread evenly around zero with a given standard deviation, in a ggml format, the
    same for the same (seed, tensor name) whatever the number of workers: each piece of CHUNK
    bytes has its own generator. Q8_0 keeps one scale per block of 32 small integers, Q4_0 one
    per block of 32 four-bit integers; F16 and BF16 store each number."""

    type: str
    seed: str
    std: float = 0.02

    def __call__(self, start: int, length: int) -> bytes:
        digest = hashlib.sha256(f"{self.seed}/{start}".encode()).digest()
        rng = random.Random(int.from_bytes(digest[:8], "little"))
        if self.type == "Q8_0":  # 32 int8 in [-128, 127] (sd 73.9) times one f16 scale
            return self._blocks(rng, length, 34, _f16(self.std / 73.9))
        if self.type == "Q4_0":  # 32 nibbles in [0, 15], minus 8 (sd 4.61), times one f16 scale
            return self._blocks(rng, length, 18, _f16(self.std / 4.61))
        if self.type in ("F16", "BF16"):  # each byte picks one of 256 evenly spaced numbers
            pack = _f16 if self.type == "F16" else _bf16
            table = [pack((b - 127.5) / 73.9 * self.std) for b in range(256)]
            low = bytes(t[0] for t in table)
            high = bytes(t[1] for t in table)
            raw = rng.randbytes(length // 2)
            out = bytearray(length)
            out[0::2], out[1::2] = raw.translate(low), raw.translate(high)
            return bytes(out)
        raise ValueError(f"no random fill for {self.type} (F16, BF16, Q8_0, Q4_0)")

    @staticmethod
    def _blocks(rng: random.Random, length: int, size: int, scale: bytes) -> bytes:
        out = bytearray(rng.randbytes(length))
        n = length // size
        out[0::size], out[1::size] = scale[:1] * n, scale[1:] * n
        return bytes(out)


@dataclass(frozen=True)
class ConstantFill:
    """Every number `value`, in F32 or F16: a norm's weights are ones before training."""

    type: str
    value: float = 1.0

    def __call__(self, start: int, length: int) -> bytes:
        one = struct.pack("<f", self.value) if self.type == "F32" else _f16(self.value)
        return one * (length // len(one))


# --- the KV cache's number formats ---------------------------------------------------------

CACHE_TYPES = {"f32": "F32", "f16": "F16", "bf16": "BF16", "q8_0": "Q8_0", "q4_0": "Q4_0",
               "q4_1": "Q4_1", "q5_0": "Q5_0", "q5_1": "Q5_1"}  # fmt: skip
"""llama.cpp's --cache-type-k/-v names (-ctk, -ctv) and their ggml formats."""


def cache_row_bytes(cache_type: str, numbers: int) -> int:
    """Bytes of one cached vector of `numbers` numbers (all of a layer's key-value heads) in a
    cache format: a block format stores its scales with each block of 32 (q8_0: 32 numbers in
    34 bytes, q4_0: 32 in 18)."""
    return block_bytes(CACHE_TYPES[cache_type], numbers)


def kv_bytes_per_token(s: dict[str, Any], k_type: str = "f16", v_type: str | None = None) -> int:
    """Keys and values of one token in every layer, as llama.cpp lays out its cache: per layer
    one key row of kv_heads x head size numbers in `k_type` and one value row in `v_type`."""
    k = cache_row_bytes(k_type, s["kv_heads"] * s["head_dim_k"])
    v = cache_row_bytes(v_type or k_type, s["kv_heads"] * s["head_dim_v"])
    return s["layers"] * (k + v)
