#!/usr/bin/env bash
# Create .venv (or $KSEARCH_VENV) with ksearch and its dependencies. Idempotent.
#   With an NVIDIA GPU (nvidia-smi works): the default PyPI torch (CUDA) and CuPy for NVRTC candidates.
#   Without one: the CPU torch build (torch==2.13.0) and Triton, whose interpreter runs candidates on the CPU.
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${KSEARCH_VENV:-.venv}
# what it does, said before each slow step (pip itself is quiet: minutes of silence read as a hang)
say() { echo "setup: $*" >&2; }
[ -x "$VENV/bin/python" ] || { say "creating $VENV"; python3 -m venv "$VENV"; }
PY="$VENV/bin/python"
extras="dev"
if ! "$PY" -c "import torch" 2>/dev/null; then
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
    say "installing torch with CUDA into $VENV (a few GB: several minutes)"
    "$PY" -m pip install -q torch
    extras="dev,cuda"
  else
    # never let a dependency pull a multi-GB CUDA torch onto a machine without a GPU
    say "installing torch's CPU build into $VENV (a few hundred MB: a few minutes)"
    "$PY" -m pip install -q torch==2.13.0
  fi
fi
# The editable install again only when what it installs from changed (pyproject.toml, the extras): a stamp in the
# environment records what it last installed, and a rerun on an unchanged checkout skips pip (~15 s).
stamp="$VENV/.ksearch-setup"
want="$(cat pyproject.toml scripts/setup.sh | sha256sum | cut -c1-16) $extras $(pwd)"
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || ! "$PY" -I -c "import ksearch" 2>/dev/null; then
  say "installing ksearch and its dependencies into $VENV"
  "$PY" -m pip install -q -e ".[$extras]"
  echo "$want" > "$stamp"
fi
# An editable install leaves ksearch's own modules uncompiled, and sandbox workers (read-only view, no bytecode
# written) would compile the ones they import at every start: compile them once here, as pip does for packages.
"$PY" -m compileall -q -j 0 gpu tools server worldmodel >/dev/null
"$PY" -m compileall -q -l ksearch >/dev/null  # its rooms are links to the folders above
