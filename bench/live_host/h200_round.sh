#!/usr/bin/env bash
# One device call for one round of a host that works in rounds: its scripts played against `ksearch serve --http`
# over the search databases in DIR (bench/live_host/batch.py, jobs in MANIFEST), then, with --owners, the round's
# exported kernels run by their owners' own evaluators beside ksearch (the side-by-side scripts), and DIR bundled
# into $OUT/live.tgz (one file: a device call returns a limited number of files, and DIR holds many).
# Usage on the H200 (repo root; carry .whl, .ext/reference-kernels, .ext/kb and DIR):
#   source .whl/setup.sh && bash bench/live_host/h200_round.sh .lab/live2 .lab/live2/r2.json --owners
# --owners reads DIR/export/submission.py (a GPU MODE submission for $KS_GM_TASK) and DIR/export/<level>_<stem>.py
# (KernelBench ModelNew files); results in $OUT/side-by-side-{gpumode,kernelbench}-h200-search.json.
set -u
source "$(dirname "$0")/../h200_steps.sh"
dir=$1 manifest=$2
step round "${KS_ROUND_S:-330}" python3 bench/live_host/batch.py --manifest "$manifest"
tar czf "$OUT/live.tgz" "$dir"  # now too: a call cut off later still brings the round back
if [ "${3:-}" = "--owners" ]; then
  if [ -f "$dir/export/submission.py" ]; then
    step owners-gpumode "${KS_SBS_S:-100}" python3 bench/gpumode_side_by_side.py \
      --task "${KS_GM_TASK:-.ext/reference-kernels/problems/pmpp_v2/histogram_py}" \
      --candidates "$dir/export/submission.py" --no-reference --skip-probe --budget-s $(( ${KS_SBS_S:-100} - 10 )) \
      --out "$OUT/side-by-side-gpumode-h200-search.json"
  fi
  problems=$(cd "$dir/export" 2>/dev/null && ls level*_*.py 2>/dev/null | sed -E 's/^(level[0-9]+)_(.*)\.py$/\1\/\2/')
  if [ -n "$problems" ]; then
    step owners-kernelbench "${KS_SBS_S:-100}" python3 bench/kernelbench_side_by_side.py --problems $problems \
      --candidates "$dir/export" --no-reference --skip-ksearch-protocol --budget-s $(( ${KS_SBS_S:-100} - 10 )) \
      --out "$OUT/side-by-side-kernelbench-h200-search.json"
  fi
fi
tar czf "$OUT/live.tgz" "$dir"
cat "$OUT/steps.txt"
