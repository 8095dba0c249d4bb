#!/usr/bin/env bash
# The H200's device calls, one runner:  bash bench/run_h200.sh PART...   (bash bench/run_h200.sh --list: the parts)
#
# Each PART runs its steps in turn, each step under its own timeout, with its output in $OUT/<step>.log and a line
# "<step> rc=… Ns" in $OUT/steps.txt; $OUT/env.txt records the commit, the GPU and the versions. What each part's
# scripts measure and which committed result under bench/results/ they wrote: bench/README.md.
#
# Usage on the device machine (repo root; .whl carried, and what the part's line below says):
#   source .whl/setup.sh && KSEARCH_COMMIT=<the commit sent> bash bench/run_h200.sh PART...
# (.whl/setup.sh is sourced here too when ksearch's dependencies are missing.)
#
# Timeouts: a step's default is in its line below, and its KS_*_S variable sets it. hostflow, baselines and gputests
# share KS_TOTAL_S (default 550 s) by weight (2, 2, 3): hostflow alone has 550 s, all three 157 + 157 + 235 s;
# KS_HOSTFLOW_S, KS_BASELINES_S, KS_GPUTESTS_S set one. The whole gpu suite took about 350 s and the baselines of
# 6 tasks x 3 processes need more than 157 s: for complete results give each part a call of its own.
set -u
cd "$(dirname "$0")/.."

