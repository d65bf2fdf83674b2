"""lab/common/llamakit/llama_build.sh, the build lessons 2.4, 3.2 and 3.3 run, takes the source as
a learner has it: the registry's sdist (`pip download --no-binary :all: llama-cpp-python==V`: a
.tar.gz with llama.cpp under vendor/llama.cpp and the submodule's git folder), a slimmed .tar.xz
with llama.cpp/ on top, or a folder. The source here is a stand-in with llama.cpp's layout and
build targets (four small C programs printing the build they were given), so CMake really
configures and compiles in seconds; the real source is built by the slow suite
(tests/labs/llama_slow_test.sh)."""

from __future__ import annotations

import importlib
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

KIT = Path(__file__).resolve().parents[2] / "lab" / "common"
SCRIPT = KIT / "llamakit" / "llama_build.sh"
COMMIT = "0c1e57098bba43ac29e6e3b677cdceebdd22334f"  # llama-cpp-python 0.3.36's, build 11312
CMAKE = """cmake_minimum_required(VERSION 3.18)
project(llama_stand_in C)
set(CMAKE_RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
foreach(tool llama-bench llama-server llama-quantize llama-perplexity)
  add_executable(${tool} tool.c)
  target_compile_definitions(${tool} PRIVATE COMMIT="${LLAMA_BUILD_COMMIT}"
    NUMBER=${LLAMA_BUILD_NUMBER} CPU_ONLY=$<NOT:$<BOOL:${GGML_CUDA}>>)
endforeach()
"""
TOOL = """#include <stdio.h>
int main(void) { printf("version: %d (%s) cpu %d\\n", NUMBER, COMMIT, CPU_ONLY); return 0; }
"""


def source_tree(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "CMakeLists.txt").write_text(CMAKE)
    (folder / "tool.c").write_text(TOOL)
    (folder / "convert_hf_to_gguf.py").write_text("# the converter the GGUF steps run\n")
    return folder


def pack(tarball: Path, root: Path, mode: str) -> Path:
    with tarfile.open(tarball, mode) as archive:
        archive.add(root, arcname=root.name)
    return tarball


def build(source: Path, out: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), str(source), str(out), "cpu"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PATH": "/usr/bin:/bin", "JOBS": "2"},
    )


def version(out: Path) -> str:
    return subprocess.run(
        [str(out / "bin" / "llama-server"), "--version"], capture_output=True, text=True
    ).stdout


def converter(out: Path) -> Path:
    """The source's converter in a build folder, where the kit's tools.source_dir finds it for
    lesson 2.4's GGUF steps: out/src/llama.cpp, whatever the layout the source came in."""
    sys.path.insert(0, str(KIT))
    try:
        found = importlib.import_module("llamakit.tools").source_dir(out)
    finally:
        sys.path.remove(str(KIT))
    assert found == out / "src" / "llama.cpp", found
    return found / "convert_hf_to_gguf.py"


def test_the_registrys_sdist_builds_as_downloaded(tmp_path: Path) -> None:
    top = tmp_path / "sdist" / "llama_cpp_python-0.3.36"
    source_tree(top / "vendor" / "llama.cpp")
    head = top / ".git" / "modules" / "vendor" / "llama.cpp" / "HEAD"
    head.parent.mkdir(parents=True)
    head.write_text(COMMIT + "\n")
    (top / "llama_cpp").mkdir()  # the Python package beside it, not built
    sdist = pack(tmp_path / "llama_cpp_python-0.3.36.tar.gz", top, "w:gz")
    done = build(sdist, tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "building llama.cpp 0c1e57098 (build 11312) for cpu" in done.stdout
    assert version(tmp_path / "out") == "version: 11312 (0c1e57098) cpu 1\n"
    assert converter(tmp_path / "out").is_file()
    assert sorted(p.name for p in (tmp_path / "out" / "bin").iterdir()) == [
        "llama-bench", "llama-perplexity", "llama-quantize", "llama-server",
    ]  # fmt: skip
    again = build(sdist, tmp_path / "out")  # the same source and mode: nothing to do
    assert (
        again.returncode == 0
        and "already built" in again.stdout
        and "nothing to do" in again.stdout
    )
    # a folder built before the source was linked there is built again, and linked
    (tmp_path / "out" / "src" / "llama.cpp").unlink()
    again = build(sdist, tmp_path / "out")
    assert again.returncode == 0 and "already built" not in again.stdout, again.stdout
    assert converter(tmp_path / "out").is_file()


def test_a_slimmed_tar_xz_and_a_folder_build_too(tmp_path: Path) -> None:
    tree = source_tree(tmp_path / "slim" / "llama.cpp")
    (tree / "LLAMA_COMMIT").write_text("4df29be4f4c3673f428170fda944a5b19f743bb8\n")
    (tree / "LLAMA_BUILD_NUMBER").write_text("10454\n")
    done = build(pack(tmp_path / "llama.cpp-0.3.35.tar.xz", tree, "w:xz"), tmp_path / "a")
    assert done.returncode == 0, done.stdout + done.stderr
    assert version(tmp_path / "a") == "version: 10454 (4df29be4f) cpu 1\n"
    assert converter(tmp_path / "a").is_file()
    done = build(tree, tmp_path / "b")
    assert done.returncode == 0, done.stdout + done.stderr
    assert version(tmp_path / "b") == "version: 10454 (4df29be4f) cpu 1\n"
    assert converter(tmp_path / "b").is_file()


@pytest.mark.parametrize("kind", ["empty tarball", "missing file"])
def test_a_source_without_llama_cpp_is_refused_by_name(tmp_path: Path, kind: str) -> None:
    if kind == "empty tarball":
        other = tmp_path / "other"
        other.mkdir()
        (other / "README").write_text("not llama.cpp\n")
        source = pack(tmp_path / "other.tar.gz", other, "w:gz")
        message = f"llama_build.sh: no llama.cpp source (CMakeLists.txt) in {source}"
        status = 1
    else:
        source = tmp_path / "nothing.tar.gz"
        message = f"llama_build.sh: {source}: no such file or folder"
        status = 2
    done = build(source, tmp_path / "out")
    assert done.returncode == status and message in done.stderr, done.stderr


def test_a_programs_path_is_printed_as_the_reader_can_use_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not the machine's own folders: the build folder as $LLAMA_CPP_DIR, the home folder as ~."""
    sys.path.insert(0, str(KIT))
    try:
        shown = importlib.import_module("llamakit.tools").shown
    finally:
        sys.path.remove(str(KIT))
    build = tmp_path / "builds" / "llama.cpp-0.3.36-h200"
    monkeypatch.setenv("LLAMA_CPP_DIR", str(build) + "/")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert shown(build / "bin" / "llama-bench") == "$LLAMA_CPP_DIR/bin/llama-bench"
    assert shown(str(build) + "-other/bin/llama-bench") == str(build) + "-other/bin/llama-bench"
    assert shown(tmp_path / "home" / "llama" / "bin" / "llama-server") == "~/llama/bin/llama-server"
    monkeypatch.delenv("LLAMA_CPP_DIR")
    assert shown("/usr/bin/llama-server") == "/usr/bin/llama-server"
