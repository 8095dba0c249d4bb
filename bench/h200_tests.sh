#!/usr/bin/env bash
# The gpu-marked tests on the H200, one pytest per file, so that a slow or hung file costs its own cap and every
# other file still reports: per file a log (-v, short tracebacks, stacks of a hung test from pytest-timeout) and a
# line in summary.txt; files left when the budget is spent are listed as not run. Writes into $OUT.
# Usage (repo root): source .whl/setup.sh && bash bench/h200_tests.sh [TEST_FILE ...]
#   KS_BUDGET_S (default 540): the whole run; KS_FILE_S (default 200): one file's cap; KS_TEST_S (default 150): one test's.
set -u
OUT=${OUT:-/tmp/ks-out}
mkdir -p "$OUT/gpu-tests"
budget=${KS_BUDGET_S:-540}
cap=${KS_FILE_S:-200}
per_test=${KS_TEST_S:-150}
start=$SECONDS  # the collection step counts against the budget too
if [ $# -gt 0 ]; then
  files=("$@")
else
  mapfile -t files < <(python3 -m pytest -m gpu --collect-only -q -p no:cacheprovider tests 2>/dev/null \
    | grep '::' | cut -d: -f1 | sort -u)
fi
summary="$OUT/gpu-tests/summary.txt"
: >"$summary"
for f in "${files[@]}"; do
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