# name|what it runs (-> what it writes under $OUT); carry
PARTS=(
  "hostflow|bench/host_flow.py: an IDE assistant's flows against \`ksearch serve\` over stdio (TriMul, three
     KernelBench-format searches in one database, the README walk-through), every call under a watchdog
     -> host-flow-h200.json, the servers' logs in host-flow-logs/, their databases in host-flow-dbs.tgz
     (KS_FLOWS: the flows); carry .ext/reference-kernels .ext/K-Search (without them the TriMul flow stops at
     once and says so, the others run)"
  "cost|bench/candidate_cost.py: seconds per new candidate through the tools, every check on (softmax, rmsnorm in
     Triton and CUDA, a KernelBench file, TriMul; KS_COST_TASKS; KS_COST_N 20 each), a 4-candidate benchmark_batch
     against 4 one at a time, the per-candidate process rule off, KernelBench's eval_kernel_against_ref (KS_COST_S
     540 s) -> candidate-cost-h200.json; carry .ext/reference-kernels .ext/K-Search .ext/kb"
  "baselines|bench/baseline_repeat.py: eager and torch.compile baselines of 6 tasks, each in 3 fresh processes
     -> baseline-repeat-h200\${KS_BASELINE_TAG}.json (KS_BASELINE_TASKS=a,b,...: a subset, for a second call when
     one call's time does not hold all 18 processes; what did not fit is in \`not_run\`)"
  "model|bench/model_h200.py: \`ksearch model\`'s whole-model flow on bench/models/llama_layer.py in bf16: rank its
     operators, write the top KS_MODEL_TOP (3) as tasks, search them as a suite with the tuner policy (KS_MODEL_ROUNDS
     1 round; on an H100 a task took about 120 s at 2 rounds, so 5 tasks at 2 rounds do not fit one call),
     plug the winners back and time the model eager, plugged and torch.compile'd (KS_MODEL_S 420 s)
     -> model-h200.json, the task files, plugged model, database and logs in model-work/"
  "gputests|the gpu-marked tests, one pytest per file, each under a cap (KS_FILE_S 200 s a file, KS_TEST_S 150 s a
     test), files left when the time is spent listed as not run -> gpu-tests/ (a log per file, summary.txt);
     collected from KS_TEST_DIRS (default tests/sandbox tests/faults tests/adversarial tests/tasks; \`tests\` for
     all), or the files KS_TEST_FILES names"
  "sandbox|the gpu-marked tests in one pytest (KS_PYTEST_S 330 s; KS_PYTEST_EXTRA: more arguments), the integrity
     suite (bench/integrity.py, KS_INTEGRITY_S 150 s) -> integrity-h200.json, the sandbox figures
     (bench/sandbox.py --parts \${KS_PARTS:-setup,ncu,e2e}, KS_SANDBOX_S 150 s) -> sandbox-h200-part.json;
     env.txt adds the kernel, its LSM and whether the jail is available"
  "agreement|GPU MODE TriMul's launch-bound published kernels with the task's eval.py run twice and ksearch's
     gpumode timing between (bench/gpumode_side_by_side.py --evaluator-again, KS_GM_S 290 s)
     -> gpumode-trimul-h200.json; KernelBench's side by side (KS_KB_S 170 s) -> side-by-side-kernelbench-h200.json;
     the KernelBench export GPU tests (KS_EXPORT_S 60 s); carry .ext/K-Search .ext/reference-kernels .ext/kb"
  "ecosystems|FlashInfer-Bench's side by side (KS_FIB_S 200 s) -> side-by-side-flashinfer-h200.json; a TriMul
     search's best exported as submission.py and run by the folder's eval.py (KS_TRIMUL_S 200 s)
     -> trimul-export-h200.json; the export GPU tests (KS_EXPORT_S 60 s); a KernelBench suite on one GPU
     (KS_SUITE_S 120 s) -> suite-scaling-h200.json; carry .ext .whl/fib; .ext/trimul-one holds one published
     TriMul kernel (cp .ext/K-Search/results/gpumode_trimul/zeyushen.py; KS_TRIMUL_CANDIDATES: another folder)"
  "final|a TriMul search of one round on .ext/trimul-one and its final evaluation (KS_TRIMUL_S 300 s)
     -> trimul-search-h200.json; KernelBench's side by side on MinGPTNewGelu (KS_KB_S 60 s)
     -> side-by-side-kernelbench-gelu-h200.json; the KernelBench export GPU test (KS_EXPORT_S 40 s); carry .ext"
  "protocols|a TriMul search through the tools with the final evaluation of its best 3 (KS_TRIMUL_S 340 s)
     -> trimul-search-h200.json; the export GPU tests (KS_EXPORT_S 75 s); carry .ext/reference-kernels
     .ext/K-Search"
  "trimul-search|a TriMul search of one round per published kernel and the final evaluation of its best 3
     (KS_TRIMUL_S 570 s; KS_TRIMUL_CANDIDATES: another folder) -> trimul-search-h200.json; carry
     .ext/reference-kernels .ext/K-Search"
  "inputs|the GPU tests of fills made on the GPU (KS_FILLS_S 150 s); bench/kb_final_gap.py, a KernelBench final
     evaluation's slower reading (KS_GAP_S 150 s) -> kb-final-gap-h200.json; carry .ext/kb"
  "inputs-timing|the GPU tests of fills, KernelBench timing and spare workers (KS_TESTS_S 200 s);
     bench/kb_final_gap.py --rounds 3 (KS_GAP_S 120 s) -> kb-final-gap-h200.json; carry .ext/kb"
  "gpumode-processes|GPU MODE's eval.py and ksearch side by side on TTT and zeyushen, the pair in KS_PROCESSES (4)
     new processes each (KS_PROC_S 480 s) -> gpumode-trimul-h200-processes.json; carry .ext/reference-kernels
     .ext/trimul-four (TTT.py and zeyushen.py)"
  "ray-part1|the first part of the ray wheel into /tmp/ray-parts (see \`ray\`); carry .whl .lab/ray1 .ext/kb"
  "ray-part2|the second part's first half into /tmp/ray-parts; carry .lab/ray2b"
  "ray|joins the ray wheel's parts, checks its digest, installs it beside the others, then the same KernelBench
     suite on one local GPU slot (KS_LOCAL_S 200 s, after an uncounted warm-up of KS_WARM_S s)
     -> suite-scaling-h200.json and through a one-node Ray cluster's actor (KS_RAY_S 240 s)
     -> suite-scaling-h200-ray.json; carry .lab/ray2 .ext/kb"
  "live-round|one round of a host that works in rounds: its scripts played against \`ksearch serve --http\` over
     the databases in KS_LIVE_DIR (bench/live_host/batch.py, the jobs of KS_LIVE_MANIFEST; KS_ROUND_S 330 s),
     KS_LIVE_DIR bundled into live.tgz; with KS_LIVE_OWNERS=1 the round's exported kernels run by their owners'
     evaluators beside ksearch (KS_SBS_S 100 s each) -> side-by-side-{gpumode,kernelbench}-h200-search.json;
     carry .ext/reference-kernels .ext/kb and KS_LIVE_DIR"
)
# The ray wheel (2.60, 79 MB) is larger than one call may carry (64 MiB with the tracked tree), so it travels in
# parts over three calls on a warm machine (each within its idle release of the last), joined there in name order.
# Here, once (ignored folders; .whl carried without its fib/ subfolder, which these calls do not need):
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
#       -d .lab/raydl "ray==2.60.0"
#   W=.lab/raydl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl; mkdir -p .lab/ray1 .lab/ray2b .lab/ray2
#   head -c 22000000 $W > .lab/ray1/ray.part1
#   tail -c +22000001 $W | head -c 50000000 > .lab/ray2b/ray.part2a; tail -c +72000001 $W > .lab/ray2/ray.part2b
#   sha256sum $W | cut -d' ' -f1 > .lab/ray2/ray.sha256; basename $W > .lab/ray2/ray.name
#   cp .lab/raydl/*.whl .lab/ray2/ && rm .lab/ray2/ray-2.60.0*.whl     # ray's own dependencies
# then the calls `ray-part1`, `ray-part2`, `ray`. Each suite stops at its budget as Ctrl-C stops it (the suite gets
# 70 s less than its step). In the run of 2026-12-03 the local suite, first, recorded no candidate in its 110 s (the
# machine's one-time setup; hence KS_WARM_S), the Ray one after it, 9.

names=()
for p in "${PARTS[@]}"; do names+=("${p%%|*}"); done
usage() { echo "usage: bash bench/run_h200.sh PART... (${names[*]}); --list says what each runs" >&2; exit 2; }
if [ "${1:-}" = --list ]; then
  for p in "${PARTS[@]}"; do printf '%-18s %s\n' "${p%%|*}" "$(echo "${p#*|}" | tr -s ' \n' ' ')"; done
  exit 0
fi
[ $# -gt 0 ] || usage
for part in "$@"; do
  [[ " ${names[*]} " == *" $part "* ]] || { echo "unknown part $part" >&2; usage; }
done

if ! python3 -c 'import ksearch, mcp, triton' 2>/dev/null && [ -f .whl/setup.sh ]; then
  # shellcheck disable=SC1091
  source .whl/setup.sh
fi
export KSEARCH_COMMIT=${KSEARCH_COMMIT:-$(git rev-parse HEAD 2>/dev/null || true)}
export OUT=${OUT:-/tmp/ks-out}
mkdir -p "$OUT"

step() {  # step NAME SECONDS CMD...: CMD under its own timeout, its output in $OUT/NAME.log, a line in steps.txt
  local name=$1 secs=$2; shift 2
  local t0=$SECONDS
  timeout -k 10 "$secs" "$@" >"$OUT/$name.log" 2>&1
  echo "$name rc=$? $(( SECONDS - t0 ))s" >>"$OUT/steps.txt"
}

gpu_test_files() {  # FILE...: one pytest per file, so that a slow or hung file costs its own cap and every other
  # file still reports: per file a log (-v, short tracebacks, stacks of a hung test from pytest-timeout) and a line in
  # summary.txt; files left when KS_BUDGET_S is spent are listed as not run
  mkdir -p "$OUT/gpu-tests"
  local budget=${KS_BUDGET_S:-540} cap=${KS_FILE_S:-200} per_test=${KS_TEST_S:-150} start=$SECONDS
  local summary="$OUT/gpu-tests/summary.txt" f left secs log t0 rc tally
  : >"$summary"
  for f in "$@"; do
    left=$(( budget - (SECONDS - start) ))
    if [ "$left" -lt 30 ]; then
      echo "$f: not run (budget spent)" >>"$summary"
      continue
    fi
    secs=$(( left < cap ? left : cap ))  # a file never runs past the budget
    log="$OUT/gpu-tests/$(echo "$f" | tr '/' '_' ).log"
    t0=$SECONDS
    # SIGINT first, so pytest prints its summary; SIGKILL 15 s later if it does not stop
    timeout -s INT -k 15 "$secs" python3 -m pytest -m gpu -v -rA --tb=short -p no:cacheprovider \
      -o timeout="$per_test" -o timeout_method=thread --durations=0 "$f" >"$log" 2>&1
    rc=$?
    tally=$(grep -E '^=+ .*(passed|failed|skipped|error).* =+$' "$log" | tail -1 | tr -d '=')
    echo "$f: rc=$rc $(( SECONDS - t0 ))s ${tally:-no summary line (cap ${secs}s)}" >>"$summary"
  done
  cat "$summary"
}
export -f gpu_test_files

declare -A weight=([hostflow]=2 [baselines]=2 [gputests]=3)
sum=0
for part in "$@"; do sum=$(( sum + ${weight[$part]:-0} )); done
total=${KS_TOTAL_S:-550}
share() { echo $(( total * weight[$1] / sum )); }

{
  echo "commit: ${KSEARCH_COMMIT:-unknown}"
  nvidia-smi --query-gpu=name,uuid,driver_version,clocks.sm,clocks.max.sm,temperature.gpu,power.draw \
    --format=csv,noheader
  python3 -c 'import platform, torch, triton; print("python", platform.python_version(), "torch", torch.__version__, "triton", triton.__version__)'
  uname -r
} >"$OUT/env.txt" 2>&1

export_gpu_tests() {  # NAME SECONDS [PYTEST ARGS...]: the GPU tests of exported kernels run by their ecosystems
  local name=$1 secs=$2; shift 2
  step "$name" "$secs" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=$(( secs - 5 )) \
    tests/tasks/test_export_runs.py "$@"
}
KB_GAP=(python3 bench/kb_final_gap.py --problem .ext/kb/KernelBench/level1/40_LayerNorm.py
  --kernel bench/results/live-host-h200/export-level1_40_LayerNorm.py.txt --out "$OUT/kb-final-gap-h200.json")

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
    cost)
      step cost "${KS_COST_S:-540}" python3 bench/candidate_cost.py --tasks "${KS_COST_TASKS:-softmax,rmsnorm,kb,trimul}" \
        --n "${KS_COST_N:-20}" --out "$OUT/candidate-cost-h200.json" ;;
    baselines)
      secs=${KS_BASELINES_S:-$(share baselines)}
      step baselines "$secs" python3 bench/baseline_repeat.py --budget-s $(( secs - 30 )) --process-timeout-s 240 \
        ${KS_BASELINE_TASKS:+--tasks "$KS_BASELINE_TASKS"} --out "$OUT/baseline-repeat-h200${KS_BASELINE_TAG:-}.json" ;;
    model)
      # the script keeps its steps inside --deadline; the step's timeout is 30 s beyond it
      step model "$(( ${KS_MODEL_S:-420} + 30 ))" python3 bench/model_h200.py --rounds "${KS_MODEL_ROUNDS:-1}" \
        --top "${KS_MODEL_TOP:-3}" --deadline "${KS_MODEL_S:-420}" --work "$OUT/model-work" --out "$OUT/model-h200.json" ;;
    gputests)
      secs=${KS_GPUTESTS_S:-$(share gputests)}
      # collected inside the part's timeout; the per-file runner gets what is left less 15 s for its summary
      step gputests "$secs" env KS_BUDGET_S=$(( secs - 15 )) \
        KS_TEST_DIRS="${KS_TEST_DIRS:-tests/sandbox tests/faults tests/adversarial tests/tasks}" bash -c '
        t0=$SECONDS
        files=${KS_TEST_FILES:-$(python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider $KS_TEST_DIRS \
          2>/dev/null | grep "::" | cut -d: -f1 | sort -u)}
        [ -n "$files" ] || { echo "no gpu-marked test collected"; exit 1; }
        KS_BUDGET_S=$(( KS_BUDGET_S - (SECONDS - t0) )) gpu_test_files $files' ;;
    sandbox)
      {
        echo "lsm: $(cat /sys/kernel/security/lsm 2>/dev/null)"
        echo "jail: $(python3 -c 'from ksearch.gpu.jail import launch; print(launch.unavailable_reason() or "available")' 2>&1)"
        python3 -m ksearch.gpu.jail.launch -- nvidia-smi -L 2>&1 | head -3
      } >>"$OUT/env.txt" 2>&1
      step pytest-gpu "${KS_PYTEST_S:-330}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=150 \
        -o timeout_method=thread tests/sandbox tests/faults tests/adversarial tests/tasks ${KS_PYTEST_EXTRA:-}
      step integrity "${KS_INTEGRITY_S:-150}" python3 bench/integrity.py --out "$OUT/integrity-h200.json"
      step sandbox "${KS_SANDBOX_S:-150}" python3 bench/sandbox.py --out "$OUT/sandbox-h200-part.json" \
        --parts "${KS_PARTS:-setup,ncu,e2e}" --budget-s $(( ${KS_SANDBOX_S:-150} - 20 )) ;;
    agreement)
      G=.ext/K-Search/results/gpumode_trimul
      step gpumode "${KS_GM_S:-290}" python3 bench/gpumode_side_by_side.py --no-reference --skip-probe \
        --evaluator-again --candidates $G/TTT.py $G/zeyushen.py $G/ksearch_best.py \
        --budget-s $(( ${KS_GM_S:-290} - 10 )) --out "$OUT/gpumode-trimul-h200.json"
      step kernelbench "${KS_KB_S:-170}" python3 bench/kernelbench_side_by_side.py --skip-ksearch-protocol \
        --budget-s $(( ${KS_KB_S:-170} - 10 )) --out "$OUT/side-by-side-kernelbench-h200.json"
      export_gpu_tests export-gpu "${KS_EXPORT_S:-60}" -k kernelbench ;;
    ecosystems)
      step flashinfer "${KS_FIB_S:-200}" python3 bench/flashinfer_side_by_side.py \
        --budget-s $(( ${KS_FIB_S:-200} - 15 )) --out "$OUT/side-by-side-flashinfer-h200.json"
      step trimul-export "${KS_TRIMUL_S:-200}" python3 bench/trimul_search.py --skip-profile --top-k 0 --export-eval \
        --candidates "${KS_TRIMUL_CANDIDATES:-.ext/trimul-one}" --budget-s $(( ${KS_TRIMUL_S:-200} - 10 )) \
        --out "$OUT/trimul-export-h200.json"
      export_gpu_tests export-gpu "${KS_EXPORT_S:-60}"
      step suite-1gpu "${KS_SUITE_S:-120}" python3 bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 \
        --slots 1 --budget-s $(( ${KS_SUITE_S:-120} - 70 )) --out "$OUT/suite-scaling-h200.json" ;;
    final)
      step trimul-search "${KS_TRIMUL_S:-300}" python3 bench/trimul_search.py --skip-profile --top-k 1 \
        --candidates "${KS_TRIMUL_CANDIDATES:-.ext/trimul-one}" --budget-s $(( ${KS_TRIMUL_S:-300} - 10 )) \
        --out "$OUT/trimul-search-h200.json"
      step kernelbench "${KS_KB_S:-60}" python3 bench/kernelbench_side_by_side.py --skip-ksearch-protocol \
        --no-reference --problems level1/88_MinGPTNewGelu --budget-s $(( ${KS_KB_S:-60} - 5 )) \
        --out "$OUT/side-by-side-kernelbench-gelu-h200.json"
      export_gpu_tests export-gpu "${KS_EXPORT_S:-40}" -k kernelbench ;;
    protocols)
      step trimul-search "${KS_TRIMUL_S:-340}" python3 bench/trimul_search.py --skip-profile --top-k 3 \
        --budget-s $(( ${KS_TRIMUL_S:-340} - 15 )) --out "$OUT/trimul-search-h200.json"
      export_gpu_tests export-gpu "${KS_EXPORT_S:-75}" ;;
    trimul-search)
      step trimul-search "${KS_TRIMUL_S:-570}" python3 bench/trimul_search.py --skip-profile --top-k 3 \
        --candidates "${KS_TRIMUL_CANDIDATES:-.ext/K-Search/results/gpumode_trimul}" \
        --budget-s $(( ${KS_TRIMUL_S:-570} - 15 )) --out "$OUT/trimul-search-h200.json" ;;
    inputs)
      step fills-gpu "${KS_FILLS_S:-150}" python3 -m pytest -m gpu -q -rA -s -p no:cacheprovider -o timeout=120 \
        tests/tasks/test_gpu_fills.py
      step kb-final-gap "${KS_GAP_S:-150}" "${KB_GAP[@]}" ;;
    inputs-timing)
      step gpu-tests "${KS_TESTS_S:-200}" python3 -m pytest -q -rA -s -p no:cacheprovider -o timeout=150 \
        tests/tasks/test_gpu_fills.py tests/sandbox/test_kernelbench_timing.py tests/sandbox/test_spare_worker.py
      step kb-final-gap "${KS_GAP_S:-120}" "${KB_GAP[@]}" --rounds 3 ;;
    gpumode-processes)
      step gpumode-processes "${KS_PROC_S:-480}" python3 bench/gpumode_side_by_side.py --no-reference --skip-probe \
        --candidates .ext/trimul-four/TTT.py .ext/trimul-four/zeyushen.py --processes "${KS_PROCESSES:-4}" \
        --budget-s $(( ${KS_PROC_S:-480} - 20 )) --out "$OUT/gpumode-trimul-h200-processes.json" ;;
    ray-part1)
      mkdir -p /tmp/ray-parts && cp .lab/ray1/ray.part1 /tmp/ray-parts/ && ls -la /tmp/ray-parts ;;
    ray-part2)
      mkdir -p /tmp/ray-parts && cp .lab/ray2b/ray.part2a /tmp/ray-parts/ && ls -la /tmp/ray-parts ;;
    ray)
      name=$(cat .lab/ray2/ray.name)
      cat /tmp/ray-parts/ray.part* .lab/ray2/ray.part* > "/tmp/ray-parts/$name"  # parts in name order
      got=$(sha256sum "/tmp/ray-parts/$name" | cut -d' ' -f1)
      [ "$got" = "$(cat .lab/ray2/ray.sha256)" ] || { echo "ray wheel digest mismatch: $got" >&2; exit 3; }
      shopt -s nullglob; deps=(.lab/ray2/*.whl); shopt -u nullglob  # ray's dependencies where .whl lacks them
      python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "/tmp/ray-parts/$name" \
        "${deps[@]}" 2>&1 | grep -v "^WARNING: Target directory" || true
      python3 -c "import ray; print('ray', ray.__version__)"
      step suite-local "$(( ${KS_LOCAL_S:-200} + ${KS_WARM_S:-0} ))" python3 bench/suite_scaling.py \
        --kb-level1 .ext/kb/KernelBench/level1 --slots 1 --budget-s $(( ${KS_LOCAL_S:-200} - 70 )) \
        --warm-up-s "${KS_WARM_S:-0}" --out "$OUT/suite-scaling-h200.json"
      ray() { python3 -c 'import sys; from ray.scripts.scripts import main; sys.argv[0] = "ray"; main()' "$@"; }  # no console script in --target
      ray start --head --num-gpus=1 --num-cpus=8 --disable-usage-stats >"$OUT/ray-start.log" 2>&1
      step suite-ray "${KS_RAY_S:-240}" python3 bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 \
        --slots 1 --ray auto --budget-s $(( ${KS_RAY_S:-240} - 70 )) --out "$OUT/suite-scaling-h200-ray.json"
      ray stop --force >/dev/null 2>&1 ;;
    live-round)
      dir=${KS_LIVE_DIR:?KS_LIVE_DIR: the folder of the round} manifest=${KS_LIVE_MANIFEST:?KS_LIVE_MANIFEST: its jobs}
      step round "${KS_ROUND_S:-330}" python3 bench/live_host/batch.py --manifest "$manifest"
      tar czf "$OUT/live.tgz" "$dir"  # now too: a call cut off later still brings the round back
      if [ -n "${KS_LIVE_OWNERS:-}" ]; then
        # DIR/export/submission.py: a GPU MODE submission for $KS_GM_TASK; DIR/export/<level>_<stem>.py: ModelNew files
        if [ -f "$dir/export/submission.py" ]; then
          step owners-gpumode "${KS_SBS_S:-100}" python3 bench/gpumode_side_by_side.py \
            --task "${KS_GM_TASK:-.ext/reference-kernels/problems/pmpp_v2/histogram_py}" \
            --candidates "$dir/export/submission.py" --no-reference --skip-probe \
            --budget-s $(( ${KS_SBS_S:-100} - 10 )) --out "$OUT/side-by-side-gpumode-h200-search.json"
        fi
        problems=$(cd "$dir/export" 2>/dev/null && ls level*_*.py 2>/dev/null | sed -E 's/^(level[0-9]+)_(.*)\.py$/\1\/\2/')
        if [ -n "$problems" ]; then
          # shellcheck disable=SC2086
          step owners-kernelbench "${KS_SBS_S:-100}" python3 bench/kernelbench_side_by_side.py --problems $problems \
            --candidates "$dir/export" --no-reference --skip-ksearch-protocol --budget-s $(( ${KS_SBS_S:-100} - 10 )) \
            --out "$OUT/side-by-side-kernelbench-h200-search.json"
        fi
      fi
      tar czf "$OUT/live.tgz" "$dir" ;;
  esac
done
cat "$OUT/steps.txt" 2>/dev/null
