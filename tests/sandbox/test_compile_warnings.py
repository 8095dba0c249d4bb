"""Compile facts a kernel writer uses (issue 45): ptxas's warnings reach the compile report with their codes and the
kernel they concern, a spill figure says what it counts (ptxas's bytes per thread, static, not the run-time spill
requests a profiler counts), and a GPU MODE task whose inputs are made on CUDA is compiled for sm_90 on a machine
without a GPU, saying what was and was not done.

Real nvcc and real Triton (its bundled ptxas, in a CPU dry run); only the parser's unit cases read given text.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.gpu.build.compiler import StaticCompiler, find_nvcc, parse_nvcc_output, target_arch
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import Candidate

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]
needs_nvcc = pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")

PINNED = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "gpumode" / "cuda_pinned"
NEEDS = "this task needs one: reference.py line 13 puts tensors on CUDA"
SPILL_WORDS = "(ptxas, static; run-time spill traffic is profile_ncu's)"


def line_of(source: str, marker: str) -> int:
    hits = [i for i, ln in enumerate(source.splitlines(), 1) if marker in ln]
    assert len(hits) == 1, marker
    return hits[0]


@pytest.fixture(scope="module")
def pinned() -> Task:
    task = load_task(str(PINNED))
    assert task.extras.get("needs_gpu")  # its generator makes the data on CUDA
    return task


@pytest.fixture(scope="module")
async def nogpu(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("warn"), cpu_mode=True, dryrun_timeout_s=60.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


# ------------------------------------------------------------------------------------------ the parser


def test_every_ptxas_warning_is_kept_with_its_code_and_kernel_once() -> None:
    # ptxas 13 prints its coded messages at info level, ptxas 12 some of them as warnings; both are warnings here
    out = """ptxas info    : (C7519) warpgroup.arrive is injected in around line 52 by compiler to allow use of registers in GMMA in function '_Z2wgPf'
ptxas info    : (C7519) warpgroup.arrive is injected in around line 75 by compiler to allow use of registers in GMMA in function '_Z2wgPf'
ptxas warning : (C7515) Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma instructions defining input registers of a wgmma between start and end of the pipeline stage in the function '_Z2wgPf'
ptxas warning : Registers are spilled to local memory in function '_Z2wgPf', 8 bytes spill stores, 8 bytes spill loads
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z2wgPf' for 'sm_90a'
ptxas info    : Function properties for _Z2wgPf
    8 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 8 bytes cumulative stack size
