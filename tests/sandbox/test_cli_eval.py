"""`ksearch eval TASK FILE`: a free-standing evaluation from the command line."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ksearch.gpu.jail import launch as jail
from ksearch.server.cli.sandbox import detect_language
from tests.fixtures.cli import ksearch_cli

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures"


def _ksearch(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    return ksearch_cli(tmp, *args)


@pytest.mark.slow
def test_eval_prints_an_honest_summary(tmp_path: Path) -> None:
    p = _ksearch(
        "eval",
        str(FIX / "affine.py"),
        str(FIX / "candidates" / "good_triton.py"),
        "-w",
        "small",
        "--seed",
        "5",
        tmp=tmp_path,
    )
    assert p.returncode == 0, p.stderr
    out = " ".join(p.stdout.split())  # rich wraps long lines
    assert "measured on the Triton CPU interpreter" in out
    assert "seed 5" in out and "status: ok" in out and "correct on small (3 trials" in out
    assert "functional only" in out
    expect = (
        "namespaces: own PID and network namespaces"
        if jail.unavailable_reason() is None
        else "none: namespaces unavailable"
    )
    assert f"candidate isolation: {expect}" in out


@pytest.mark.slow
def test_eval_json_and_failure_exit_code(tmp_path: Path) -> None:
    p = _ksearch(
        "eval",
        str(FIX / "affine.py"),
        str(FIX / "candidates" / "wrong_values.py"),
        "--json",
        "--no-timing",
        tmp=tmp_path,
    )
    assert p.returncode == 1
    ev = json.loads(p.stdout)
    assert ev["status"] == "incorrect" and ev["correctness"][0]["kind"] == "wrong_values"
    assert ev["correctness"][0]["workload"] == "smoke"  # the default without a GPU
    assert ev["timings"] == []


def test_eval_refuses_an_unknown_workload(tmp_path: Path) -> None:
    p = _ksearch(
        "eval", str(FIX / "affine.py"), str(FIX / "candidates" / "good_triton.py"), "-w", "huge", tmp=tmp_path
    )
    assert p.returncode == 2
    assert "huge" in p.stderr and "small" in p.stderr


def test_language_detection() -> None:
    assert detect_language((FIX / "candidates" / "cuda_good.py").read_text()) == "cuda"
    assert detect_language((FIX / "candidates" / "cpp_ext_broken.py").read_text()) == "cpp_ext"
    assert detect_language((FIX / "candidates" / "good_triton.py").read_text()) == "triton"


@pytest.mark.slow
def test_eval_takes_a_definition_s_workloads_file_and_kernelbench_s_precision(tmp_path: Path) -> None:
    definition = ROOT / "tests" / "tasks" / "fixtures" / "flashinfer" / "rowscale_h64.json"
    (tmp_path / "defs").mkdir()
    (tmp_path / "defs" / "rowscale_h64.json").write_text(definition.read_text())
    (tmp_path / "rows.jsonl").write_text(definition.with_suffix(".jsonl").read_text())
    p = _ksearch(
        "eval",
        str(tmp_path / "defs" / "rowscale_h64.json"),
        str(FIX / "candidates" / "good_triton.py"),
        "--workloads",
        str(tmp_path / "rows.jsonl"),
        "--no-timing",
        tmp=tmp_path,
    )
    # the definition loads with the workloads given (the good_triton candidate is for another task: it fails there)
    assert p.returncode == 1 and "no workloads JSONL found" not in p.stderr, p.stderr
    assert "status: " in p.stdout
    missing = _ksearch(
        "eval",
        str(tmp_path / "defs" / "rowscale_h64.json"),
        str(FIX / "candidates" / "good_triton.py"),
        tmp=tmp_path,
    )
    assert missing.returncode == 2 and "no workloads JSONL found" in " ".join(missing.stderr.split())
    bad = _ksearch(
        "eval",
        str(FIX / "affine.py"),
        str(FIX / "candidates" / "good_triton.py"),
        "--precision",
        "fp64",
        tmp=tmp_path,
    )
    assert (
        bad.returncode == 2
        and "precision" in bad.stderr
        and "'fp32', 'fp16' or 'bf16'" in " ".join(bad.stderr.split())
    )
