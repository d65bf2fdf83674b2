#!/usr/bin/env bash
# Fetch, here (with access to the Python package registry), the llama.cpp source that the
# registry's llama-cpp-python sdist vendors, slim it and pack it for a GPU host with no network:
#   bash scripts/fetch-llama-cpp.sh VERSION [DEST]        (DEST defaults to .cache/sources/, where `course run` looks)
# writes DEST/llama.cpp-VERSION.tar.xz (top folder llama.cpp/) and DEST/llama.cpp-VERSION.json
# (version, commit, build number when known, sha256, size). lab/common/llamakit/llama_build.sh
# builds it.
#
# Where the commit comes from: the sdist ships the superproject's git folder, including the
# submodule's own git folder, so `.git/modules/vendor/llama.cpp/HEAD` names the vendored commit;
# it is cross-checked against the gitlink recorded in the superproject's index (mode 160000
# entry for vendor/llama.cpp, read with `git ls-files -s` when git is here) and against the
# CHANGELOG line "update llama.cpp to ggml-org/llama.cpp@<short>" of that version.
set -euo pipefail
version=${1:?usage: fetch-llama-cpp.sh VERSION [DEST]}
repo_root=$(cd "$(dirname "$0")/.." && pwd)
dest=${2:-$repo_root/.cache/sources}
mkdir -p "$dest"
dest=$(cd "$dest" && pwd)
python=${PYTHON:-python3}

# llama.cpp's build number is its commit count on master (release tag bNNNN), which a shallow
# submodule cannot count. Known pairs, read from public references that quote "bNNNN-<commit>"
# (not from the GitHub tags themselves, which cannot be reached from here): check before relying.
declare -A known_build=(
  [0c1e57098bba43ac29e6e3b677cdceebdd22334f]=11312
  [4df29be4f4c3673f428170fda944a5b19f743bb8]=10454
)

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
"$python" -m pip download -q --no-deps --no-binary :all: "llama-cpp-python==$version" -d "$work/dl"
sdist=$(ls "$work"/dl/llama_cpp_python-*.tar.gz)
echo "sdist: $(basename "$sdist") ($(stat -c %s "$sdist") bytes)"
tar -xzf "$sdist" -C "$work"
top="$work/llama_cpp_python-$version"
src="$top/vendor/llama.cpp"
[ -f "$src/CMakeLists.txt" ] || { echo "no vendor/llama.cpp in $sdist" >&2; exit 1; }

commit=$(tr -d '[:space:]' < "$top/.git/modules/vendor/llama.cpp/HEAD" 2>/dev/null || true)
if ! [[ $commit =~ ^[0-9a-f]{40}$ ]]; then
  echo "cannot read the vendored commit from .git/modules/vendor/llama.cpp/HEAD" >&2; exit 1
fi
if command -v git > /dev/null; then
  gitlink=$(git --git-dir="$top/.git" ls-files -s vendor/llama.cpp 2>/dev/null | awk '$1 == "160000" {print $2}')
  if [ -n "$gitlink" ] && [ "$gitlink" != "$commit" ]; then
    echo "submodule HEAD $commit differs from the superproject's gitlink $gitlink" >&2; exit 1
  fi
  how="submodule HEAD"
  [ -n "$gitlink" ] && how="$how, matches the superproject's gitlink"
  echo "commit: $commit ($how)"
else
  echo "commit: $commit (submodule HEAD)"
fi
# the CHANGELOG names the short commit under the version's heading
if ! awk -v v="## [$version]" 'index($0, v) == 1 {on = 1; next} /^## \[/ {on = 0} on' \
  "$top/CHANGELOG.md" | grep -q "llama.cpp@${commit:0:9}"; then
  echo "warning: CHANGELOG of $version does not name llama.cpp@${commit:0:9}" >&2
fi
build_number=${known_build[$commit]:-}

# Slim: what the CPU and CUDA builds of llama-bench, llama-server and llama-quantize, and
# convert_hf_to_gguf.py (with conversion/ and gguf-py/) do not need. examples/, pocs/ and tests/
# are only configured with LLAMA_BUILD_EXAMPLES / LLAMA_BUILD_TESTS (both OFF); the web UI's
# sources are only used by an npm build (LLAMA_BUILD_UI, OFF); ggml backends other than the CPU,
# CUDA, HIP (which compiles ggml-cuda's sources), BLAS and RPC are only configured when enabled.
slim=(
  .git .github .devops .gemini .pi docs media benches examples pocs tests skills
  tools/ui/src tools/ui/tests tools/ui/static tools/ui/package-lock.json
  ggml/src/ggml-sycl ggml/src/ggml-vulkan ggml/src/ggml-opencl ggml/src/ggml-hexagon
  ggml/src/ggml-metal ggml/src/ggml-webgpu ggml/src/ggml-openvino ggml/src/ggml-et
  ggml/src/ggml-cann ggml/src/ggml-zdnn ggml/src/ggml-zendnn ggml/src/ggml-virtgpu
)
for p in "${slim[@]}"; do rm -rf "${src:?}/$p"; done
rm -f "$src"/models/ggml-vocab-*.gguf "$src"/models/ggml-vocab-*.gguf.inp "$src"/models/ggml-vocab-*.gguf.out
# the build-info and version the build script passes to CMake, kept inside the source too
printf '%s\n' "$commit" > "$src/LLAMA_COMMIT"
printf '%s\n' "${build_number:-0}" > "$src/LLAMA_BUILD_NUMBER"
printf '%s\n' "$version" > "$src/LLAMA_CPP_PYTHON_VERSION"

mv "$src" "$work/llama.cpp"
tarball="$dest/llama.cpp-$version.tar.xz"
# fixed order, owner and times so the same sdist packs to the same bytes
tar --sort=name --owner=0 --group=0 --numeric-owner --mtime='2000-01-01 00:00Z' \
  -C "$work" -cf - llama.cpp | xz -T0 -9 > "$tarball.part"
mv "$tarball.part" "$tarball"
sha=$(sha256sum "$tarball" | cut -d' ' -f1)
size=$(stat -c %s "$tarball")
"$python" - "$dest/llama.cpp-$version.json" "$version" "$commit" "${build_number:-}" "$sha" \
  "$size" "$(basename "$sdist")" << 'EOF'
import json, sys
out, version, commit, build, sha, size, sdist = sys.argv[1:]
info = {"version": version, "commit": commit, "commit_short": commit[:9],
        "build_number": int(build) if build else None, "sha256": sha, "size": int(size),
        "source": f"{sdist} from the Python package registry, vendor/llama.cpp (slimmed)"}
with open(out, "w") as f:
    json.dump(info, f, indent=2, sort_keys=True)
    f.write("\n")
EOF
echo "wrote $tarball ($size bytes, sha256 $sha)"
echo "wrote $dest/llama.cpp-$version.json (build ${build_number:-unknown}); $(($(date +%s) - t0)) s"
