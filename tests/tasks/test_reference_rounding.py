"""The reference's own rounding error against its tolerance (gpu/tasks/rt/rounding.py): measured once with the
task's facts, on the smoke workload on the CPU, and said wherever a kernel writer reads the task."""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest
import torch

from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.facts import NEAR, RoundingProbe, task_facts
from ksearch.gpu.tasks.facts_text import rounding_text
from ksearch.gpu.tasks.rt.runtime import TaskRuntime

FIX = Path(__file__).parent / "fixtures"
CUSUM = FIX / "kernelbench" / "l1_cusum_long_rows.py"
SOFTMAX = FIX / "kernelbench" / "l1_softmax_rows.py"


@pytest.mark.slow
def test_a_cusum_over_long_rows_fails_its_own_tolerance() -> None:
    task = load_task(CUSUM)
    f = task_facts(task)
    r = f.rounding
    assert r is not None and r.verdict == "fails", r
    smoke = task.smoke()
    assert (r.workload, r.output, r.dtype) == (smoke.name, "out", "float32")
    atol, rtol = task.tolerance.for_dtype("float32")  # KernelBench's own rule: 1e-4 (with its slack)
    assert (r.atol, r.rtol, r.mismatch_ratio) == (atol, rtol, 0.0)
    # the same figures, computed here: the smoke inputs of seed 0, the reference, the float64 run by hand
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))  # the probe's, so its sums add the same way
    try:
        rt = TaskRuntime(task)
        (x,) = rt.make_inputs(smoke, 0, "cpu")
        got = rt.build_reference(smoke, "cpu")([x]).double()
    finally:
        torch.set_num_threads(before)
    wide = x.double()
    exact = torch.cumsum(wide - wide.mean(dim=1, keepdim=True), dim=1).float().double()
    diff = (exact - got).abs()
    over = int((diff > atol + rtol * got.abs()).sum())
    assert r.numel == x.numel() == 4 * 32768
    assert r.over == over and 0 < over < r.numel
    assert r.max_abs == pytest.approx(float(diff.max()), rel=1e-6) and r.max_abs > 5 * atol
    assert r.ratio > 1.0
    # said in the facts' text, which the analyse prompt and every phase prompt carry
    text = f.text()
    line = f.rounding_warning()
    assert line is not None and line in text
    assert line.startswith(
        f"the reference's own fp32 result differs from its float64 run by up to {r.max_abs:.2g}"
    )
    assert f"at {100 * over / r.numel:.0f}% of elements" in line and "atol 0.0001 + rtol 0.0001·|ref|" in line
    assert "only a kernel reproducing the reference's rounding" in line and "on the CPU" in line


@pytest.mark.slow
def test_a_softmax_over_long_rows_leaves_room() -> None:
    f = task_facts(load_task(SOFTMAX))
    r = f.rounding
    assert r is not None and r.verdict == "ok" and r.note == ""
    assert r.dtype == "float32" and r.numel > 0 and r.over == 0
    assert 0 < r.ratio < NEAR and r.max_abs < 1e-6
    assert f.rounding_warning() is None and "float64 run" not in f.text()


@pytest.mark.slow
def test_gpu_mode_tasks_are_judged_by_their_own_check_and_not_measured() -> None:
    r = task_facts(load_task(str(FIX / "gpumode" / "pairmix"))).rounding
    assert r is not None and r.verdict == "skipped" and r.numel == 0
    assert r.note == "not measured: the task's own check_implementation judges outputs, not a tolerance"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("forward", "why"),
    [
        # a fake quantization round trip: fp8 is no float64 run's to widen
        ("return x.to(torch.float8_e5m2).to(torch.float32) * 2", "_to_copy returns a lower precision"),
        # weights the forward makes in float32 from numpy: float64 data cannot meet them
        (
            "return x @ torch.from_numpy(np.ones((64, 8), dtype=np.float32))",
            "running the reference in float64 failed: RuntimeError",
        ),
    ],
)
def test_where_a_float64_run_is_impossible_it_is_skipped_with_a_note(
    tmp_path: Path, forward: str, why: str
) -> None:
    p = tmp_path / "narrow.py"
    p.write_text(
        textwrap.dedent(f"""
            import numpy as np
            import torch
            class Model(torch.nn.Module):
                def forward(self, x):
                    {forward}
            def get_inputs():
                return [torch.randn(32, 64)]
            def get_init_inputs():
                return []
        """)
    )
    f = task_facts(load_task(p))
    assert f.workload("default") is not None and f.workload("default").outputs  # type: ignore[union-attr]
    r = f.rounding
    assert r is not None and r.verdict == "skipped" and r.note.startswith("not measured: "), r
    assert why in r.note
    assert f.rounding_warning() is None


def test_the_texts_say_what_fails_and_what_comes_near() -> None:
    fails = RoundingProbe(
        verdict="fails", workload="smoke", output="out1", dtype="bfloat16", atol=0.01, rtol=0.01,
        mismatch_ratio=0.001, max_abs=0.25, over=30, numel=1000, ratio=1.6,
    )  # fmt: skip
    assert rounding_text(fails) == (
        "the reference's own bf16 result out1 differs from its float64 run by up to 0.25 (max abs), over atol "
        "0.01 + rtol 0.01·|ref| at 3% of elements, more than the 0.1% the rule allows (smoke workload 'smoke', "
        "on the CPU): only a kernel reproducing the reference's rounding (its order of operations, e.g. its "
        "summation order) passes"
    )
    near = fails.model_copy(update={"verdict": "near", "over": 0, "ratio": 0.73, "mismatch_ratio": 0.0})
    assert rounding_text(near) == (
        "the reference's own bf16 result out1 differs from its float64 run by up to 0.25 (max abs), within atol "
        "0.01 + rtol 0.01·|ref| but using 73% of it at its worst element (smoke workload 'smoke', on the CPU): "
        "a kernel that rounds otherwise (another summation order) may fail even where it is more accurate"
    )
    few = fails.model_copy(update={"over": 3, "numel": 100_000, "output": "out"})
    assert "result differs" in (rounding_text(few) or "") and "at 3 of 100000 elements" in (
        rounding_text(few) or ""
    )
    for quiet in ("ok", "skipped"):
        assert rounding_text(fails.model_copy(update={"verdict": quiet})) is None
