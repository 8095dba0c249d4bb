#!/usr/bin/env bash
# Set up (scripts/setup.sh), type-check (mypy) and run the whole test suite. Works on a fresh machine without a GPU:
# GPU tests carry the `gpu` marker and skip; Triton kernels run under the Triton interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
# The web UI's browser tests drive Debian's Chromium; install it where we can (CI runs as root).
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "test.sh: could not install chromium; browser tests will skip" >&2
fi
PY="${KSEARCH_VENV:-.venv}/bin/python"
# The type check first: packages, strictness and third-party exceptions are in [tool.mypy] (pyproject.toml).
"$PY" -m mypy
# Several workers: much of a test's time is spent waiting on subprocesses, servers and sandbox workers (on two cores
# 4 workers keep both busy). A module whose tests share a module-scoped fixture stays on one worker (tests/conftest.py).
# KSEARCH_TEST_WORKERS overrides the count (0: no workers, in this process); the 25 slowest tests are listed.
workers=${KSEARCH_TEST_WORKERS:-4}
exec "$PY" -m pytest -n "$workers" --dist loadgroup --durations=25 "$@"
