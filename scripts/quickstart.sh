#!/usr/bin/env bash
# Set everything up and run the main job: a search on the built-in softmax task.
# Without ANTHROPIC_API_KEY the offline tuner drives it; without a GPU, candidates run in the Triton
# interpreter on the smoke workload (functional, not a speed measurement — the output says so).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec "${KSEARCH_VENV:-.venv}/bin/ksearch" run "${1:-softmax}" --rounds "${ROUNDS:-3}" "${@:2}"
