"""Which commit a benchmark measured. On the device machine the working tree is a copy of the one sent while its
.git may be an older one, so the commit that bench/run_h200.sh was told (KSEARCH_COMMIT) comes first; only without
it is git asked, and then whether tracked files differ from that commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def git(*args: str) -> str | None:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True
        ).stdout.strip()
    except (subprocess.SubprocessError, OSError):
        return None


def commit() -> str | None:
    return os.environ.get("KSEARCH_COMMIT") or git("rev-parse", "HEAD")


def dirty() -> bool | None:
    """Tracked files changed since commit(); None where that is unknown (a sent commit, or no git)."""
    if os.environ.get("KSEARCH_COMMIT"):
        return None
    status = git("status", "--porcelain", "--untracked-files=no")
    return bool(status) if status is not None else None
