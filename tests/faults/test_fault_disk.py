"""A full disk under the sandbox's scratch directory: the evaluation says so plainly (status `error`, "No
space left on device"), nothing committed is touched, the same worker goes on, and evaluations work again
once space returns. A database on a full disk refuses the write whole and recovers likewise.

The small disk is a 24 MB tmpfs mounted in a private mount namespace (`unshare --mount --map-root-user`,
which needs no root where user namespaces are enabled); the scenario itself is
tests/faults/disk_full_scenario.py, run inside it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.faults.faultkit import ROOT, integrity, ksearch_env


def _unshare_works() -> bool:
    exe = shutil.which("unshare")
    if exe is None:
        return False
    p = subprocess.run(
        [
            exe,
            "--mount",
            "--map-root-user",
            "sh",
            "-c",
            "mount -t tmpfs -o size=1m tmpfs /tmp 2>/dev/null && echo ok",
        ],
        capture_output=True,
        text=True,
    )
    return p.stdout.strip() == "ok"


@pytest.mark.skipif(
    not _unshare_works(), reason="needs unshare with user and mount namespaces (to mount a small tmpfs)"
)
@pytest.mark.slow
def test_a_full_scratch_disk_is_a_clear_error_and_everything_recovers(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    db, out = tmp_path / "k.db", tmp_path / "report.json"
    script = (
        f'mount -t tmpfs -o size=24m tmpfs "{disk}" && '
        f'exec "{sys.executable}" -m tests.faults.disk_full_scenario "{disk}" "{db}" "{out}"'
    )
    p = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script],
        cwd=ROOT,
        env=ksearch_env(tmp_path / "tmp"),
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    r = json.loads(out.read_text())

    assert r["with_room"]["status"] == "ok", r["with_room"]
    for step in ("full", "still_full"):
        assert "raised" not in r[step], r[step]  # a result, never an exception out of the tool
        assert r[step]["status"] == "error", r[step]
        assert "No space left on device" in r[step]["error"], r[step]
        assert r[step]["attempt_id"] is not None
    assert r["room_again"]["status"] == "ok", r["room_again"]

    before, after = r["attempts_before"], r["attempts_after"]
    assert {k: after[k] for k in before} == before  # committed attempts untouched
    assert [a[7] for a in after.values()] == ["ok", "error", "error", "ok"]
    assert integrity(db) == "ok"

    # the database on the full disk: refused as a whole ("database or disk is full"), then fine
    assert "disk is full" in r["db_full"], r["db_full"]
    assert r["db_full_nodes_after"] == 1  # the root only: none of the 40 intents half-written
    assert r["db_room_again"] == 1
    assert not os.path.ismount(disk)  # the tmpfs lived only in the scenario's namespace
