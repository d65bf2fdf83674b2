#!/usr/bin/env bash
# Run several lessons on a bare GPU host, one queue per GPU, side by side, and pack every lesson's
# records into one archive under $OUT (or ./out). Each job is a lesson and its `course run`
# options, as one argument; jobs are dealt to the GPUs in turn (CUDA_VISIBLE_DEVICES), and the jobs
# of one GPU run one after another. The record of each run names the one GPU it saw.
#   bash scripts/gpu-host-batch.sh "prefill-decode" "gpu-memory" "kv-cache --from gpu-check"
# Wheels in .whl/ (scripts/fetch-gpu-wheels.sh) and sources in .cache/sources/ travel with the tree.
# Each lesson's records are copied to $OUT/build/ the moment its run ends: a device call that
# copies the working tree again removes the finished run folders it does not know (only the
# git-ignored .tmp- folder of a run in progress survives), so records left in build/ until a later
# call are lost. The archive is packed from $OUT/build/.
set -uo pipefail
out=${OUT:-$PWD/out}; mkdir -p "$out/build"
site=${COURSE_SITE:-/tmp/course-site}  # where the wheels and this project are installed
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$site" .whl/*.whl || exit 1
python3 -m pip install -q --no-index --no-deps --no-build-isolation --no-cache-dir --upgrade --target "$site" . || exit 1
export PYTHONPATH=$site PATH=$site/bin:$PATH PYTHONUNBUFFERED=1
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader | wc -l)
[ "$gpus" -ge 1 ] || { echo "no GPU"; exit 1; }
limit=${COURSE_RUN_LIMIT:-540}
declare -a queues
i=0
for job in "$@"; do
  g=$((i % gpus)); queues[$g]+="${job}"$'\n'; i=$((i + 1))
done
pids=()
for g in $(seq 0 $((gpus - 1))); do
  [ -n "${queues[$g]:-}" ] || continue
  (
    while IFS= read -r job; do
      [ -n "$job" ] || continue
      lesson=${job%% *}; args=${job#"$lesson"}
      echo "== GPU $g: course run $job"
      # stop (as Ctrl-C would) before the host's limit, so the record is written and comes back
      # shellcheck disable=SC2086
      CUDA_VISIBLE_DEVICES=$g timeout -s INT "$limit" course run "$lesson" $args
      code=$?
      cp -a "build/$lesson" "$out/build/" 2>/dev/null || true
      echo "== GPU $g: $lesson exit $code (records in $out/build/$lesson)"
    done <<< "${queues[$g]}"
  ) > "$out/gpu$g.log" 2>&1 &
  pids+=($!)
done
status=0
for p in "${pids[@]}"; do wait "$p" || status=1; done
lessons=$(for job in "$@"; do echo "${job%% *}"; done | sort -u)
# shellcheck disable=SC2086
tar -czf "$out/records.tar.gz" -C "$out/build" $lessons
nvidia-smi > "$out/nvidia-smi.txt" 2>&1 || true
tail -n 25 "$out"/gpu*.log
exit "$status"
