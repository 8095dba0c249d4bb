#!/usr/bin/env bash
# Set everything up and run the main job: a search on the built-in softmax task, then what it left behind:
# the intent tree, an HTML report, and how a language model takes over from the offline tuner.
#   bash scripts/quickstart.sh [TASK] [ksearch run options...]     (ROUNDS=N sets the round budget)
# Without ANTHROPIC_API_KEY the offline tuner drives it. With a GPU: 3 rounds, real timings. Without one,
# candidates run in the Triton interpreter on the task's small smoke workload (about a second per kernel call),
# a functional check and not a speed: a shorter run (2 rounds, at most 2 attempts per intent) shows the loop.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
KS="${KSEARCH_VENV:-.venv}/bin/ksearch"
name="quickstart-$(date +%Y%m%d-%H%M%S)"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  budget=(--rounds "${ROUNDS:-3}")
else
  budget=(--rounds "${ROUNDS:-2}" --max-attempts 2 --stagnation 1)
fi
"$KS" run "${1:-softmax}" --new --name "$name" "${budget[@]}" "${@:2}"
echo
"$KS" tree "$name"
mkdir -p .ksearch
"$KS" export "$name" --html -o ".ksearch/$name.html"
echo
echo "the page: .ksearch/$name.html (open it in a browser), or \`$KS ui\` for the live one with steering controls"
