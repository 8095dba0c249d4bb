#!/usr/bin/env bash
# One device call for what the owners' ecosystems run of ksearch's output: FlashInfer-Bench's side by side (our
# kernels as ksearch exports them, run by FlashInfer-Bench's own benchmark; both timers), a TriMul search's best
# exported as submission.py and run by the folder's eval.py, the export GPU tests, and a KernelBench suite on one
# GPU (candidates per minute). Each step under its own timeout; writes into $OUT.
# .ext/trimul-one: a folder holding one published TriMul kernel (cp .ext/K-Search/results/gpumode_trimul/zeyushen.py).
# Usage on the H200 (repo root, .ext and .whl carried, .whl/fib holding FlashInfer-Bench's wheels):
#   source .whl/setup.sh && bash bench/h200_ecosystems.sh
set -u
source "$(dirname "$0")/h200_steps.sh"
step flashinfer "${KS_FIB_S:-200}" python3 bench/flashinfer_side_by_side.py --budget-s $(( ${KS_FIB_S:-200} - 15 )) \
  --out "$OUT/side-by-side-flashinfer-h200.json"
step trimul-export "${KS_TRIMUL_S:-200}" python3 bench/trimul_search.py --skip-profile --top-k 0 --export-eval \
  --candidates "${KS_TRIMUL_CANDIDATES:-.ext/trimul-one}" --budget-s $(( ${KS_TRIMUL_S:-200} - 10 )) \
  --out "$OUT/trimul-export-h200.json"
step export-gpu "${KS_EXPORT_S:-60}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=55 \
  tests/tasks/test_export_runs.py
step suite-1gpu "${KS_SUITE_S:-120}" python3 bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 \
  --slots 1 --budget-s $(( ${KS_SUITE_S:-120} - 70 )) --out "$OUT/suite-scaling-h200.json"
cat "$OUT/steps.txt"
