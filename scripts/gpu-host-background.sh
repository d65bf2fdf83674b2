#!/usr/bin/env bash
# A batch of lessons longer than one call to the GPU host allows (10 minutes): start
# scripts/gpu-host-batch.sh in a process session of its own, which outlives the call while the
# machine stays warm, then come back for it in the next call (within the machine's idle time):
#   bash scripts/gpu-host-background.sh start "kv-cache --engine transformers==5.24.0 --wheels .whl/engines" "smaller-cache ..."
#   bash scripts/gpu-host-background.sh wait 540
# `start` writes the GPU's uuid, clocks and power limit to $OUT/gpu.txt and returns at once (each
# run stops itself after COURSE_RUN_LIMIT seconds, 900 here); `wait SECONDS` waits up to SECONDS for
# the batch to end, prints the tail of each GPU's log and, once it has ended, copies its
# records.tar.gz to $OUT (to unpack here: tar -xzf records.tar.gz -C build). The batch keeps its
# records under $COURSE_BATCH (/tmp/batch): each call copies the working tree afresh, removing the
# run folders it does not know.
set -uo pipefail
cd "$(dirname "$0")/.."
out=${OUT:?set OUT, the folder whose files come back}
batch=${COURSE_BATCH:-/tmp/batch}
case "${1:-}" in
  start)
    shift
    [ "$#" -ge 1 ] || { echo "usage: $0 start JOB..." >&2; exit 2; }
    nvidia-smi --query-gpu=uuid,name,clocks.sm,clocks.max.sm,power.limit --format=csv \
      | tee "$out/gpu.txt"
    rm -rf "$batch"
    setsid nohup env OUT="$batch" COURSE_RUN_LIMIT="${COURSE_RUN_LIMIT:-900}" \
      bash scripts/gpu-host-batch.sh "$@" > "$batch.log" 2>&1 < /dev/null &
    echo "started: $*"
    ;;
  wait)
    end=$(( $(date +%s) + ${2:-500} ))
    while [ "$(date +%s)" -lt "$end" ] && [ ! -f "$batch/records.tar.gz" ]; do sleep 1; done
    [ -f "$batch/records.tar.gz" ] && sleep 2  # the archive is written last: let it close
    for log in "$batch"/gpu*.log; do [ -f "$log" ] && { echo "== $log"; tail -c 1500 "$log"; echo; }; done
    if [ -f "$batch/records.tar.gz" ]; then
      cp "$batch/records.tar.gz" "$out/" && echo "done: records.tar.gz"
    else
      echo "still running: call wait again within the machine's idle time"
    fi
    ;;
  *) echo "usage: $0 start JOB... | wait SECONDS" >&2; exit 2 ;;
esac
