#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-server, llama-quantize and llama-perplexity (static), for
# the GPU (cuda) or the CPU (cpu), from the source as you have it:
#   bash llamakit/llama_build.sh SOURCE BUILD_DIR [cuda|cpu]
# SOURCE is any of
#   - what `pip download --no-deps --no-binary :all: llama-cpp-python==VERSION` gives:
#     llama_cpp_python-VERSION.tar.gz, with llama.cpp's source under vendor/llama.cpp;
#   - a .tar.xz (or .tar.gz) with a llama.cpp/ folder on top, as scripts/fetch-llama-cpp.sh packs
#     it (with LLAMA_COMMIT and LLAMA_BUILD_NUMBER files);
#   - a folder holding llama.cpp's source (its CMakeLists.txt), such as a git clone.
# The binaries land in BUILD_DIR/bin/: put that folder on your PATH, or set LLAMA_CPP_DIR to
# BUILD_DIR (the lab's scripts look there); BUILD_DIR/src/llama.cpp is the source, whatever
# layout it came in (convert_hf_to_gguf.py and gguf-py are found there). A second call with the same source and mode finds
# them and builds nothing. On a rented pod you may instead download a prebuilt release from
# https://github.com/ggml-org/llama.cpp/releases (it has the same four programs).
# Needs CMake >= 3.18, a C/C++ compiler, Ninja or make, and for cuda the CUDA toolkit (nvcc).
# The CUDA architecture comes from $CUDA_ARCH (e.g. 90 for H100/H200, 89 for RTX 4090), else
# from nvidia-smi's compute capability, else CMake's "native". $JOBS sets the parallel jobs.
set -euo pipefail
usage="usage: llama_build.sh SOURCE BUILD_DIR [cuda|cpu] (SOURCE: llama_cpp_python-VERSION.tar.gz, a llama.cpp .tar.xz or a source folder)"
source=${1:?$usage}
build_dir=${2:?$usage}
mode=${3:-cuda}
case $mode in cuda | cpu) ;; *) echo "mode must be cuda or cpu, not $mode" >&2; exit 2 ;; esac
t0=$(date +%s.%N)
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
[ -e "$source" ] || { echo "llama_build.sh: $source: no such file or folder ($usage)" >&2; exit 2; }
source=$(cd "$(dirname "$source")" && pwd)/$(basename "$source")

arch=""
if [ "$mode" = cuda ]; then
  arch=${CUDA_ARCH:-}
  if [ -z "$arch" ] && command -v nvidia-smi > /dev/null; then
    # "9.0" -> 90; one architecture per build (the first GPU's)
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  fi
  arch=${arch:-native}
fi
if [ -d "$source" ]; then  # a folder: its files' names and contents, sorted
  sha=$(cd "$source" && find . -type f -not -path './.git/*' -print0 | LC_ALL=C sort -z \
    | xargs -0 sha256sum | sha256sum | cut -d' ' -f1)
else
  sha=$(sha256sum "$source" | cut -d' ' -f1)
fi
stamp="$sha $mode $arch"
bins=(llama-bench llama-server llama-quantize llama-perplexity)
if [ -f "$build_dir/stamp" ] && [ "$(cat "$build_dir/stamp")" = "$stamp" ]; then
  ok=1
  for b in "${bins[@]}"; do [ -x "$build_dir/bin/$b" ] || ok=0; done
  [ -e "$build_dir/src/llama.cpp" ] || ok=0  # a build from before the source's link: again
  if [ $ok = 1 ]; then
    echo "llama.cpp already built in $build_dir ($mode${arch:+, sm_$arch}): nothing to do"
    "$build_dir/bin/llama-server" --version 2>&1 | head -2
    exit 0
  fi
fi

rm -rf "$build_dir/src" "$build_dir/build" "$build_dir/bin" "$build_dir/stamp"
mkdir -p "$build_dir/src"
commit="" number=""
if [ -d "$source" ]; then
  src=$source
