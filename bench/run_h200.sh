#!/usr/bin/env bash
# Device calls on the H200: PART... of
#   hostflow   bench/host_flow.py: an IDE assistant's flows against `ksearch serve` over stdio (TriMul, three
#              KernelBench-format searches in one database, the README walk-through), every call under a watchdog
#              -> $OUT/host-flow-h200.json, the servers' logs in $OUT/host-flow-logs/, their databases in
#              $OUT/host-flow-dbs.tgz
#   baselines  bench/baseline_repeat.py: eager and torch.compile baselines of 6 tasks, each in 3 fresh processes
#              -> $OUT/baseline-repeat-h200${KS_BASELINE_TAG}.json (KS_BASELINE_TASKS=a,b,...: a subset, for a
#              second call when one call's time does not hold all 18 processes; what did not fit is in `not_run`)
#   gputests   the gpu-marked tests of tests/sandbox tests/faults tests/adversarial tests/tasks, one pytest per file
#              (bench/h200_tests.sh) -> $OUT/gpu-tests/
# each under its own timeout (bench/h200_steps.sh: $OUT/<part>.log, a line per part in $OUT/steps.txt).
#
# Carry: .whl (the wheels; sourced below when ksearch's dependencies are missing), .ext/reference-kernels and
# .ext/K-Search (hostflow's TriMul flow: GPU MODE's problems/bioml/trimul and the published kernels in
# results/gpumode_trimul; without them that flow stops at once and says so, the others run).
#
# Usage on the H200 (repo root):
#   KSEARCH_COMMIT=<the commit sent> bash bench/run_h200.sh hostflow baselines gputests
# Timeouts: the parts asked for share KS_TOTAL_S (default 550 s) by weight (hostflow 2, baselines 2, gputests 3):
# hostflow alone has 550 s, all three 157 + 157 + 235 s. KS_HOSTFLOW_S, KS_BASELINES_S, KS_GPUTESTS_S set one.
# The whole gpu suite took about 350 s and the baselines of 6 tasks x 3 processes need more than 157 s: for complete
# results give each part a call of its own.
set -u
cd "$(dirname "$0")/.."
if ! python3 -c 'import ksearch, mcp, triton' 2>/dev/null && [ -f .whl/setup.sh ]; then
  # shellcheck disable=SC1091
  source .whl/setup.sh
fi
source bench/h200_steps.sh
export KSEARCH_COMMIT=${KSEARCH_COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}

[ $# -gt 0 ] || { echo "usage: bash bench/run_h200.sh hostflow|baselines|gputests ..." >&2; exit 2; }
declare -A weight=([hostflow]=2 [baselines]=2 [gputests]=3)
sum=0
for part in "$@"; do
  [ -n "${weight[$part]:-}" ] || { echo "unknown part $part (hostflow, baselines, gputests)" >&2; exit 2; }
  sum=$(( sum + weight[$part] ))
done
total=${KS_TOTAL_S:-550}
share() { echo $(( total * weight[$1] / sum )); }

{
  echo "commit: ${KSEARCH_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader
  python3 -c 'import platform, torch, triton; print("python", platform.python_version(), "torch", torch.__version__, "triton", triton.__version__)'
} >"$OUT/env.txt" 2>&1

for part in "$@"; do
  case $part in
    hostflow)
      secs=${KS_HOSTFLOW_S:-$(share hostflow)}
      work=$(mktemp -d /tmp/host-flow-XXXX)
      # no call starts past the budget; one running then is cut 20 s later (--grace-s), the servers shut down after
      step hostflow "$secs" python3 bench/host_flow.py --flows "${KS_FLOWS:-trimul,kb,quickstart}" \
        --budget-s $(( secs - 45 )) --grace-s 20 --out "$OUT/host-flow-h200.json" \
        --log-dir "$OUT/host-flow-logs" --work "$work"
      tar czf "$OUT/host-flow-dbs.tgz" -C "$work" --exclude logs . 2>/dev/null ;;
    baselines)
      secs=${KS_BASELINES_S:-$(share baselines)}
      step baselines "$secs" python3 bench/baseline_repeat.py --budget-s $(( secs - 30 )) --process-timeout-s 240 \
        ${KS_BASELINE_TASKS:+--tasks "$KS_BASELINE_TASKS"} --out "$OUT/baseline-repeat-h200${KS_BASELINE_TAG:-}.json" ;;
    gputests)
      secs=${KS_GPUTESTS_S:-$(share gputests)}
      # collected inside the part's timeout; the per-file runner gets what is left less 15 s for its summary
      step gputests "$secs" env KS_BUDGET_S=$(( secs - 15 )) bash -c '
        t0=$SECONDS
        files=$(python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider \
          tests/sandbox tests/faults tests/adversarial tests/tasks 2>/dev/null | grep "::" | cut -d: -f1 | sort -u)
        [ -n "$files" ] || { echo "no gpu-marked test collected"; exit 1; }
        KS_BUDGET_S=$(( KS_BUDGET_S - (SECONDS - t0) )) exec bash bench/h200_tests.sh $files' ;;
  esac
done
cat "$OUT/steps.txt"
