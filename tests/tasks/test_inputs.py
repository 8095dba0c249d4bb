"""Inputs: reproducible per seed, different across seeds, signed and varied; every dtype; degenerate rules."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch

from ksearch.gpu.inputs import (
    accepted_by,
    degenerate_outputs,
    integers,
    mask,
    poisoned,
    random_tensor,
    scalar,
    signed,
    torch_dtype,
)
from ksearch.gpu.task import TaskError, Tolerance
from ksearch.gpu.tasks import load_task

FIX = Path(__file__).parent / "fixtures" / "native"

DTYPES = ["float32", "float16", "bfloat16", "float8_e4m3fn", "float8_e5m2", "int32", "int64", "bool"]


def draw(seed: int, dtype: str) -> torch.Tensor:
    torch.manual_seed(seed)
    return random_tensor((64, 33), dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype_is_reproducible_and_seed_dependent(dtype: str) -> None:
    a, b, c = draw(1, dtype), draw(1, dtype), draw(2, dtype)
    assert a.dtype == torch_dtype(dtype) and a.shape == (64, 33)
    assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))  # bitwise, NaN-safe, fp8 too
    assert not torch.equal(a.view(torch.uint8), c.view(torch.uint8))


def test_signed_is_signed_varied_and_not_unit_uniform() -> None:
    scales = []
    for seed in range(6):
        torch.manual_seed(seed)
        x = signed(200_000)
        assert (x < 0).float().mean() > 0.2 and (x > 0).float().mean() > 0.2
        assert x.abs().max() > 4 * x.std()  # outliers present
        scales.append(float(x.std()))
    assert max(scales) / min(scales) > 1.3  # the scale differs from trial to trial


def test_integers_masks_scalars_and_bounds() -> None:
    torch.manual_seed(0)
    idx = integers(1000, high=7, low=2)
    assert idx.dtype == torch.int64 and int(idx.min()) >= 2 and int(idx.max()) < 7
    assert len(set(idx.tolist())) == 5
    bits = mask(1000, p=0.25)
    assert bits.dtype == torch.bool and 0.15 < bits.float().mean() < 0.35
    assert -3.0 <= scalar(-3.0, 3.0) < 3.0
    small = random_tensor((500,), "int32", low=-4, high=4)
    assert int(small.min()) >= -4 and int(small.max()) < 4 and int(small.min()) < 0
    with pytest.raises(TaskError, match="greater than low"):
        integers(3, high=1, low=1)


def test_fp8_values_stay_finite() -> None:
    torch.manual_seed(0)
    x = signed(10_000, dtype="float8_e4m3fn", scale=1000.0)
    assert torch.isfinite(x.float()).all()


def test_poisoned_outputs_and_dtype_names() -> None:
    assert torch.isnan(poisoned((2, 3), "bf16")).all()
    assert (poisoned(4, "int32") == torch.iinfo(torch.int32).min).all()
    assert torch_dtype("torch.float16") is torch.float16 and torch_dtype("fp32") is torch.float32
    with pytest.raises(TaskError, match="unknown dtype 'float4'; accepted: float32"):
        torch_dtype("float4")


def test_accepted_by_applies_atol_rtol_and_mismatch_ratio() -> None:
    exp = torch.ones(100)
    tol = Tolerance(atol={"float32": 0.0}, rtol={"float32": 0.01}, mismatch_ratio=0.05)
    near = exp.clone()
    near[:5] = 1.5
    assert accepted_by(near, exp, tol)
    near[:6] = 1.5
    assert not accepted_by(near, exp, tol)
    assert not accepted_by(torch.ones(10, 10), exp, tol)
    assert not accepted_by(torch.full((100,), float("nan")), exp, tol)


def test_loose_tolerance_is_flagged() -> None:
    warnings = degenerate_outputs(load_task(str(FIX / "loose_tolerance.py")))
    assert any("all zeros passes" in w for w in warnings), warnings
    assert any("a constant" in w for w in warnings)


def test_identity_rule_is_flagged(tmp_path: Path) -> None:
    path = tmp_path / "near_identity.py"
    path.write_text(
        textwrap.dedent("""
        import torch
        from ksearch.gpu.inputs import signed
        TOLERANCE = {"rtol": {"float32": 0.05}}
        class Model(torch.nn.Module):
            def forward(self, x):
                return x * 1.01
        def get_inputs():
            return [signed(16, 16)]
        def get_init_inputs():
            return []
    """)
    )
    warnings = degenerate_outputs(load_task(str(path)))
    assert len(warnings) == 1 and "input 0 itself passes" in warnings[0], warnings


def test_sound_rule_is_not_flagged() -> None:
    assert degenerate_outputs(load_task(str(FIX / "linear_relu.py"))) == []
