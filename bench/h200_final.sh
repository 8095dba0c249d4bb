#!/usr/bin/env bash
# One device call: a TriMul search of one round (the published zeyushen kernel) and its final evaluation, with
# per-call seconds; KernelBench's side by side once more on MinGPTNewGelu (a second process of each side, for
# their spread between processes); the KernelBench export GPU test. Writes into $OUT.
# Usage on the H200 (repo root, .ext and .whl carried): source .whl/setup.sh && bash bench/h200_final.sh
set -u
source "$(dirname "$0")/h200_steps.sh"
step trimul-search "${KS_TRIMUL_S:-300}" python3 bench/trimul_search.py --skip-profile --top-k 1 \
  --candidates "${KS_TRIMUL_CANDIDATES:-.ext/trimul-one}" --budget-s $(( ${KS_TRIMUL_S:-300} - 10 )) \
  --out "$OUT/trimul-search-h200.json"
step kernelbench "${KS_KB_S:-60}" python3 bench/kernelbench_side_by_side.py --skip-ksearch-protocol --no-reference \
  --problems level1/88_MinGPTNewGelu --budget-s $(( ${KS_KB_S:-60} - 5 )) --out "$OUT/side-by-side-kernelbench-gelu-h200.json"
step export-gpu "${KS_EXPORT_S:-40}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=35 \
  tests/tasks/test_export_runs.py -k kernelbench
cat "$OUT/steps.txt"
