"""README figures are generated from bench/results/ (bench/figures.py): the real README agrees with the results,
and an edited figure, a changed result, a stray measured number or a missing test file each fail the check."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


figures = _load("bench_figures", ROOT / "bench" / "figures.py")
REAL = figures.Results(figures.RESULTS)


@pytest.fixture
def results(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A copy of bench/results/ to change."""
    dst = tmp_path / "results"
    shutil.copytree(figures.RESULTS, dst)
    return figures.Results(dst)


def test_the_readme_agrees_with_the_results() -> None:
    assert figures.check(README.read_text(), REAL) == []


def test_every_region_is_in_the_readme_once() -> None:
    names = [m["name"] for m in figures._regions(README.read_text())]
    assert sorted(names) == sorted(figures.REGIONS)


def test_an_edited_figure_in_a_region_fails() -> None:
    text = README.read_text()
    assert "called faster 0 times of 50" in text
    problems = figures.check(text.replace("called faster 0 times of 50", "called faster 1 times of 50"), REAL)
    assert len(problems) == 1 and "region row-aa differs from the results" in problems[0], problems


def test_an_edited_table_cell_fails() -> None:
    text = README.read_text()
    # the first data row of the live-replay table, whatever today's figures: its median cell changed
    row = re.search(r"^\| l2_normalize \| #\d+ \| \S+ \| search \| ([\d.]+) us \|", text, re.M)
    assert row is not None
    cell = row.group(0)
    edited = text.replace(
        cell, cell.replace(f"| {row.group(1)} us |", f"| {float(row.group(1)) + 20:.1f} us |")
    )
    assert edited != text
    (problem,) = figures.check(edited, REAL)
    assert "region live-replay differs" in problem


def test_a_measured_number_outside_the_regions_fails() -> None:
    text = README.read_text().replace(
        "GPU work runs in sandbox worker processes.",
        "GPU work runs in sandbox worker processes, 2.4x faster.",
    )
    (problem,) = figures.check(text, REAL)
    assert "'2.4x' reads as a measurement outside any generated region" in problem


@pytest.mark.parametrize(
    "claim", ["it took 0.8 s", "in 9 of 10 runs", "44 passed", "~40 functions", "a 3% gap"]
)
def test_each_kind_of_measured_number_is_seen(claim: str) -> None:
    text = README.read_text().replace("## Faults it survives", f"It says {claim}.\n\n## Faults it survives")
    problems = figures.check(text, REAL)
    assert len(problems) == 1 and "reads as a measurement" in problems[0], problems


def test_a_changed_result_fails_until_the_readme_is_written(results) -> None:  # type: ignore[no-untyped-def]
    path = results.root / "sandbox-h200.json"
    data = json.loads(path.read_text())
    data["parts"]["aa"]["called_faster"] = 3
    path.write_text(json.dumps(data))
    text = README.read_text()
    (problem,) = figures.check(text, results)
    assert "region row-aa differs" in problem and "called faster 3 times of 50" in problem
    written = figures.write(text, results)
    assert "called faster 3 times of 50" in written and figures.check(written, results) == []
    # only that region changed
    assert [a for a, b in zip(text.splitlines(), written.splitlines(), strict=True) if a != b] == [
        line for line in text.splitlines() if "figures:row-aa" in line
    ]


def test_a_new_compile_baseline_file_joins_its_row(results) -> None:  # type: ignore[no-untyped-def]
    """A later compile-baseline-h200-N.json is read with the others: its tasks replace their earlier rows."""
    first = json.loads((results.root / "compile-baseline-h200-1.json").read_text())
    row = dict(
        first["tasks"]["rmsnorm"]["rows"][0], task="causal_attention", workload="b8h16s2048d64", ratio=1.021
    )
    new = {"tasks": {"causal_attention": {"status": "ok", "rows": [row], "notes": []}}}
    before = figures.row_compile_baseline(results)
    (results.root / "compile-baseline-h200-99.json").write_text(json.dumps(new))
    got = figures.row_compile_baseline(results)
    assert got != before
    assert "–1.021 on all" in got and "causal_attention" in got, got
    assert ",99}.json`" in got, got
    (problem,) = figures.check(README.read_text(), results)
    assert "region row-compile-baseline differs" in problem


def test_a_missing_results_file_is_named(results) -> None:  # type: ignore[no-untyped-def]
    (results.root / "guard-cpu.json").unlink()
    (problem,) = figures.check(README.read_text(), results)
    assert "region guard-check: cannot be generated" in problem and "guard-cpu.json is missing" in problem


def test_a_path_to_a_test_that_does_not_exist_fails() -> None:
    text = README.read_text().replace(
        "`tests/sandbox/test_kernel_audit.py`", "`tests/sandbox/test_no_such.py`"
    )
    (problem,) = figures.check(text, REAL)
    assert "tests/sandbox/test_no_such.py does not exist" in problem


def test_the_cli_checks_and_names_the_region(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "bench/figures.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    edited = tmp_path / "README.md"
    edited.write_text(README.read_text().replace("20 of 20 cheats caught", "21 of 21 cheats caught"))
    bad = subprocess.run(
        [sys.executable, "bench/figures.py", "--check", "--readme", str(edited)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "region row-integrity-gpu differs" in bad.stderr


def test_the_evaluator_table_names_every_adversarial_case_and_only_those() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "adversarial"))
    from adversarial_cases import CASES

    text = README.read_text()
    section = text[
        text.index("## What the evaluator catches") : text.index("**A candidate must be a kernel.**")
    ]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| cheat")]
    # "case `a`" / "cases `a`, `b`, `c` (GPU)": the names up to the next ";" or "("
    runs = [seg for row in rows for seg in re.findall(r"\bcases? ([^;(]*)", row.rsplit(" | ", 1)[-1])]
    named = {n for seg in runs for n in re.findall(r"`(\w+)`", seg)}
    assert named == {c.name for c in CASES}
