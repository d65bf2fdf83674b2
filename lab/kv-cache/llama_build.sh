#!/usr/bin/env bash
# Build llama.cpp's llama-bench, llama-server and llama-quantize (static) from a source tarball
# made by scripts/fetch-llama-cpp.sh (top folder llama.cpp/, with LLAMA_COMMIT and
# LLAMA_BUILD_NUMBER files), for the GPU (cuda) or the CPU (cpu):
#   bash llama_build.sh SRC_TARBALL BUILD_DIR [cuda|cpu]
# The binaries land in BUILD_DIR/bin/. A second call with the same tarball and mode finds them
# and builds nothing. On a rented pod you may instead download a prebuilt release from
# https://github.com/ggml-org/llama.cpp/releases (it has the same three programs).
# Needs CMake >= 3.18, a C/C++ compiler, Ninja or make, and for cuda the CUDA toolkit (nvcc).
# The CUDA architecture comes from $CUDA_ARCH (e.g. 90 for H100/H200, 89 for RTX 4090), else
# from nvidia-smi's compute capability, else CMake's "native".
set -euo pipefail
tarball=${1:?usage: llama_build.sh SRC_TARBALL BUILD_DIR [cuda|cpu]}
build_dir=${2:?usage: llama_build.sh SRC_TARBALL BUILD_DIR [cuda|cpu]}
mode=${3:-cuda}
case $mode in cuda | cpu) ;; *) echo "mode must be cuda or cpu, not $mode" >&2; exit 2 ;; esac
t0=$(date +%s.%N)
mkdir -p "$build_dir"
build_dir=$(cd "$build_dir" && pwd)
tarball=$(cd "$(dirname "$tarball")" && pwd)/$(basename "$tarball")

arch=""
if [ "$mode" = cuda ]; then
  arch=${CUDA_ARCH:-}
  if [ -z "$arch" ] && command -v nvidia-smi > /dev/null; then
    # "9.0" -> 90; one architecture per build (the first GPU's)
    arch=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null | head -1 | tr -d ' .')
  fi
  arch=${arch:-native}
fi
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
stamp="$sha $mode $arch"
bins=(llama-bench llama-server llama-quantize)
if [ -f "$build_dir/stamp" ] && [ "$(cat "$build_dir/stamp")" = "$stamp" ]; then
  ok=1
  for b in "${bins[@]}"; do [ -x "$build_dir/bin/$b" ] || ok=0; done
  if [ $ok = 1 ]; then
    echo "llama.cpp already built in $build_dir ($mode${arch:+, sm_$arch}): nothing to do"
    "$build_dir/bin/llama-server" --version 2>&1 | head -2
    exit 0
  fi
fi

rm -rf "$build_dir/src" "$build_dir/build" "$build_dir/bin" "$build_dir/stamp"
mkdir -p "$build_dir/src"
tar -xJf "$tarball" -C "$build_dir/src"
src="$build_dir/src/llama.cpp"
commit=$(cat "$src/LLAMA_COMMIT" 2>/dev/null || echo unknown)
number=$(cat "$src/LLAMA_BUILD_NUMBER" 2>/dev/null || echo 0)

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
