#!/usr/bin/env bash
# Moved into the one runner: `bash bench/run_h200.sh ray-part1`, `ray-part2`, `ray` (the suite's scaling through
# Ray; bench/run_h200.sh says how the wheel travels). This name stays only while bench/figures.py names it.
case "${1:-}" in
  part1) exec bash "$(dirname "$0")/run_h200.sh" ray-part1 ;;
  run) exec bash "$(dirname "$0")/run_h200.sh" ray ;;
  *) echo "usage: bash bench/run_h200.sh ray-part1|ray-part2|ray" >&2; exit 2 ;;
esac
