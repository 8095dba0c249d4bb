"""Candidate modules: real files for tracebacks and Triton, fresh code on every load."""

from __future__ import annotations

import traceback
from pathlib import Path

import pytest

from ksearch.gpu.tasks.rt.runtime import load_candidate_module


def test_candidate_tracebacks_point_at_its_own_lines(tmp_path: Path) -> None:
    source = "def f():\n    x = 1\n    raise ValueError('line three')\n"
    mod = load_candidate_module(source, "tb_candidate", tmp_path)
    assert Path(mod.__file__) == tmp_path / "tb_candidate.py"
    assert (tmp_path / "tb_candidate.py").read_text() == source
    with pytest.raises(ValueError) as info:
        mod.f()
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == str(tmp_path / "tb_candidate.py") and frame.lineno == 3
    assert frame.line == "raise ValueError('line three')"


def test_same_name_same_length_reloads_fresh_code(tmp_path: Path) -> None:
    # A bytecode cache keyed on mtime and size would hand back the first module here.
    first = load_candidate_module("VALUE = 1\n", "again", tmp_path)
    second = load_candidate_module("VALUE = 2\n", "again", tmp_path)
    assert (first.VALUE, second.VALUE) == (1, 2)


def test_names_become_identifiers_and_errors_propagate(tmp_path: Path) -> None:
    mod = load_candidate_module("A = 3\n", "3-bad name", tmp_path)
    assert mod.__name__ == "_3_bad_name" and mod.A == 3
    with pytest.raises(SyntaxError):
        load_candidate_module("def broken(:\n", "broken", tmp_path)
    import sys

    assert "broken" not in sys.modules
