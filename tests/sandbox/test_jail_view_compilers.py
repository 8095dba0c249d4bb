"""A host compiler installed outside the system folders (CC=/opt/gcc/bin/gcc, as on some GPU images) is in
the jail's view as a whole installation: Triton's launcher build, nvcc -ccbin and torch extensions call it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ksearch.gpu.jail import view as jail_view


def test_a_compiler_named_by_cc_outside_the_system_is_shown_with_its_installation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prefix = tmp_path / "opt" / "gcc"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "libexec").mkdir()
    gcc = prefix / "bin" / "gcc"
    gcc.write_text("#!/bin/sh\n")
    gcc.chmod(0o755)
    monkeypatch.setenv("CC", str(gcc))
    paths = jail_view.compiler_paths()
    assert str(prefix) in paths, paths
    view = jail_view.build([], [], [], [])
    assert view.covers(str(prefix / "libexec")) and view.covers(os.path.realpath(gcc))
    # the system's own compilers are already there with /usr: nothing under it is added twice
    assert not any(p.startswith("/usr/") for p in paths)
