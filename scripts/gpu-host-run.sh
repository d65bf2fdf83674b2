#!/usr/bin/env bash
# Run a lesson's lab on a bare GPU host that has Python, torch and transformers but no internet:
# install the wheels carried in .whl/ and this project (no dependencies fetched), run
# `course run LESSON ARGS...`, and pack the lesson's records into $OUT (or ./out) as one archive.
#   bash scripts/gpu-host-run.sh kv-cache [--only STEP] [--force] ...
set -uo pipefail
lesson=$1; shift
out=${OUT:-$PWD/out}; mkdir -p "$out"
site=/tmp/course-site
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target "$site" . || exit 1
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
# stop (as Ctrl-C would) before the host's own limit, so the record is written and comes back
timeout -s INT "${COURSE_RUN_LIMIT:-540}" course run "$lesson" "$@" 2>&1 | tee "$out/course-run.log"
status=${PIPESTATUS[0]}
tar -czf "$out/build-$lesson.tar.gz" -C build "$lesson"
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
exit "$status"
