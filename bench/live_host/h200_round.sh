#!/usr/bin/env bash
# Moved into the one runner: `KS_LIVE_DIR=DIR KS_LIVE_MANIFEST=MANIFEST [KS_LIVE_OWNERS=1] bash bench/run_h200.sh
# live-round`. This name (h200_round.sh DIR MANIFEST [--owners]) stays only while bench/figures.py and docs/mcp.md
# name it.
[ $# -ge 2 ] || { echo "usage: bash bench/live_host/h200_round.sh DIR MANIFEST [--owners]" >&2; exit 2; }
export KS_LIVE_DIR=$1 KS_LIVE_MANIFEST=$2
[ "${3:-}" = --owners ] && export KS_LIVE_OWNERS=1
exec bash "$(dirname "$0")/../run_h200.sh" live-round
