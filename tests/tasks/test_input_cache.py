"""Slow draws are kept per (workload, seed) and served bit for bit, leaving the generators as a fresh draw
would; a kept draw that was written into is never served; quick draws are not kept."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import torch

from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.draws.input_cache import InputCache
from ksearch.gpu.tasks.rt.runtime import TaskRuntime

SCALAR_SUM = Path(__file__).parent / "fixtures" / "gpumode" / "scalar_sum"


def _draw(calls: list[int], seed: int) -> dict[str, torch.Tensor]:
    calls.append(seed)
    torch.manual_seed(seed)
    np.random.seed(seed)
    random.seed(seed)
    return {"x": torch.randn(1000), "n": torch.randint(0, 9, (7,))}


def test_a_kept_draw_is_served_bit_for_bit_with_the_generators_as_after_a_fresh_draw() -> None:
    cache, calls = InputCache(min_draw_s=0.0), []
    first = cache.get(("w", 3), lambda: _draw(calls, 3), "cpu")
    after_fresh = (torch.rand(3), np.random.rand(), random.random())
    torch.manual_seed(99)  # anything may run between two requests
    again = cache.get(("w", 3), lambda: _draw(calls, 3), "cpu")
    assert calls == [3] and cache.hits == 1
    assert torch.equal(first["x"], again["x"]) and torch.equal(first["n"], again["n"])
    assert again["x"].data_ptr() != first["x"].data_ptr()  # a copy: a caller's writes stay its own
    after_hit = (torch.rand(3), np.random.rand(), random.random())
    assert torch.equal(after_fresh[0], after_hit[0]) and after_fresh[1:] == after_hit[1:]
    cache.get(("w", 4), lambda: _draw(calls, 4), "cpu")
    assert calls == [3, 4]


def test_a_kept_draw_that_was_written_into_is_drawn_again() -> None:
    cache, calls = InputCache(min_draw_s=0.0), []
    cache.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    kept = next(iter(cache._kept.values()))
    kept.data["x"][5] += 1.0  # what a hostile candidate in the same process might do
    got = cache.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    assert calls == [1, 1] and cache.hits == 0
    assert torch.equal(got["x"], _draw([], 1)["x"])


def test_quick_draws_are_not_kept_and_the_budget_holds() -> None:
    quick, calls = InputCache(), []  # the default threshold: a 1000-element draw is far below it
    quick.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    quick.get(("w", 1), lambda: _draw(calls, 1), "cpu")
    assert calls == [1, 1] and not quick._kept
    small = InputCache(budget_bytes=10_000, min_draw_s=0.0)  # one draw is 4056 bytes: two fit, not three
    for seed in (1, 2, 3):
        small.get(("w", seed), lambda s=seed: _draw(calls, s), "cpu")  # type: ignore[misc]
    assert [k[1] for k in small._kept] == [2, 3]


def test_a_gpumode_runtime_draws_each_workload_and_seed_once_when_slow() -> None:
    task = load_task(str(SCALAR_SUM))
    rt = TaskRuntime(task)
    impl = rt._impl
    impl.inputs = InputCache(min_draw_s=0.0)
    wl = task.workloads[0]
    a = rt.make_inputs(wl, 5, "cpu")
    b = rt.make_inputs(wl, 5, "cpu")
    c = rt.make_inputs(wl, 6, "cpu")
    assert impl.inputs.hits == 1
    (xa, *_), (xb, *_), (xc, *_) = a[0], b[0], c[0]  # the data: (input tensor, output buffer)
    assert torch.equal(xa, xb) and not torch.equal(xa, xc)
    assert len(impl.inputs._kept) == 2


def test_a_draw_asked_for_once_is_not_kept_but_a_kept_one_still_serves_it() -> None:
    """A GPU MODE final evaluation draws fresh data for every timed call, each asked for once in its process:
    keeping a slow one costs a host copy and a checksum of data nothing asks for again."""
    task = load_task(str(SCALAR_SUM))
    rt = TaskRuntime(task)
    impl = rt._impl
    impl.inputs = InputCache(min_draw_s=0.0)
    wl = task.workloads[0]
    once = rt.make_inputs(wl, 7, "cpu", once=True)
    assert not impl.inputs._kept and impl.inputs.hits == 0
    kept = rt.make_inputs(wl, 8, "cpu")
    again = rt.make_inputs(wl, 8, "cpu", once=True)
    assert impl.inputs.hits == 1 and torch.equal(kept[0][0], again[0][0])
    assert torch.equal(once[0][0], rt.make_inputs(wl, 7, "cpu")[0][0])  # the same values either way
