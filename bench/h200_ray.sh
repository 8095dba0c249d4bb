#!/usr/bin/env bash
# The suite's scaling on the H200 through Ray, in two device calls on a warm machine: the ray wheel (2.60, 79 MB)
# is larger than one call may carry (64 MiB), so it travels in two parts, joined and checked there.
#
# Here, once (ignored folders):
#   pip download --only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64 \
#       -d .lab/raydl "ray==2.60.0"
#   W=.lab/raydl/ray-2.60.0-cp312-cp312-manylinux2014_x86_64.whl
#   mkdir -p .lab/ray1 .lab/ray2; head -c 22000000 $W > .lab/ray1/ray.part1; tail -c +22000001 $W > .lab/ray2/ray.part2
#   sha256sum $W | cut -d' ' -f1 > .lab/ray2/ray.sha256; basename $W > .lab/ray2/ray.name
#   cp .lab/raydl/*.whl .lab/ray2/ && rm .lab/ray2/ray-2.60.0*.whl     # ray's own dependencies
# Call 1 (carry .whl .lab/ray1 .ext/kb):   source .whl/setup.sh && bash bench/h200_ray.sh part1
# Call 2, at once, on the warm machine (carry .lab/ray2 only: the rest stays there):
#                                          source .whl/setup.sh && bash bench/h200_ray.sh run
# `run` joins the parts, checks the digest, installs ray and its dependencies beside the others, then runs the same
# KernelBench suite on one local GPU slot and through a one-node Ray cluster's actor (bench/suite_scaling.py).
set -u
source "$(dirname "$0")/h200_steps.sh"
case "${1:-}" in
  part1)
    mkdir -p /tmp/ray-parts && cp .lab/ray1/ray.part1 /tmp/ray-parts/ && ls -la /tmp/ray-parts ;;
  run)
    name=$(cat .lab/ray2/ray.name)
    cat /tmp/ray-parts/ray.part1 .lab/ray2/ray.part2 > "/tmp/ray-parts/$name"
    got=$(sha256sum "/tmp/ray-parts/$name" | cut -d' ' -f1)
    [ "$got" = "$(cat .lab/ray2/ray.sha256)" ] || { echo "ray wheel digest mismatch: $got" >&2; exit 3; }
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "/tmp/ray-parts/$name" \
      .lab/ray2/*.whl 2>&1 | grep -v "^WARNING: Target directory" || true
    python3 -c "import ray; print('ray', ray.__version__)"
    step suite-local "${KS_LOCAL_S:-200}" python3 bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 \
      --slots 1 --out "$OUT/suite-scaling-h200.json"
    ray start --head --num-gpus=1 --num-cpus=8 --disable-usage-stats >"$OUT/ray-start.log" 2>&1
    step suite-ray "${KS_RAY_S:-240}" python3 bench/suite_scaling.py --kb-level1 .ext/kb/KernelBench/level1 \
      --slots 1 --ray auto --out "$OUT/suite-scaling-h200-ray.json"
    ray stop --force >/dev/null 2>&1
    cat "$OUT/steps.txt" ;;
  *) echo "usage: bash bench/h200_ray.sh part1|run" >&2; exit 2 ;;
esac
