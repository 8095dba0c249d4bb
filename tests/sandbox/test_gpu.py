"""The sandbox on a real GPU: languages, correctness kinds, faults, cheat checks, ncu (marker `gpu`)."""

from __future__ import annotations

import pytest

from ksearch.gpu.timing.ncu import find_ncu

pytestmark = [pytest.mark.anyio, pytest.mark.gpu]


async def test_triton_candidate_on_the_gpu(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
    assert ev.status == "ok", ev.error
    t = ev.timings[0]
    assert t.device != "cpu-interpreter" and t.n >= 3 and t.host_median_us is not None
    assert t.eager_us and t.compile_us  # both baselines measured
    (k,) = [k for k in ev.compile.kernels if k.name == "_affine"]
    assert k.registers and k.num_warps


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("wrong_values", "wrong_values"),
        ("wrong_shape", "wrong_shape"),
        ("wrong_dtype", "wrong_dtype"),
        ("unwritten", "unwritten"),
        ("nan_output", "nan_inf"),
        ("input_mutated", "input_mutated"),
    ],
)
async def test_correctness_kinds_on_the_gpu(sandbox, affine, cand, st, name, kind) -> None:
    ev = await sandbox.correctness(cand(name), affine, st("small"))
    assert ev.status == "incorrect" and ev.correctness[0].kind == kind, ev.correctness[0].message


async def test_nvrtc_candidate(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("cuda_good", "cuda"), affine, st("small"))
    assert ev.status == "ok", ev.error
    assert any(k.name == "affine" and k.registers for k in ev.compile.kernels)


async def test_illegal_address_is_a_crash_and_the_pool_recovers(sandbox, affine, cand, st) -> None:
    ev = await sandbox.correctness(cand("gpu_illegal_address"), affine, st("small"))
    assert ev.status == "crash" and "illegal" in ev.error.lower()
    ok = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
    assert ok.status == "ok", ok.error


async def test_gpu_oom_is_reported_and_the_worker_survives(sandbox, affine, cand, st) -> None:
    # on a GPU each new candidate gets a fresh worker by default (tests/sandbox/test_fresh_per_candidate.py);
    # what is checked here is that an OOM alone does not cost the worker, so workers are shared for this test
    fresh, sandbox.fresh_per_candidate = sandbox.fresh_per_candidate, False
    try:
        # a first evaluation measures the baselines and ceilings in clean workers (restarts by design) and draws
        # the inputs ahead: after it, the worker that ran a candidate is the one the next candidates get
        first = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
        assert first.status == "ok", first.error
        pid = sandbox.pool.workers[0].hello["pid"]
        ev = await sandbox.correctness(cand("gpu_oom"), affine, st("small"))
        assert ev.status == "error" and "out of memory" in ev.error.lower()
        ok = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
        assert ok.status == "ok" and sandbox.pool.workers[0].hello["pid"] == pid  # no restart needed
    finally:
        sandbox.fresh_per_candidate = fresh


async def test_side_stream_work_is_flagged(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("gpu_side_stream"), affine, st("small"))
    assert ev.correct and ev.status == "flagged"
    assert any(f.startswith("host_clock_mismatch") for f in ev.flags), ev.flags


async def test_candidate_whose_own_kernel_never_runs_is_flagged(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("gpu_decoy_kernel"), affine, st("small"))
    assert ev.correct and ev.status == "flagged"
    assert any(f.startswith("no_custom_kernel") and "_affine" in f for f in ev.flags), ev.flags


@pytest.mark.skipif(find_ncu() is None, reason="Nsight Compute is not installed")
async def test_profile_with_ncu(sandbox, affine, cand) -> None:
    p = await sandbox.profile(cand("good_triton"), affine, "small")
    assert p.kernel.startswith("_affine") and p.duration_us and p.duration_us > 0
    assert p.registers_per_thread
