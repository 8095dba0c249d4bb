#!/usr/bin/env bash
# Set up (scripts/setup.sh), type-check (mypy) and run the whole test suite. Works on a fresh machine without a GPU:
# GPU tests carry the `gpu` marker and skip; Triton kernels run under the Triton interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY="${KSEARCH_VENV:-.venv}/bin/python"
# FlashInfer-Bench's own package (the `fib` extra), so that the tests exercise both of ksearch's readers of its
# data. Its declared dependencies (flashinfer-python and the CUDA stack, hundreds of MB) serve its GPU runner; what
# ksearch uses of it is 146 KB of pure Python importing torch, pydantic, safetensors, filelock and
# docstring-parser (the last three installed here if missing).
# (pip only where something is missing or older: each call costs seconds even when all is there)
if ! "$PY" -c "import importlib.metadata as m, filelock
v = lambda name: tuple(int(x) for x in m.version(name).split('.')[:2])
assert m.version('flashinfer-bench') == '0.1.2' and v('safetensors') >= (0, 5) and v('docstring-parser') >= (0, 16)
" 2>/dev/null; then
  "$PY" -m pip install -q --no-deps "flashinfer-bench==0.1.2"
  "$PY" -m pip install -q "safetensors>=0.5" filelock "docstring-parser>=0.16"
fi
# Bytecode caches: where PYTHONDONTWRITEBYTECODE is set (some CI images set it) Python writes none, so each pytest
# worker would rewrite every test module's asserts again at every run, and any module setup.sh did not compile would
# be compiled again by each of the suite's ~500 Python processes. The tests run without it (the caches go to
# __pycache__, which git ignores); setup.sh compiled ksearch's own modules.
export PYTHONDONTWRITEBYTECODE=
# The type check (packages, strictness and third-party exceptions in [tool.mypy], pyproject.toml) runs beside the
# tests: it is a minute of one core, and the tests leave a core idle for much of their time (waiting on processes).
# Its output is printed after theirs; either failing fails the command.
mypy_log=$(mktemp)
"$PY" -m mypy >"$mypy_log" 2>&1 &
mypy_pid=$!
# The web UI's browser tests drive Debian's Chromium; install it where we can (CI runs as root). After mypy has
# started: apt waits on the network and dpkg for most of its time, and mypy has a core to itself meanwhile.
if [ ! -x /usr/bin/chromium ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "test.sh: could not install chromium; browser tests will skip" >&2
fi
# Several workers: much of a test's time is spent waiting on subprocesses, servers and sandbox workers (on two cores
# 4 workers keep both busy). A module whose tests share a module-scoped fixture stays on one worker (tests/conftest.py).
# KSEARCH_TEST_WORKERS overrides the count (0: no workers, in this process); the 25 slowest tests are listed.
workers=${KSEARCH_TEST_WORKERS:-4}
rc=0
"$PY" -m pytest -n "$workers" --dist loadgroup --durations=25 "$@" || rc=$?
mypy_rc=0
wait "$mypy_pid" || mypy_rc=$?
echo "mypy (run beside the tests):"
cat "$mypy_log"
rm -f "$mypy_log"
[ "$rc" -ne 0 ] && exit "$rc"
exit "$mypy_rc"
