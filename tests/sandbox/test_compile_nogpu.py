"""compile_kernel without a GPU: Triton kernels compiled for sm_90 from a CPU dry run, occupancy per kernel.

Real Triton (its bundled ptxas) and real nvcc: nothing here is mocked.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from ksearch.gpu.build.compiler import find_nvcc, kernel_definition
from ksearch.gpu.build.occupancy import annotate, occupancy
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.tasks import load_task
from ksearch.worldmodel.models import KernelResources

pytestmark = pytest.mark.anyio
SOFTMAX = Path(__file__).resolve().parents[2] / "gpu" / "tasks" / "builtin" / "softmax"


def line_of(source: str, marker: str) -> int:
    hits = [i for i, ln in enumerate(source.splitlines(), 1) if marker in ln]
    assert len(hits) == 1, marker
    return hits[0]


@pytest.fixture(scope="module")
async def nogpu(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("nogpu"), cpu_mode=True, dryrun_timeout_s=60.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


# ------------------------------------------------------------------------------------------ occupancy


def test_occupancy_follows_the_calculator_on_sm_90() -> None:
    o = occupancy("sm_90", 64, 0, 256)  # 64 registers: 2048 per warp, 8 warps per sub-partition
    assert o is not None
    assert (o.blocks_per_sm, o.warps_per_sm, o.occupancy, o.limiter) == (4, 32, 0.5, "registers")
    o = occupancy("sm_90", 32, 100 * 1024, 128)  # 100 KiB + 1 KiB reserved: two blocks in 228 KiB
    assert o is not None and (o.blocks_per_sm, o.limiter) == (2, "shared memory")
    o = occupancy("sm_90", 16, 0, 32)  # tiny blocks: the 32-blocks cap binds
    assert o is not None and (o.blocks_per_sm, o.warps_per_sm, o.limiter) == (32, 32, "blocks")
    o = occupancy("sm_90", 16, 0, 1024)
    assert o is not None and (o.blocks_per_sm, o.warps_per_sm, o.limiter) == (2, 64, "warps")
    assert occupancy("sm_90a", 16, 0, 128) == occupancy("sm_90", 16, 0, 128).model_copy(  # type: ignore[union-attr]
        update={"arch": "sm_90a"}
    )
    assert occupancy("sm_70", 16, 0, 128) is None  # an arch it has no table for: no guess
    assert occupancy("sm_90", None, 0, 128) is None


def test_a_block_that_cannot_be_resident_is_an_error() -> None:
    too_many_regs = occupancy("sm_90", 255, 0, 1024)  # 255 x 1024 > the 64 K registers of a block
    assert (
        too_many_regs is not None
        and too_many_regs.blocks_per_sm == 0
        and "registers" in too_many_regs.limiter
    )
    k, diags = annotate(
        KernelResources(name="k", registers=32, shared_bytes=240 * 1024, num_warps=4), "sm_90"
    )
    assert k.occupancy is not None and k.occupancy.blocks_per_sm == 0 and k.threads_per_block == 128
    assert [d.severity for d in diags] == ["error"] and "launch fails" in diags[0].message


def test_launch_bounds_are_read_from_the_definition() -> None:
    src = (
        "__device__ int f(int x) { return x; }\n\n__global__ void __launch_bounds__(256, 2)\nk(float* y) {}\n"
    )
    assert kernel_definition(src, "k") == (3, 256)
    assert kernel_definition('extern "C" __global__ void k(float* y) {}', "k") == (1, None)
    assert kernel_definition("void k(float* y) {}", "k") == (None, None)  # not a kernel


# ------------------------------------------------------------------------------------------ Triton, no GPU


@pytest.mark.slow
async def test_triton_softmax_compiles_for_sm_90_without_a_gpu(nogpu, cand) -> None:
    task = load_task("softmax")
    c = cand((SOFTMAX / "seed_triton.py").read_text())
    t0 = time.perf_counter()
    r = await nogpu.compile(c, task)
    assert r.ok, r.diagnostics
    assert "sm_90 cubin" in r.mode and "no GPU: compiled, not run" in r.mode and "'smoke'" in r.mode
    import triton

    assert any(
        f"what Triton {triton.__version__} on this machine compiles for sm_90 without a GPU" in d.message
        for d in r.diagnostics
    ), r.diagnostics  # another Triton (the GPU machine's) can count otherwise: said
    (k,) = r.kernels
    assert k.name == "_softmax_rows"
    assert k.registers is not None and 16 <= k.registers <= 255  # ptxas's own count, not a default
    assert k.spill_stores_bytes == 0 and k.spill_loads_bytes == 0
    assert (k.num_warps, k.num_stages, k.threads_per_block) == (8, 3, 256)  # the seed's num_warps=8
    assert k.shared_bytes is not None and k.config is not None and "BLOCK_N=2048" in k.config
    assert k.occupancy == occupancy("sm_90", k.registers, k.shared_bytes, 256)
    note = next(d for d in r.diagnostics if d.kernel == "_softmax_rows")
    assert note.line == line_of(c.source, "def _softmax_rows") and "occupancy" in note.message
    assert not any("known after their first launch" in d.message for d in r.diagnostics)
    # the same source again: Triton's cache answers, ptxas is re-run for the report, same numbers
    again = await nogpu.compile(c, task)
    assert again.kernels == r.kernels
    assert time.perf_counter() - t0 < 120


@pytest.mark.slow
async def test_triton_compile_error_points_at_the_device_functions_line(nogpu, affine, cand) -> None:
    c = cand("triton_nested_error")
    r = await nogpu.compile(c, affine)
    assert not r.ok
    err = next(d for d in r.diagnostics if d.severity == "error")
    assert err.line == line_of(c.source, "# ERR") and "power of 2" in err.message
    assert any(d.line == line_of(c.source, "# CALL") and "called from" in d.message for d in r.diagnostics)
    assert "Traceback" not in " ".join(d.message for d in r.diagnostics)


async def test_every_autotune_config_is_compiled(nogpu, affine, cand) -> None:
    r = await nogpu.compile(cand("triton_autotuned"), affine)
    assert r.ok, r.diagnostics
    by_warps = {k.num_warps: k for k in r.kernels}
    assert sorted(by_warps) == [4, 8]
    small, big = by_warps[4], by_warps[8]
    assert (small.num_stages, big.num_stages) == (2, 4)
    assert "BM=32" in (small.config or "") and "BM=64" in (big.config or "")
    assert small.shared_bytes and big.shared_bytes and big.shared_bytes > small.shared_bytes  # tl.dot tiles
    assert all(k.occupancy is not None for k in r.kernels)


@pytest.mark.slow
async def test_spills_are_reported(nogpu, affine, cand) -> None:
    r = await nogpu.compile(cand("triton_spills"), affine)
    assert r.ok, r.diagnostics
    (k,) = r.kernels
    assert k.num_warps == 1 and k.spill_stores_bytes and k.spill_stores_bytes > 0
    note = next(d for d in r.diagnostics if d.kernel == "_wide")
    assert "SPILLS" in note.message


async def test_host_failure_after_a_launch_keeps_the_launched_kernel(nogpu, affine, cand) -> None:
    c = cand("triton_host_fails")
    r = await nogpu.compile(c, affine)
    warn = next(d for d in r.diagnostics if d.severity == "warning" and "dry run" in d.message)
    assert warn.line == line_of(c.source, "# HOST") and "boom after the launch" in warn.message
    assert [k.name for k in r.kernels] == ["_affine"] and r.kernels[0].registers


@pytest.mark.slow
async def test_a_hanging_dry_run_is_cut_short_with_its_line(tmp_path_factory, affine, cand) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("dryhang"), cpu_mode=True, dryrun_timeout_s=8.0)
    try:
        c = cand("hangs")
        t0 = time.perf_counter()
        r = await sb.compile(c, affine)
        assert time.perf_counter() - t0 < 8.0 + 30.0 + 60.0  # budget, slack, and the worker's start
    finally:
        await asyncio.wait_for(sb.close(), 120)
    warn = next(d for d in r.diagnostics if "did not finish" in d.message)
    assert warn.severity == "warning" and warn.line == line_of(c.source, "while True")


# ------------------------------------------------------------------------------------------ CUDA


@pytest.mark.skipif(find_nvcc() is None, reason="nvcc is not installed")
async def test_cuda_occupancy_uses_the_launched_block_size(nogpu, cand) -> None:
    task = load_task("softmax")
    c = cand((SOFTMAX / "seed_cuda.py").read_text(), "cuda")
    r = await nogpu.compile(c, task)
    assert r.ok, r.diagnostics
    (k,) = r.kernels
    assert k.name == "softmax_rows" and k.threads_per_block == 512  # THREADS = 512 in the seed
    assert k.shared_bytes == 4 * 512  # its dynamic shared memory, passed at launch
    assert k.occupancy == occupancy("sm_90", k.registers, 2048, 512)
    assert "block sizes from a CPU dry run" in r.mode
    notes = [d for d in r.diagnostics if d.kernel == "softmax_rows"]
    assert len(notes) == 1 and "block (512, 1, 1)" in notes[0].message
    assert notes[0].line == line_of(c.source, "__global__ void softmax_rows")
