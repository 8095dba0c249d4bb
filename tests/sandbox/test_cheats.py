"""Cheat checks that work on the CPU: cached results, patched clocks, changed global precision."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


@pytest.mark.slow
async def test_result_cached_by_input_address_is_flagged(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("address_cache"), affine, st("small"))
    assert ev.correct  # it is right on fresh inputs...
    assert ev.status == "flagged"  # ...but not when new data arrive at the same address
    assert any(f.startswith("stale_output") for f in ev.flags), ev.flags


async def test_patching_the_clock_is_flagged(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("patches_clock"), affine, st("small"))
    assert ev.status == "flagged"
    assert any("harness_tampered" in f and "time.perf_counter" in f for f in ev.flags), ev.flags
    assert any(f.startswith("tamper_suspect: line 5") for f in ev.flags), ev.flags


@pytest.mark.slow
async def test_changing_global_precision_is_flagged_and_undone(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("changes_precision"), affine, st("small"))
    assert ev.status == "flagged"
    assert any(f.startswith("precision_changed") and "default_dtype" in f for f in ev.flags), ev.flags
    # the next candidate runs with the defaults restored
    ok = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
    assert ok.status == "ok", ok.flags
