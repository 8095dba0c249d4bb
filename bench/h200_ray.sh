#!/usr/bin/env bash
# The suite's scaling on the H200 through Ray, in three device calls on a warm machine (each within its idle
# release of the last): the ray wheel (2.60, 79 MB) is larger than one call may carry (64 MiB with the tracked tree),
# so it travels in parts, joined in name order and checked against its digest there.
#
# Here, once (ignored folders; .whl carried without its fib/ subfolder, which this run does not need):
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
#       -d .lab/raydl "ray==2.60.0"
#   W=.lab/raydl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl; mkdir -p .lab/ray1 .lab/ray2b .lab/ray2
#   head -c 22000000 $W > .lab/ray1/ray.part1
#   tail -c +22000001 $W | head -c 50000000 > .lab/ray2b/ray.part2a; tail -c +72000001 $W > .lab/ray2/ray.part2b
#   sha256sum $W | cut -d' ' -f1 > .lab/ray2/ray.sha256; basename $W > .lab/ray2/ray.name
#   cp .lab/raydl/*.whl .lab/ray2/ && rm .lab/ray2/ray-2.60.0*.whl     # ray's own dependencies
# Call 1 (carry .whl .lab/ray1 .ext/kb):  source .whl/setup.sh && bash bench/h200_ray.sh part1
# Call 2 (carry .lab/ray2b):              mkdir -p /tmp/ray-parts && cp .lab/ray2b/ray.part2a /tmp/ray-parts/
# Call 3 (carry .lab/ray2 .ext/kb):       source .whl/setup.sh && bash bench/h200_ray.sh run
# `run` joins the parts, checks the digest, installs ray and its dependencies beside the others, then runs the same
# KernelBench suite on one local GPU slot and through a one-node Ray cluster's actor (bench/suite_scaling.py), each
# stopped at its budget as Ctrl-C stops it (KS_LOCAL_S, KS_RAY_S: the step's limit; the suite gets 70 s less), the
# local one after an uncounted warm-up of KS_WARM_S seconds (the machine's one-time setup: in the run of 2026-12-03
# the local suite, first, recorded no candidate in its 110 s; the Ray one after it, 9).
set -u
source "$(dirname "$0")/h200_steps.sh"
case "${1:-}" in
  part1)
    mkdir -p /tmp/ray-parts && cp .lab/ray1/ray.part1 /tmp/ray-parts/ && ls -la /tmp/ray-parts ;;
  run)
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
    ray stop --force >/dev/null 2>&1
    cat "$OUT/steps.txt" ;;
  *) echo "usage: bash bench/h200_ray.sh part1|run" >&2; exit 2 ;;
esac
