#!/usr/bin/env bash
# Set up a CPU-only environment (if needed) and run the test suite. Works on a fresh machine without a GPU.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${KSEARCH_VENV:-.venv}
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
PY="$VENV/bin/python"
if ! "$PY" -c "import torch" 2>/dev/null; then
  # The CPU build from local disk; never let a dependency pull a multi-GB CUDA torch.
  "$PY" -m pip install -q torch==2.13.0
fi
"$PY" -m pip install -q -e ".[dev]"
exec "$PY" -m pytest "$@"
