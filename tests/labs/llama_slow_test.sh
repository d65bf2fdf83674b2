#!/usr/bin/env bash
# The llama.cpp steps of lesson 2.4's lab, end to end on the CPU (slow: the build takes about
# 7 minutes on 2 cores the first time):
#   bash tests/labs/llama_slow_test.sh [VERSION]            (llama-cpp-python version, default 0.3.36)
# 1. scripts/fetch-llama-cpp.sh VERSION (needs the Python package registry; skipped when
#    .cache/llama.cpp/llama.cpp-VERSION.tar.xz is there)
# 2. lab/kv-cache/llama_build.sh ... cpu into $LLAMA_BUILD_DIR (default
#    /tmp/course-llama-cpu-VERSION, kept: a second run finds the binaries and skips the build)
# 3. in a copy of the lab (a temporary folder): llama_gguf.py --tiny, llama-server with 4,096
#    cells then 32,768 (-lv 4), llama_chat.py against the first, llama_kvlog.py on both logs,
#    llama_bench.py, all with --device cpu --tiny; each script checks its own numbers.
# Nothing is written into the repository but the git-ignored .cache/llama.cpp/.
set -euo pipefail
version=${1:-0.3.36}
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$( [ -x /work/main/.venv/bin/python ] && echo /work/main/.venv/bin/python || echo python3)}
build=${LLAMA_BUILD_DIR:-/tmp/course-llama-cpu-$version}
tarball=$repo/.cache/llama.cpp/llama.cpp-$version.tar.xz
t0=$(date +%s)

[ -f "$tarball" ] || PYTHON=$py bash "$repo/scripts/fetch-llama-cpp.sh" "$version"
bash "$repo/lab/kv-cache/llama_build.sh" "$tarball" "$build" cpu

work=$(mktemp -d)
server_pid=""
cleanup() {
  [ -n "$server_pid" ] && kill "$server_pid" 2> /dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
cp -r "$repo/lab/kv-cache" "$work/kv-cache"
rm -rf "$work/kv-cache/results" "$work/kv-cache/gguf"
cd "$work/kv-cache"
export LLAMA_CPP_DIR=$build

step() { printf '\n=== %s\n' "$*"; }
serve() {  # serve CELLS: start llama-server on the tiny bf16 file, wait until it answers
  port=$("$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  # as lab.yml starts it: -lv 4 prints the KV-cache line, --log-file keeps the log for llama_kvlog.py
  "$build/bin/llama-server" -m gguf/qwen3-0_6b-tiny-bf16.gguf -c "$1" -lv 4 --host 127.0.0.1 \
    --port "$port" --log-file "server-$1.log" > "console-$1.log" 2>&1 &
  server_pid=$!
  "$py" - "$port" << 'EOF'
import sys, time, urllib.request
for _ in range(120):
    try:
        if urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/health", timeout=2).status == 200:
            sys.exit(0)
    except OSError:
        time.sleep(0.5)
sys.exit("llama-server did not become ready")
EOF
  grep -m1 "llama_kv_cache: size" "server-$1.log"
}
unserve() { kill "$server_pid"; wait "$server_pid" 2> /dev/null || true; server_pid=""; }

step "GGUF files (tiny)"
"$py" llama_gguf.py --device cpu --tiny
step "llama-server, 4,096 cells, and the chat"
serve 4096
"$py" llama_chat.py --device cpu --tiny --port "$port" --model gguf/qwen3-0_6b-tiny-bf16.gguf
unserve
step "llama-server, 32,768 cells"
serve 32768
unserve
step "the KV-cache lines"
"$py" llama_kvlog.py server-4096.log server-32768.log --model Qwen3-0.6B --tiny
step "llama-bench"
"$py" llama_bench.py --device cpu --tiny --bandwidth 20
for f in llama_gguf llama_chat llama_kv llama_bench; do [ -s "results/$f.json" ]; done
echo
echo "llama.cpp CPU path passed: results/llama_{gguf,chat,kv,bench}.json written and checked; $(($(date +%s) - t0)) s"
