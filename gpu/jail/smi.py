"""nvidia-smi's GPU table, read one way for every caller. Standard library only: the jail's launcher imports it."""

from __future__ import annotations

import shutil
import subprocess


def query_gpus(fields: str) -> list[list[str]]:
    """One row per GPU of `nvidia-smi --query-gpu=FIELDS` (stripped columns); [] without nvidia-smi, or where it
    fails or lists none."""
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return []
    try:
        out = subprocess.run(
            [smi, f"--query-gpu={fields}", "--format=csv,noheader"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        ).stdout
    except (subprocess.SubprocessError, OSError):
        return []
    return [[c.strip() for c in line.split(",")] for line in out.splitlines() if line.strip()]