ptxas info    : Compile time = 12.391 ms
"""
    diags, kernels = parse_nvcc_output(out, "unit0.cu")
    assert [(d["severity"], d["message"], d["kernel"]) for d in diags] == [
        (
            "warning",
            "ptxas C7519: warpgroup.arrive is injected by compiler to allow use of registers in GMMA in function "
            "'wg' (2 places)",
            "wg",
        ),
        (
            "warning",
            "ptxas C7515: Potential Performance Loss: wgmma.mma_async instructions are serialized due to non wgmma "
            "instructions defining input registers of a wgmma between start and end of the pipeline stage in the "
            "function 'wg'",
            "wg",
        ),
        (
            "warning",
            "ptxas: Registers are spilled to local memory in function 'wg', 8 bytes spill stores, 8 bytes spill loads",
            "wg",
        ),
    ]
    assert [(k["name"], k["registers"], k["spill_stores_bytes"]) for k in kernels] == [("wg", 168, 8)]


def test_a_ptxas_error_on_a_ptx_line_is_an_error_once_with_what_to_do() -> None:
    out = "\n".join(
        f"ptxas /tmp/tmpxft_1-6_unit0.ptx, line {n}; error   : Instruction 'wgmma.fence' not supported on "
        ".target 'sm_90'"
        for n in (30, 60)
    )
    out += "\nptxas fatal   : Ptx assembly aborted due to errors\n"
    diags, _ = parse_nvcc_output(out, "unit0.cu")
    assert [(d["severity"], d["message"]) for d in diags] == [
        (
            "error",
            "ptxas: Instruction 'wgmma.fence' not supported on .target 'sm_90' (compile for sm_90a for it: "
            "options=['-arch=sm_90a']) (2 places)",
        ),
        ("error", "ptxas: Ptx assembly aborted due to errors"),
    ]


def test_many_distinct_ptxas_messages_are_bounded() -> None:
    out = "\n".join(f"ptxas warning : (C75{i:02d}) message {i} in function 'k'" for i in range(30))
    diags, _ = parse_nvcc_output(out, "unit0.cu")
    assert len(diags) == 13 and diags[-1]["message"].startswith("ptxas: 18 more distinct message(s)")
    long = "ptxas warning : (C7515) " + "x" * 2000
    [d] = parse_nvcc_output(long, "unit0.cu")[0]
    assert len(d["message"]) == 400


def test_a_candidates_architecture_specific_target_is_honoured() -> None:
    assert target_arch(["-arch=sm_90a"], "sm_90") == ("sm_90a", {"-arch=sm_90a"})
    assert target_arch(["--gpu-architecture", "compute_90a", "-O3"], "sm_90")[0] == "sm_90a"
    assert target_arch(["-gencode", "arch=compute_90a,code=sm_90a"], "sm_90")[0] == "sm_90a"
    # another GPU's architecture, or none: the machine's own
    assert target_arch(["-gencode=arch=compute_100a,code=sm_100a"], "sm_90") == ("sm_90", set())
    assert target_arch(["-arch=sm_90"], "sm_90") == ("sm_90", set())
    assert target_arch(["-DARCH=sm_90a"], "sm_90") == ("sm_90", set())  # not an architecture option


# ------------------------------------------------------------------------------------------ real nvcc


@needs_nvcc
async def test_nvcc_ptxas_warnings_reach_the_report_with_code_kernel_and_line(tmp_path: Path, cand) -> None:
    c = cand("gpumode_cuda_wgmma", "cuda")
    r = await StaticCompiler(tmp_path).compile(c, ("custom_kernel",))
    assert r.ok, r.diagnostics
    assert "nvcc -arch=sm_90a" in r.mode  # the candidate's own -arch=sm_90a: wgmma exists only there
    assert not any("-arch=sm_90a" in d.message for d in r.diagnostics)  # honoured, not "compiled without it"
    warned = [d for d in r.diagnostics if d.severity == "warning" and d.message.startswith("ptxas C75")]
    assert any(
        d.message.startswith(
            "ptxas C7511: Potential Performance Loss: wgmma.mma_async instructions are serialized"
        )
        for d in warned
    ), r.diagnostics
    kernel_line = line_of(c.source, "__global__ void wg(")
    assert {(d.kernel, d.line) for d in warned} == {("wg", kernel_line)}
    assert len({d.message for d in warned}) == len(warned)  # each once
    # without its -arch the same source does not assemble, and the error says what to pass
    plain = cand(c.source.replace('options=["-arch=sm_90a"]', "options=[]"), "cuda")
    bad = await StaticCompiler(tmp_path).compile(plain, ("custom_kernel",))
    assert not bad.ok
    assert any(
        "not supported on .target 'sm_90' (compile for sm_90a for it: options=['-arch=sm_90a'])" in d.message
        for d in bad.diagnostics
        if d.severity == "error"
    ), bad.diagnostics


HEAVY = r'''import torch

from ksearch.gpu import nvrtc

SRC = r"""
extern "C" __global__ void __launch_bounds__(1024, 2) heavy(const float* x, float* y, int n) {
    float acc[64];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < 64; ++k) acc[k] = x[(i + k * 131) % n];
    float s = 0.f;
    for (int r = 0; r < 8; ++r) {
        #pragma unroll
        for (int k = 0; k < 64; ++k) s += acc[k] * acc[(k + r) & 63];
    }
    y[i] = s;
}
"""

KERNEL = nvrtc.compile(SRC, "heavy")


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


@needs_nvcc
async def test_a_spill_figure_says_it_is_ptxas_static_bytes_per_thread(tmp_path: Path) -> None:
    r = await StaticCompiler(tmp_path).compile(Candidate.of(HEAVY, "cuda"))
    assert r.ok, r.diagnostics
    [k] = r.kernels
    assert k.spill_stores_bytes and k.spill_loads_bytes  # 1024 threads x 2 blocks leave 32 registers a thread
    [note] = [d for d in r.diagnostics if d.kernel == "heavy" and d.severity == "note"]
    said = (
        f"SPILLS {k.spill_stores_bytes} B per thread stored, {k.spill_loads_bytes} B loaded {SPILL_WORDS}, "
        f"{k.stack_bytes} B stack frame per thread (local memory: spilled registers and local arrays)"
    )
    assert said in note.message, note.message


# ------------------------------------------------------------------------------------------ a GPU MODE task, no GPU


async def test_a_gpu_mode_task_is_compiled_for_sm_90_without_a_gpu(
    nogpu: LocalSandbox, pinned: Task, cand
) -> None:
    c = cand("gpumode_triton_double")
    r = await nogpu.compile(c, pinned)
    assert r.ok and r.verdict() == "ok" and r.unchecked == "", r.diagnostics
    assert r.mode.startswith(
        f"compiled for sm_90 without running; correctness and timing need a GPU ({NEEDS}"
    )
    assert "sm_90 cubin" in r.mode and "with the task's CUDA placements read as the CPU's" in r.mode
    [k] = r.kernels
    assert k.name == "_double" and k.registers and k.num_warps == 4 and k.occupancy is not None
    assert "grid (1,)" in (k.config or "")  # launched on the smoke data, 128 elements
    assert any(
        d.message.startswith(
            "compiled for sm_90 without running: _double; not done: correctness and timing need a GPU"
        )
        for d in r.diagnostics
    ), r.diagnostics
    assert not any("not compiled" in d.message for d in r.diagnostics)


async def test_a_gpu_mode_cuda_candidate_is_compiled_with_its_ptxas_warnings(
    nogpu: LocalSandbox, pinned: Task, cand
) -> None:
    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    c = cand("gpumode_cuda_wgmma", "cuda")
    r = await nogpu.compile(c, pinned)
    assert r.ok and r.verdict() == "ok", r.diagnostics
    assert r.mode.startswith("compiled for sm_90 without running") and "nvcc -arch=sm_90a" in r.mode
    [k] = r.kernels
    assert k.name == "wg" and k.threads_per_block == 128  # the launch the dry run recorded
    assert any(d.kernel == "wg" and d.message.startswith("ptxas C7511: ") for d in r.diagnostics)


@pytest.mark.slow
async def test_tritons_ptxas_warning_comes_with_its_code_and_kernel(
    nogpu: LocalSandbox, pinned: Task, cand
) -> None:
    c = cand("gpumode_triton_serialized")
    r = await nogpu.compile(c, pinned)
    assert r.ok, r.diagnostics
    [warn] = [d for d in r.diagnostics if d.severity == "warning" and d.message.startswith("ptxas")]
    assert warn.message.startswith(
        "ptxas C7511: Potential Performance Loss: wgmma.mma_async instructions are serialized due to insufficient "
        "register resources for the wgmma pipeline in the function '_mm'"
    )
    assert not re.search(r"\bline \d", warn.message)  # a line of Triton's PTX says nothing to its author
    assert (warn.kernel, warn.line) == ("_mm", line_of(c.source, "def _mm("))
    [k] = r.kernels
    assert k.spill_stores_bytes and k.registers == 255
    note = next(d for d in r.diagnostics if d.kernel == "_mm" and d.severity == "note")
    assert re.search(r"SPILLS \d+ B per thread stored, \d+ B loaded " + re.escape(SPILL_WORDS), note.message)


async def test_a_candidate_with_no_kernel_for_a_gpu_mode_task_says_nothing_was_compiled(
    nogpu: LocalSandbox, pinned: Task, cand
) -> None:
    r = await nogpu.compile(cand("def custom_kernel(data):\n    return data * 2\n"), pinned)
    assert r.verdict() == "not checked" and r.kernels == []
    assert "launched no Triton kernel, so none was compiled" in r.unchecked
    assert (
        r.mode
        == f"python/AST checks only; nothing compiled for sm_90; correctness and timing need a GPU ({NEEDS}: device='cuda')"
    )
