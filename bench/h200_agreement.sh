#!/usr/bin/env bash
# One device call for the side-by-sides: GPU MODE TriMul's launch-bound candidates with the task's eval.py run
# twice (its own spread between processes) and ksearch's gpumode timing between them; KernelBench's side by
# side; the export GPU tests. Each step under its own timeout; writes into $OUT.
# Usage on the H200 (repo root, .ext and .whl carried): source .whl/setup.sh && bash bench/h200_agreement.sh
set -u
source "$(dirname "$0")/h200_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$OUT/env.txt" 2>&1
G=.ext/K-Search/results/gpumode_trimul
step gpumode "${KS_GM_S:-290}" python3 bench/gpumode_side_by_side.py --no-reference --skip-probe --evaluator-again \
  --candidates $G/TTT.py $G/zeyushen.py $G/ksearch_best.py --budget-s $(( ${KS_GM_S:-290} - 10 )) \
  --out "$OUT/gpumode-trimul-h200.json"
step kernelbench "${KS_KB_S:-170}" python3 bench/kernelbench_side_by_side.py --skip-ksearch-protocol \
  --budget-s $(( ${KS_KB_S:-170} - 10 )) --out "$OUT/side-by-side-kernelbench-h200.json"
step export-gpu "${KS_EXPORT_S:-60}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=55 \
  tests/tasks/test_export_runs.py -k kernelbench
cat "$OUT/steps.txt"
