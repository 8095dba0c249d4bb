"""The docs' figures are generated from bench/results/ (bench/figures.py): docs/results.md and the README's headline
table agree with the results, and an edited figure, a changed result, a stray measured number, a missing test file
or a broken link each fail the check."""

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
RESULTS_MD = "docs/results.md"


def _load(name: str, path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # dataclasses look their module up while the class is built
    spec.loader.exec_module(mod)
    return mod


figures = _load("bench_figures", ROOT / "bench" / "figures.py")
REAL = figures.Results(figures.RESULTS)


def docs() -> dict[str, str]:
    return figures.read_docs()


def edited(doc: str, old: str, new: str) -> dict[str, str]:
    """The checked documents with one edit in one of them (which must change it)."""
    d = docs()
    assert old in d[doc], (doc, old)
    d[doc] = d[doc].replace(old, new)
    return d


@pytest.fixture
def results(tmp_path: Path):  # type: ignore[no-untyped-def]
    """A copy of bench/results/ to change."""
    dst = tmp_path / "results"
    shutil.copytree(figures.RESULTS, dst)
    return figures.Results(dst)


def test_the_docs_agree_with_the_results() -> None:
    assert figures.check(docs(), REAL) == []


def test_every_region_is_in_its_home_once() -> None:
    found = {doc: [m["name"] for m in figures._regions(text)] for doc, text in docs().items()}
    assert found["README.md"] == ["headline"]
    assert sorted(found[RESULTS_MD]) == sorted(n for n in figures.REGIONS if n != "headline")
    assert all(not names for doc, names in found.items() if doc not in ("README.md", RESULTS_MD))


def test_a_region_out_of_its_home_fails() -> None:
    text = docs()[RESULTS_MD]
    row = re.search(r"<!-- figures:row-aa -->.*?<!-- /figures:row-aa -->", text)
    assert row is not None
    d = edited("docs/cli.md", "## Commands\n", f"## Commands\n\n| {row.group(0)} |\n")
    (problem,) = figures.check(d, REAL)
    assert "docs/cli.md line" in problem and "region row-aa belongs in docs/results.md" in problem


@pytest.mark.parametrize(("doc", "region"), [(RESULTS_MD, "row-aa"), ("README.md", "headline")])
def test_an_edited_figure_in_a_region_fails(doc: str, region: str) -> None:
    d = edited(doc, "called faster 0 times of 50", "called faster 1 times of 50")
    problems = figures.check(d, REAL)
    assert len(problems) == 1 and f"region {region} differs from the results" in problems[0], problems
    assert problems[0].startswith(f"{doc} line ")


def test_an_edited_table_cell_fails() -> None:
    text = docs()[RESULTS_MD]
    # the first data row of the live-replay table, whatever today's figures: its median cell changed
    row = re.search(r"^\| l2_normalize \| #\d+ \| \S+ \| search \| ([\d.]+) us \|", text, re.M)
    assert row is not None
    cell = row.group(0)
    d = edited(
        RESULTS_MD, cell, cell.replace(f"| {row.group(1)} us |", f"| {float(row.group(1)) + 20:.1f} us |")
    )
    (problem,) = figures.check(d, REAL)
    assert "region live-replay differs" in problem


@pytest.mark.parametrize(
    ("doc", "sentence"),
    [
        ("docs/mcp.md", "GPU work runs in sandbox worker processes."),
        ("README.md", "A good idea survives a buggy first implementation;"),
        ("docs/cli.md", "The exit code is 130 (143 for SIGTERM)."),
        (RESULTS_MD, "Compare short kernels by their ncu times"),
    ],
)
def test_a_measured_number_outside_the_regions_fails(doc: str, sentence: str) -> None:
    d = edited(doc, sentence, f"{sentence} It is 2.4x faster.")
    (problem,) = figures.check(d, REAL)
    assert problem.startswith(f"{doc} line ")
    assert "'2.4x' reads as a measurement outside any generated region" in problem


@pytest.mark.parametrize(
    "claim", ["it took 0.8 s", "in 9 of 10 runs", "44 passed", "~40 functions", "a 3% gap"]
)
def test_each_kind_of_measured_number_is_seen(claim: str) -> None:
    d = edited("README.md", "## Tasks\n", f"It says {claim}.\n\n## Tasks\n")
    problems = figures.check(d, REAL)
    assert len(problems) == 1 and "reads as a measurement" in problems[0], problems


def test_a_changed_result_fails_until_the_docs_are_written(results) -> None:  # type: ignore[no-untyped-def]
    path = results.root / "sandbox-h200.json"
    data = json.loads(path.read_text())
    data["parts"]["aa"]["called_faster"] = 3
    path.write_text(json.dumps(data))
    before = docs()
    problems = figures.check(before, results)
    # the row and the README's headline, which reads the same file
    assert len(problems) == 2, problems
    assert any("region row-aa differs" in p and "called faster 3 times of 50" in p for p in problems)
    assert any("region headline differs" in p and "called faster 3 times of 50" in p for p in problems)
    written = {doc: figures.write(text, results) for doc, text in before.items()}
    assert figures.check(written, results) == []
    # only those regions changed
    for doc, text in before.items():
        changed = [a for a, b in zip(text.splitlines(), written[doc].splitlines(), strict=True) if a != b]
        want = {
            "README.md": ["| two identical candidates compared (A/A) | called faster 0 times of 50 "]
        }.get(doc)
        if doc == RESULTS_MD:
            assert changed == [line for line in text.splitlines() if "figures:row-aa" in line]
        elif want:
            assert len(changed) == 1 and changed[0].startswith(want[0]), changed
        else:
            assert changed == [], doc


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
    problems = figures.check(docs(), results)
    assert len(problems) == 2, problems
    assert any("region row-compile-baseline differs" in p for p in problems), problems
    assert any("region headline differs" in p and "–1.021 over" in p for p in problems), problems


def test_a_missing_results_file_is_named(results) -> None:  # type: ignore[no-untyped-def]
    (results.root / "guard-cpu.json").unlink()
    (problem,) = figures.check(docs(), results)
    assert "region guard-check: cannot be generated" in problem and "guard-cpu.json is missing" in problem


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        (
            "docs/integrity.md",
            "`tests/sandbox/test_kernel_audit.py`",
        ),  # numbers unchecked there, paths checked
        ("docs/mcp.md", "`tests/sandbox/test_pipeline_cpu.py`"),
    ],
)
def test_a_path_to_a_test_that_does_not_exist_fails(doc: str, path: str) -> None:
    d = edited(doc, path, "`tests/sandbox/test_no_such.py`")
    problems = figures.check(d, REAL)
    assert problems and all(f"{doc} line" in p and "test_no_such.py does not exist" in p for p in problems), (
        problems
    )


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        ("](docs/cli.md)", "](docs/no_such.md)", "leads to no file (docs/no_such.md)"),
        (
            "](docs/architecture.md#use-ksearch-from-python)",
            "](docs/architecture.md#no-such-heading)",
            "leads to no heading of docs/architecture.md",
        ),
    ],
)
def test_a_broken_link_fails(old: str, new: str, says: str) -> None:
    problems = figures.check(edited("README.md", old, new), REAL)
    assert problems and all(p.startswith("README.md line ") and says in p for p in problems), problems


