"""compile_kernel without running: diagnostics on the candidate's own lines, resources per kernel."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ksearch.gpu.build.compiler import StaticCompiler, demangle, find_nvcc, parse_nvcc_output
from ksearch.gpu.jail import launch as jail
from ksearch.worldmodel.models import CompileReport

pytestmark = pytest.mark.anyio
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")


def line_of(source: str, marker: str) -> int:
    hits = [i for i, ln in enumerate(source.splitlines(), 1) if marker in ln]
    assert len(hits) == 1, marker
    return hits[0]


@pytest.fixture(scope="module")
def compiler(tmp_path_factory) -> StaticCompiler:
    return StaticCompiler(tmp_path_factory.mktemp("nvcc"), arch="sm_90")


async def test_triton_syntax_error_points_at_its_line(compiler, cand) -> None:
    c = cand("broken_syntax")
    r = await compiler.compile(c)
    assert not r.ok
    err = r.diagnostics[0]
    assert err.severity == "error" and "syntax" in err.message.lower()
    # Python reports the unclosed call at the line it opens or the line where parsing fails
    assert err.line in (line_of(c.source, "x = tl.load"), line_of(c.source, "# SYNTAX"))


@pytest.mark.slow
async def test_triton_without_kernels_is_warned_and_mode_is_honest(sandbox, affine, cand) -> None:
    r = await sandbox.compile(cand("wrong_shape"), affine)
    assert r.ok and r.kernels == []
    assert any("no @triton.jit" in d.message for d in r.diagnostics)
    assert any("launched no Triton kernel" in d.message for d in r.diagnostics)
    assert "no GPU: compiled, not run" in r.mode
    assert (
        r.verdict() == "not checked" and "launched no Triton kernel" in r.unchecked
    )  # never `ok` for nothing


async def test_sandbox_compile_of_syntax_error(sandbox, affine, cand) -> None:
    r = await sandbox.compile(cand("broken_syntax"), affine)
    assert not r.ok and r.diagnostics[0].line is not None


@needs_nvcc
async def test_cuda_errors_map_to_candidate_lines(compiler, cand) -> None:
    c = cand("cuda_broken", "cuda")
    r = await compiler.compile(c)
    assert not r.ok
    errors = {d.line: d.message for d in r.diagnostics if d.severity == "error"}
    warnings = {d.line: d.message for d in r.diagnostics if d.severity == "warning"}
    assert "offset" in errors[line_of(c.source, "// ERR1")]  # a plain string literal
    assert "not_declared" in errors[line_of(c.source, "// ERR2")]  # an f-string built from BLOCK
    assert "unused_counter" in warnings[line_of(c.source, "// WARN1")]
    assert "nvcc -arch=sm_90" in r.mode


@needs_nvcc
async def test_cuda_resources_from_ptxas(compiler, cand) -> None:
    c = cand("cuda_resources", "cuda")
    r = await compiler.compile(c)
    assert r.ok, r.diagnostics
    (k,) = r.kernels
    assert k.name == "staged"
    assert k.registers is not None and k.registers > 0
    assert k.shared_bytes == 4096  # float tile[1024]
    assert k.stack_bytes is not None and k.stack_bytes >= 48 * 4  # the local array lives on the stack
    again = await compiler.compile(c)
    assert again.cached and again.kernels == r.kernels


@needs_nvcc
@pytest.mark.slow
async def test_cpp_extension_cuda_sources_map_past_the_prelude(compiler, cand) -> None:
    c = cand("cpp_ext_broken", "cpp_ext")
    r = await compiler.compile(c)
    assert not r.ok
    errors = {d.line: d.message for d in r.diagnostics if d.severity == "error"}
    assert "bias" in errors[line_of(c.source, "// ERR1")], r.diagnostics
    # checked for real: torch's headers and Python's own were found (as torch builds extensions, C++20), and
    # nothing said inside those headers is reported as the candidate's
    assert r.unchecked == "" and r.verdict() == "FAILED"
    assert not [d for d in r.diagnostics if "static check incomplete" in d.message or "include/" in d.message]


def test_a_warning_inside_torchs_headers_is_not_the_candidates_and_an_unchecked_compile_says_so() -> None:
    out = (
        "/venv/torch/include/c10/core/AutogradState.h(89): warning #1234-D: a default bit-field initializer is a "
        'C++20 feature\nunit0.cu(7): error: expected a ";"\n'
    )
    diags, _ = parse_nvcc_output(out, "unit0.cu")
    assert diags == [{"severity": "error", "message": 'expected a ";"', "unit_line": 7, "file": None}]
    report = CompileReport(ok=True, language="cpp_ext", seconds=0.1, unchecked="Python.h is not installed")
    assert report.verdict() == "not checked"
    assert CompileReport(ok=False, language="cuda", seconds=0.1).verdict() == "FAILED"


def test_ptxas_parser_reads_entries_and_properties() -> None:
    out = """unit0.cu(9): warning #177-D: variable "unused" was declared but never referenced
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z3addPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z3addPKfPfi
    256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem
