#!/usr/bin/env bash
# Device calls for inputs and final evaluations on the H200. Writes into $OUT.
#   checks: the GPU tests of fills made on the GPU (gpu/tasks/draws/gpu_fills.py), and bench/kb_final_gap.py (a
#           KernelBench final evaluation's slower reading: the same kernel with and without work between the calls);
#           carry .ext/kb
#   trimul: a TriMul search of one round per published kernel and the final evaluation of its best 3, with per-call
#           seconds (bench/trimul_search.py); carry .ext/reference-kernels .ext/K-Search
#   probes: the GPU tests of fills, KernelBench timing and spare workers, bench/kb_final_gap.py, and
#           bench/host_pinning.py (the host's pace in processes pinned to one core); carry .ext/kb
#   processes: GPU MODE's eval.py and ksearch side by side on TTT and zeyushen, the pair in 4 new processes each
#           (bench/gpumode_side_by_side.py --processes); carry .ext/reference-kernels .ext/trimul-four
#   draws:  bench/kb_final_gap.py again and bench/trimul_draws.py (where a final evaluation's seconds per TriMul call
#           go); carry .ext/kb .ext/reference-kernels
# Usage (repo root, .whl carried): source .whl/setup.sh && bash bench/h200_inputs.sh checks|probes|trimul|processes|draws
set -u
source "$(dirname "$0")/h200_steps.sh"
case "${1:-}" in
  checks)
    step fills-gpu "${KS_FILLS_S:-150}" python3 -m pytest -m gpu -q -rA -s -p no:cacheprovider -o timeout=120 \
      tests/tasks/test_gpu_fills.py
    step kb-final-gap "${KS_GAP_S:-150}" python3 bench/kb_final_gap.py \
      --problem .ext/kb/KernelBench/level1/40_LayerNorm.py \
      --kernel bench/results/live-host-h200/export-level1_40_LayerNorm.py --out "$OUT/kb-final-gap-h200.json" ;;
  trimul)
    step trimul-search "${KS_TRIMUL_S:-570}" python3 bench/trimul_search.py --skip-profile --top-k 3 \
      --candidates "${KS_TRIMUL_CANDIDATES:-.ext/K-Search/results/gpumode_trimul}" --budget-s $(( ${KS_TRIMUL_S:-570} - 15 )) --out "$OUT/trimul-search-h200.json" ;;
  probes)
    step gpu-tests "${KS_TESTS_S:-200}" python3 -m pytest -q -rA -s -p no:cacheprovider -o timeout=150 \
      tests/tasks/test_gpu_fills.py tests/sandbox/test_kernelbench_timing.py tests/sandbox/test_spare_worker.py
    step kb-final-gap "${KS_GAP_S:-120}" python3 bench/kb_final_gap.py --rounds 3 \
      --problem .ext/kb/KernelBench/level1/40_LayerNorm.py \
      --kernel bench/results/live-host-h200/export-level1_40_LayerNorm.py --out "$OUT/kb-final-gap-h200.json"
    step host-pinning "${KS_PIN_S:-150}" python3 bench/host_pinning.py --repeats 4 --out "$OUT/host-pinning-h200.json" ;;
  processes)
    step gpumode-processes "${KS_PROC_S:-480}" python3 bench/gpumode_side_by_side.py --no-reference --skip-probe \
      --candidates .ext/trimul-four/TTT.py .ext/trimul-four/zeyushen.py --processes "${KS_PROCESSES:-4}" \
      --budget-s $(( ${KS_PROC_S:-480} - 20 )) --out "$OUT/gpumode-trimul-h200-processes.json" ;;
  draws)
    step kb-final-gap "${KS_GAP_S:-40}" python3 bench/kb_final_gap.py \
      --problem .ext/kb/KernelBench/level1/40_LayerNorm.py \
      --kernel bench/results/live-host-h200/export-level1_40_LayerNorm.py --out "$OUT/kb-final-gap-h200.json"
    step trimul-draws "${KS_DRAWS_S:-60}" python3 bench/trimul_draws.py --out "$OUT/trimul-draws-h200.json" ;;
  *) echo "usage: bash bench/h200_inputs.sh checks|probes|trimul|processes|draws" >&2; exit 2 ;;
esac
cat "$OUT/steps.txt"