def test_a_link_to_a_heading_of_another_checked_doc_follows_that_doc() -> None:
    d = edited("docs/cli.md", "### Whose clock: timing protocols\n", "### Whose clock\n")
    problems = figures.check(d, REAL)
    assert problems and all(
        "#whose-clock-timing-protocols leads to no heading of docs/cli.md" in p for p in problems
    )


def test_the_cli_checks_and_names_the_region(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "bench/figures.py", "--check"], cwd=ROOT, capture_output=True, text=True
    )
    assert ok.returncode == 0, ok.stderr
    for name, text in docs().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text.replace("20 of 20 cheats caught", "21 of 21 cheats caught"))
    bad = subprocess.run(
        [sys.executable, "bench/figures.py", "--check", "--root", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "region row-integrity-gpu differs" in bad.stderr


def test_the_readme_is_short_and_gives_the_two_commands() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= 300
    first = text[: text.index("\n## ")]  # the first screen: what it is, then the two commands
    assert "**Set up and run the main job**" in first and "`bash scripts/quickstart.sh`" in first
    assert "**Run the tests**: `bash scripts/test.sh`" in first
    assert "`source .venv/bin/activate` puts `ksearch` on" in " ".join(first.split())
    # CI runs exactly the README's test command
    assert re.search(r"^bash scripts/test\.sh 2>&1", (ROOT / ".ci" / "run").read_text(), re.M)
    # the three ways to use it, pairing named, with its steering commands
    for said in (
        "ksearch run ",
        "ksearch serve",
        "Pairing",
        "ksearch pin ",
        "ksearch veto ",
        "ksearch submit ",
    ):
        assert said in text, said


def test_the_evaluator_table_names_every_adversarial_case_and_only_those() -> None:
    sys.path.insert(0, str(ROOT / "tests" / "adversarial"))
    from adversarial_cases import CASES

    text = (ROOT / "docs" / "integrity.md").read_text()
    section = text[
        text.index("## What the evaluator catches") : text.index("**A candidate must be a kernel.**")
    ]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| cheat")]
    # "case `a`" / "cases `a`, `b`, `c` (GPU)": the names up to the next ";" or "("
    runs = [seg for row in rows for seg in re.findall(r"\bcases? ([^;(]*)", row.rsplit(" | ", 1)[-1])]
    named = {n for seg in runs for n in re.findall(r"`(\w+)`", seg)}
    assert named == {c.name for c in CASES}