ptxas info    : Compile time = 41.240 ms
"""
    diags, kernels = parse_nvcc_output(out, "unit0.cu")
    assert diags == [
        {
            "severity": "warning",
            "unit_line": 9,
            "file": None,
            "message": 'variable "unused" was declared but never referenced',
        }
    ]
    assert kernels == [
        {
            "name": "add",
            "mangled": "_Z3addPKfPfi",
            "registers": 32,
            "spill_stores_bytes": 8,
            "spill_loads_bytes": 12,
            "shared_bytes": 1024,
            "stack_bytes": 256,
        }
    ]


def test_demangle_base_names() -> None:
    assert demangle("_Z6kernelPfi") == "kernel"
    assert demangle("_ZN2ns6kernelEPf") == "ns::kernel"
    assert demangle("plain_c_name") == "plain_c_name"


def test_tamper_scan_flags_patching_and_precision_but_not_benign_settings() -> None:
    from ksearch.gpu.checks.tamper import scan

    src = """import os
import time as t
import torch
from torch import cuda

t.perf_counter = lambda: 0.0
cuda.synchronize = lambda: None
torch.backends.cuda.matmul.allow_tf32 = True
torch.backends.cudnn.benchmark = True
os.environ["CUDA_LAUNCH_BLOCKING"] = "0"
frame = __import__("sys")._getframe
import ksearch.gpu.timing.measure
self_like = object()
"""
    found = dict(scan(src))
    assert "time.perf_counter" in found[6] and "torch.cuda.synchronize" in found[7]
    assert "lowers precision" in found[8]
    assert 9 not in found and 10 not in found  # cudnn.benchmark and environment variables are benign
    assert "harness module" in found[12]


@needs_nvcc
@pytest.mark.skipif(
    jail.unavailable_reason() is not None, reason=f"no isolation: {jail.unavailable_reason()}"
)
async def test_nvcc_runs_jailed_and_cannot_see_the_parent(tmp_path, cand) -> None:
    """A source is hostile at compile time too: nvcc runs in the candidate's jail, where the
    process that started it does not exist."""
    compiler = StaticCompiler(tmp_path, arch="sm_90", jailed=True)
    probe = f"/proc/{os.getpid()}/status"
    assert Path(probe).exists()
    src = cand("cuda_good", "cuda").source.replace('SRC = r"""', f'SRC = r"""#include "{probe}"\n', 1)
    r = await compiler.compile(cand(src, "cuda"))
    assert not r.ok
    assert any(probe in d.message and "No such file" in d.message for d in r.diagnostics), r.diagnostics


FIB_TRACE = Path(__file__).parents[1] / "tasks" / "fixtures" / "flashinfer_trace"


@needs_nvcc
async def test_a_flashinfer_solution_whose_cuda_does_not_compile_is_a_compile_error(compiler) -> None:
    """A FlashInfer-Bench CUDA solution's .cu files are compiled with its other files beside them; an error
    names the file and line of the solution it is in."""
    import json

    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.flashinfer.solution import candidate_from_solution_text
    from ksearch.worldmodel.models import Candidate

    task = load_task(str(FIB_TRACE / "definitions" / "gemm" / "gemm_n64_k32.json"))
    path = (
        FIB_TRACE
        / "solutions"
        / "ksearch-fixtures"
        / "gemm"
        / "gemm_n64_k32"
        / "gemm_n64_k32_cuda_torch.json"
    )
    good = candidate_from_solution_text(path.read_text(), task, "good.json")
    r = await compiler.compile(Candidate.of(good.source, good.language), ("run",))
    # the unchanged solution: checked, or (a CUDA header torch's needs is missing here) said to be not checked
    assert r.ok and r.verdict() in ("ok", "not checked"), r.diagnostics
    assert (r.verdict() == "not checked") == any(
        "static check incomplete" in d.message for d in r.diagnostics
    )
    sol = json.loads(path.read_text())
    for f in sol["sources"]:
        if f["path"] == "kernel.cu":
            f["content"] = "THIS IS NOT CUDA\n"
    bad = candidate_from_solution_text(json.dumps(sol), task, "broken.json")
    r = await compiler.compile(Candidate.of(bad.source, bad.language), ("run",))
    assert not r.ok and r.verdict() == "FAILED", r.diagnostics
    errors = [d.message for d in r.diagnostics if d.severity == "error"]
    assert any("(kernel.cu line 1)" in e for e in errors), errors
