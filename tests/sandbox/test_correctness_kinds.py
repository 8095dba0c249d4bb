"""Each way a candidate can be wrong is reported as that kind, with where and by how much."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def _check(sandbox, affine, cand, st, name):
    ev = await sandbox.correctness(cand(name), affine, st("small"))
    assert len(ev.correctness) == 1
    return ev, ev.correctness[0]


@pytest.mark.slow
async def test_wrong_values(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "wrong_values")
    assert ev.status == "incorrect" and not c.passed and c.kind == "wrong_values"
    assert c.max_abs_err == pytest.approx(0.5, rel=1e-3)
    assert c.mismatches == c.numel == 32 * 96
    assert c.first_mismatch_index == [0, 0]
    assert c.got_at_first == pytest.approx(c.expected_at_first + 0.5, abs=1e-4)
    assert c.caught_by == "tolerance"
    assert c.trials == 1  # stops at the first failing trial
    assert "wrong_values" in ev.error


async def test_wrong_shape(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "wrong_shape")
    assert ev.status == "incorrect" and c.kind == "wrong_shape"
    assert "(32, 95)" in c.message and "(32, 96)" in c.message


async def test_wrong_dtype(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "wrong_dtype")
    assert ev.status == "incorrect" and c.kind == "wrong_dtype"
    assert "float64" in c.message and "float32" in c.message


async def test_unwritten_output(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "unwritten")
    assert ev.status == "incorrect" and c.kind == "unwritten", c.message
    assert "never written" in c.message
    assert c.mismatches == 32 * 96 // 2  # exactly the forgotten half
    assert c.first_mismatch_index == [16, 0]
    assert c.caught_by == "poison_unwritten"


async def test_computed_nan_is_not_called_unwritten(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "nan_output")
    assert ev.status == "incorrect" and c.kind == "nan_inf", c.message
    assert c.mismatches == len([i for i in range(32 * 96) if i % 7 == 3])
    assert c.first_mismatch_index == [0, 3]
    assert c.caught_by == "nonfinite"  # the same NaNs under a finite poison: not the poison's doing


ALIASED_EMPTY = """
import torch
import triton
import triton.language as tl
from torch import empty_like as alloc  # bound at import, past the harness's patched torch.empty_like


@triton.jit
def _affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n // 2  # forgets the second half of the output
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = alloc(x)
        _affine[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y
"""


async def test_an_allocator_alias_taken_at_import_is_poisoned_too(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, ALIASED_EMPTY)
    assert ev.status == "incorrect" and c.kind == "unwritten", c.message
    assert c.caught_by == "poison_unwritten" and c.mismatches == 32 * 96 // 2


READS_ITS_OUTPUT = """
import torch
import triton
import triton.language as tl


@triton.jit
def _affine(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    prior = tl.load(y_ptr + offs, mask=mask)  # the fresh output's memory, never initialised
    tl.store(y_ptr + offs, prior + tl.load(x_ptr + offs, mask=mask) * 2.0 + 1.0, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        _affine[(triton.cdiv(x.numel(), 64),)](x, y, x.numel(), BLOCK=64)
        return y
"""


async def test_reading_uninitialised_memory_is_told_by_the_poison(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, READS_ITS_OUTPUT)
    assert ev.status == "incorrect" and c.kind == "nan_inf", c.message
    assert c.caught_by == "poison_read" and c.mismatches == 32 * 96
    assert "never initialised" in c.message


async def test_input_mutation(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "input_mutated")
    assert ev.status == "incorrect" and c.kind == "input_mutated"
    assert "input 0" in c.message and "overwritten" in c.message


async def test_exception_names_the_candidate_line(sandbox, affine, cand, st) -> None:
    ev, c = await _check(sandbox, affine, cand, st, "raises")
    assert ev.status == "error" and c.kind == "exception"
    assert (
        "RuntimeError" in c.message and "line 5 in helper" in c.message and "line 10 in forward" in c.message
    )
    assert "worker_state" not in c.message  # only the candidate's own frames


async def test_missing_model_new_is_a_compile_error(sandbox, affine, cand, st) -> None:
    ev = await sandbox.correctness(
        cand("import torch\n\nclass Model2(torch.nn.Module):\n    pass\n"), affine, st("small")
    )
    assert ev.status == "compile_error"
    assert "ModelNew" in ev.error
