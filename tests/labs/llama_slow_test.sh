#!/usr/bin/env bash
# Lesson 2.4's START-HERE.md followed literally on a CPU, llama.cpp included (slow: downloading
# llama-cpp-python's source takes minutes, building llama.cpp about 21 minutes on 2 cores the
# first time; both are kept, so a second run takes a few minutes):
#   bash tests/labs/llama_slow_test.sh [--fresh-venv] [LESSON_NUMBER ...]   (default: 2.4)
# 1. builds the site from the committed records into a temporary folder (`course build`);
# 2. tests/walk.py unzips each lesson's zip and types START-HERE.md's commands in order, as a
#    learner without a GPU: every step's CPU form, llama.cpp's lines (pip download, llama_build.sh
#    ... cpu, the exports), the servers in the background until their stop steps, compare.py,
#    which must end with status 0. With --fresh-venv the install lines run too, in a new virtual
#    environment (pip reaches the package registry and PyTorch's CPU index); without it the
#    project's Python stands for that environment.
# HOME for the walk is $WALK_HOME (default ~/.cache/course-walk): the downloaded source and the
# llama.cpp build stay there between runs. Nothing is written into the repository.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
py=${PYTHON:-$( [ -x "$repo/.venv/bin/python" ] && echo "$repo/.venv/bin/python" || echo python3)}
fresh=()
lessons=()
for arg in "$@"; do
  case $arg in --fresh-venv) fresh=(--fresh-venv) ;; *) lessons+=("$arg") ;; esac
done
[ ${#lessons[@]} -gt 0 ] || lessons=(2.4)
home=${WALK_HOME:-$HOME/.cache/course-walk}
mkdir -p "$home"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
t0=$(date +%s)
cd "$repo"
PYTHONPATH=$repo NO_MKDOCS_2_WARNING=1 "$py" -m course build --site-dir "$work/site" > "$work/build.log" 2>&1 \
  || { tail -40 "$work/build.log"; exit 1; }
for number in "${lessons[@]}"; do
  echo "=== lesson $number: START-HERE.md, followed in order without a GPU"
  "$py" tests/walk.py "$work/site/downloads/lesson-$number.zip" --builds --home "$home" "${fresh[@]}"
done
echo "START-HERE.md followed to compare.py's verdict for lesson(s) ${lessons[*]}: $(($(date +%s) - t0)) s"
