#!/usr/bin/env bash
# One device call for the owners' protocols: where a jailed worker's host time goes (bench/host_overhead.py), a
# TriMul search through the tools with its final evaluation (bench/trimul_search.py), and the GPU tests of
# exported kernels run by their ecosystems' own evaluators. Each step under its own timeout; writes into $OUT.
# Usage on the H200 (repo root, .ext and .whl carried): source .whl/setup.sh && bash bench/h200_protocols.sh
set -u
source "$(dirname "$0")/h200_steps.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader >"$OUT/env.txt" 2>&1
step host-overhead "${KS_HOST_S:-170}" python3 bench/host_overhead.py --out "$OUT/host-overhead-h200.json"
step trimul-search "${KS_TRIMUL_S:-340}" python3 bench/trimul_search.py --skip-profile --top-k 3 \
  --budget-s $(( ${KS_TRIMUL_S:-340} - 15 )) --out "$OUT/trimul-search-h200.json"
step export-gpu "${KS_EXPORT_S:-75}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=70 \
  tests/tasks/test_export_runs.py
cat "$OUT/steps.txt"
