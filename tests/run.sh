#!/usr/bin/env bash
# Runs the whole test suite in .venv: lint and types first, then pytest; installs what the
# browser, PDF and SSH tests need when missing.
set -euo pipefail
cd "$(dirname "$0")/.."
missing=()
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v pdftotext >/dev/null 2>&1 || missing+=(poppler-utils)
command -v ssh >/dev/null 2>&1 || missing+=(openssh-client)
[ -x /usr/sbin/sshd ] || missing+=(openssh-server)
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages) for the browser, PDF and SSH tests"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi
export NO_MKDOCS_2_WARNING=1
echo "ruff check, ruff format --check, mypy --strict course/"
.venv/bin/ruff check --quiet .
.venv/bin/ruff format --check --quiet .
.venv/bin/mypy course
# every core; a module, or the modules sharing one site build, to a worker (tests/conftest.py)
exec .venv/bin/python -m pytest -q -n "${PYTEST_WORKERS:-auto}" --dist loadscope "$@"
