"""Finding llama.cpp's programs, its source and the build they come from.

Where llama.cpp comes from, in order: --llama DIR, $LLAMA_CPP_DIR, then the PATH. DIR is what
llamakit/llama_build.sh built (DIR/bin/llama-server, ..., and the source at DIR/src/llama.cpp)
or an unpacked release.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any


def llama_dir(given: str | None) -> Path | None:
    """The folder llama_build.sh built into, from --llama or $LLAMA_CPP_DIR; None: the PATH."""
    name = given or os.environ.get("LLAMA_CPP_DIR")
    return Path(name).resolve() if name else None


def shown(path: str | Path) -> str:
    """A program's path as a reader of the output can use it: under the build folder named by
    LLAMA_CPP_DIR as `$LLAMA_CPP_DIR/...`, under the home folder as `~/...`."""
    text = str(path)
    for prefix, name in (
        (os.environ.get("LLAMA_CPP_DIR"), "$LLAMA_CPP_DIR"),
        (str(Path.home()), "~"),
    ):
        if prefix and (text == prefix or text.startswith(prefix.rstrip("/") + "/")):
            return name + text[len(prefix.rstrip("/")) :]
    return text


def tool(name: str, folder: Path | None) -> str:
    """The path of a llama.cpp program (llama-server, llama-bench, llama-quantize, ...)."""
    if folder is not None:
        for cand in (folder / "bin" / name, folder / name, folder / "build" / "bin" / name):
            if cand.is_file() and os.access(cand, os.X_OK):
                return str(cand)
    found = shutil.which(name)
    if not found:
        where = f" in {folder}/bin" if folder else ""
        raise SystemExit(
            f"{name} not found{where} or on the PATH: build llama.cpp with llamakit/llama_build.sh"
            " (or download a release) and pass --llama DIR or set LLAMA_CPP_DIR"
        )
    return found


def source_dir(folder: Path | None) -> Path | None:
    """llama.cpp's source tree in a build folder (for convert_hf_to_gguf.py and gguf-py), or
    None when there is none (a prebuilt release, or programs on the PATH)."""
    if folder is None:
        return None
    for cand in (folder / "src" / "llama.cpp", folder):
        if (cand / "convert_hf_to_gguf.py").is_file():
            return cand
    return None


def version(binary: str) -> str:
    """The first line of `binary --version`, e.g. 'version: 0.5.0-dev (build 11312, commit ...)'."""
    out = subprocess.run(
        [binary, "--version"], check=False, capture_output=True, text=True, timeout=60
    )
    lines = [ln for ln in (out.stdout + out.stderr).splitlines() if ln.startswith("version:")]
    return lines[0] if lines else "version unknown"


def build_of(line: str) -> dict[str, Any]:
    """The build a `--version` line names, in either form llama.cpp prints: 'version: 0.5.0-dev
    (build 11312, commit 0c1e57098)' or 'version: 11312 (0c1e57098)' -> {"version": the line,
    "build_number": 11312, "build_commit": "0c1e57098"} (None where the line does not say)."""
    got = re.search(r"build (\d+), commit (\w+)", line) or re.search(
        r"version:\s*(\d+)\s*\((\w+)\)", line
    )
    number, commit = (int(got.group(1)), got.group(2)) if got else (None, None)
    return {"version": line, "build_number": number, "build_commit": commit}


def describe_build(folder: Path | None, *names: str) -> dict[str, Any]:
    """The build of the first of `names` found, as its --version line names it."""
    for name in names:
        try:
            path = tool(name, folder)
        except SystemExit:
            continue
        return build_of(version(path)) | {"from": Path(path).name}
    return build_of("version unknown") | {"from": None}
