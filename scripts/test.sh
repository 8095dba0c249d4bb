#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. Works on a fresh machine without a GPU:
# GPU tests carry the `gpu` marker and skip; Triton kernels run under the Triton interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${KSEARCH_VENV:-.venv}/bin/python" -m pytest "$@"
