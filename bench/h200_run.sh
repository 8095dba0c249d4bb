#!/usr/bin/env bash
# Moved into the one runner: `bash bench/run_h200.sh sandbox` (the gpu tests, the integrity suite, the sandbox
# figures). This name stays only while docs/results.md names it; remove it once that names the runner.
exec bash "$(dirname "$0")/run_h200.sh" sandbox