else
  # tar finds the compression itself (gzip, xz); the top folder says which layout this is
  top=$(tar -tf "$source" 2> /dev/null | head -1 | cut -d/ -f1 || true)
  case $top in
    llama_cpp_python-*)  # the registry's source distribution: llama.cpp sits in vendor/
      tar -xf "$source" -C "$build_dir/src" "$top/vendor/llama.cpp" \
        || { echo "llama_build.sh: no vendor/llama.cpp in $source" >&2; exit 1; }
      # the sdist keeps the submodule's git folder: its HEAD names the vendored commit
      tar -xf "$source" -C "$build_dir/src" "$top/.git/modules/vendor/llama.cpp/HEAD" 2> /dev/null \
        && commit=$(tr -d '[:space:]' < "$build_dir/src/$top/.git/modules/vendor/llama.cpp/HEAD")
      src="$build_dir/src/$top/vendor/llama.cpp"
      ;;
    *)
      tar -xf "$source" -C "$build_dir/src"
      src="$build_dir/src/$top"
      ;;
  esac
fi
[ -f "$src/CMakeLists.txt" ] || { echo "llama_build.sh: no llama.cpp source (CMakeLists.txt) in $source" >&2; exit 1; }
# the lab's scripts find the source (convert_hf_to_gguf.py, gguf-py) at DIR/src/llama.cpp, whatever
# the layout it came in (the sdist keeps it under llama_cpp_python-VERSION/vendor/llama.cpp)
[ -e "$build_dir/src/llama.cpp" ] || ln -s "$(cd "$src" && pwd)" "$build_dir/src/llama.cpp"
[[ $commit =~ ^[0-9a-f]{40}$ ]] || commit=$(cat "$src/LLAMA_COMMIT" 2> /dev/null || echo unknown)
# llama.cpp's build number (release tag bNNNN) counts commits, which a source without git history
# cannot: read it from the slimmed source, else from the releases the lab was recorded with
declare -A known_build=([0c1e57098bba43ac29e6e3b677cdceebdd22334f]=11312 [4df29be4f4c3673f428170fda944a5b19f743bb8]=10454)
number=$(cat "$src/LLAMA_BUILD_NUMBER" 2> /dev/null || echo "${known_build[$commit]:-0}")

generator=()
command -v ninja > /dev/null && generator=(-G Ninja)
flags=(
  -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF
  -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF
  # no git in an unpacked tarball: say which source this is, so --version and llama-bench's
  # build_commit / build_number name it
  "-DLLAMA_BUILD_COMMIT=${commit:0:9}" "-DLLAMA_BUILD_NUMBER=$number"
)
if [ "$mode" = cuda ]; then
  flags+=(-DGGML_CUDA=ON "-DCMAKE_CUDA_ARCHITECTURES=$arch")
else
  flags+=(-DGGML_CUDA=OFF)
fi
jobs=${JOBS:-$(nproc)}
echo "building llama.cpp ${commit:0:9} (build $number) for $mode${arch:+ (sm_$arch)} with $jobs jobs"
cmake -S "$src" -B "$build_dir/build" "${generator[@]}" "${flags[@]}" > "$build_dir/cmake.log" 2>&1 \
  || { tail -40 "$build_dir/cmake.log"; exit 1; }
cmake --build "$build_dir/build" --target "${bins[@]}" -j "$jobs" > "$build_dir/build.log" 2>&1 \
  || { tail -60 "$build_dir/build.log"; exit 1; }
mkdir -p "$build_dir/bin"
for b in "${bins[@]}"; do cp "$build_dir/build/bin/$b" "$build_dir/bin/$b"; done
echo "$stamp" > "$build_dir/stamp"
"$build_dir/bin/llama-server" --version 2>&1 | head -2
ls -l "$build_dir/bin"
awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "llama.cpp build wall time: %.1f s\n", b - a }'
