#!/usr/bin/env bash
# One device call: the gpu-marked tests, the integrity suite and the ncu/extension parts of the
# sandbox bench, each under its own timeout so one hang cannot eat the call. Writes into $OUT.
# Usage on the H200 (repo root): source .whl/setup.sh && bash bench/h200_run.sh
set -u
source "$(dirname "$0")/h200_steps.sh"
{
  echo "tree: the working tree sent with this call (see the commit that added these results)"
  nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader
  uname -r
  echo "lsm: $(cat /sys/kernel/security/lsm 2>/dev/null)"
  echo "jail: $(python3 -c 'from ksearch.gpu.jail import launch; print(launch.unavailable_reason() or "available")' 2>&1)"
  python3 -m ksearch.gpu.jail.launch -- nvidia-smi -L 2>&1 | head -3
} >"$OUT/env.txt" 2>&1
step pytest-gpu "${KS_PYTEST_S:-330}" python3 -m pytest -m gpu -q -rA -p no:cacheprovider -o timeout=150 -o timeout_method=thread \
  tests/sandbox tests/faults tests/adversarial tests/tasks ${KS_PYTEST_EXTRA:-}
step integrity "${KS_INTEGRITY_S:-150}" python3 bench/integrity.py --out "$OUT/integrity-h200.json"
step sandbox "${KS_SANDBOX_S:-150}" python3 bench/sandbox.py --out "$OUT/sandbox-h200-part.json" \
  --parts "${KS_PARTS:-setup,ncu,e2e}" --budget-s $(( ${KS_SANDBOX_S:-150} - 20 ))
cat "$OUT/steps.txt"
