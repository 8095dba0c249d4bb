"""`ksearch compile TASK FILE`: compile a candidate file without running it, as a person runs it (a subprocess,
the real compiler: Triton's bundled ptxas from a CPU dry run without a GPU, nvcc for CUDA when present)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ksearch.gpu.build.compiler import find_nvcc
from tests.fixtures.cli import ksearch_cli

pytestmark = pytest.mark.timeout(300)

ROOT = Path(__file__).resolve().parents[2]
AFFINE = ROOT / "tests" / "sandbox" / "fixtures" / "affine.py"
CANDIDATES = ROOT / "tests" / "sandbox" / "fixtures" / "candidates"
TRACE = ROOT / "tests" / "tasks" / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
ROWS = TRACE / "solutions" / "ksearch-fixtures" / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"


def _ksearch(tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return ksearch_cli(
        tmp, "compile", *args, extra_env={"KSEARCH_FACTS_CACHE": str(tmp / "facts")}, timeout=280
    )


@pytest.mark.slow
def test_a_triton_kernel_compiles_and_its_resources_are_shown(tmp_path: Path) -> None:
    p = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "good_triton.py"))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("compile: ok in ")
    kernel = [ln for ln in p.stdout.splitlines() if ln.strip().startswith("kernel _affine: ")]
    assert len(kernel) == 1 and "regs=" in kernel[0] and "spills=0/0B" in kernel[0]
    assert "occupancy" in kernel[0]
    again = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "good_triton.py"), "--json")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["ok"] and report["language"] == "triton"
    assert [k["name"] for k in report["kernels"]] == ["_affine"] and report["kernels"][0]["registers"] > 0


@pytest.mark.slow
def test_a_module_without_modelnew_does_not_compile(tmp_path: Path) -> None:
    bad = tmp_path / "no_modelnew.py"
    bad.write_text((CANDIDATES / "good_triton.py").read_text().replace("class ModelNew(", "class ModelOld("))
    p = _ksearch(tmp_path, str(AFFINE), str(bad))
    assert p.returncode == 1, p.stdout + p.stderr
    assert p.stdout.startswith("compile: FAILED")
    assert "error: the module defines none of ModelNew" in p.stdout


@pytest.mark.slow
def test_a_syntax_error_is_refused_with_its_line(tmp_path: Path) -> None:
    p = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "broken_syntax.txt"))
    assert p.returncode == 2
    err = " ".join(p.stderr.split())
    assert "the candidate source does not parse as Python: line 9" in err and "never closed" in err
    assert p.stdout == ""


@pytest.mark.slow
def test_bad_arguments_are_refused_with_what_is_accepted(tmp_path: Path) -> None:
    p = _ksearch(tmp_path, "no_such_task", str(CANDIDATES / "good_triton.py"))
    assert p.returncode == 2
    err = " ".join(p.stderr.split())
    assert "unknown task 'no_such_task'" in err and "row_sum" in err  # the built-ins are listed
    p = _ksearch(tmp_path, str(AFFINE), str(tmp_path / "missing.py"))
    assert p.returncode == 2 and "cannot read" in p.stderr and "No such file or directory" in p.stderr
    p = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "good_triton.py"), "--language", "rust")
    assert p.returncode == 2
    assert "unknown language 'rust'; accepted: auto, triton, cuda, cpp_ext" in " ".join(p.stderr.split())


@pytest.mark.slow
def test_a_solution_json_compiles_as_its_spec_says(tmp_path: Path) -> None:
    p = _ksearch(tmp_path, str(RMSNORM), str(ROWS))
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("compile: ok in ") and "kernel _rmsnorm_rows: regs=" in p.stdout
    assert "rmsnorm_h128_triton_rows" in p.stderr  # how the solution was turned into a candidate


@pytest.mark.skipif(find_nvcc() is None, reason="needs nvcc")
@pytest.mark.slow
def test_cuda_compiles_with_nvcc_and_its_errors_are_on_the_candidate_s_lines(tmp_path: Path) -> None:
    p = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "cuda_good.py"))
    assert p.returncode == 0, p.stderr
    assert "nvcc" in p.stdout.splitlines()[0] and "kernel affine: regs=" in p.stdout
    p = _ksearch(tmp_path, str(AFFINE), str(CANDIDATES / "cuda_broken.py"))
    assert p.returncode == 1
    assert p.stdout.startswith("compile: FAILED")
    assert 'error: line 11: identifier "offset" is undefined' in p.stdout


@pytest.mark.slow
def test_a_gpu_mode_task_is_compiled_for_sm_90_without_a_gpu(tmp_path: Path) -> None:
    """`ksearch compile` on a GPU MODE folder whose inputs are made on CUDA said "not compiled: this task needs a
    GPU" here: its kernels compile for sm_90 all the same, and it says what was not done."""
    pinned = ROOT / "tests" / "tasks" / "fixtures" / "gpumode" / "cuda_pinned"
    p = _ksearch(tmp_path, str(pinned), str(CANDIDATES / "gpumode_triton_double.py"))
    assert p.returncode == 0, p.stdout + p.stderr
    head = p.stdout.splitlines()[0]
    assert (
        head.startswith("compile: ok in ")
        and "(compiled for sm_90 without running; correctness and timing "
        "need a GPU (this task needs one: reference.py line 13 puts tensors on CUDA"
        in head
    ), head
    assert "kernel _double: regs=" in p.stdout and "not compiled" not in p.stdout
