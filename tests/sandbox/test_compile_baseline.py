"""The torch.compile baseline is what a user gets by compiling for that one shape: static (dynamic=False),
a fresh compile per workload, its mode recorded and part of the cache key.

Real torch.compile (inductor on the CPU) throughout; the GPU is not needed to see how dynamo compiles."""

from __future__ import annotations

import json
import logging
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import torch
from torch._dynamo.utils import get_compilation_metrics

from ksearch.gpu.sandbox.local import BASELINE_VERSION, LocalSandbox
from ksearch.gpu.task import Task
from ksearch.gpu.worker.state import WorkerState
from ksearch.tools.common import summarize
from ksearch.worldmodel.models import Environment, EvalSettings, Evaluation, WorkloadTiming

# dynamo logs every symbolic size it creates here: a dim marked dynamic is a `create_symbol` for an input
SYMBOLS_LOG = "torch.fx.experimental.symbolic_shapes"


@contextmanager
def symbols_created() -> Iterator[list[str]]:
    """The sizes dynamo made symbolic (dynamic) while the block ran, one message each."""
    found: list[str] = []

    class Catch(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            msg = record.getMessage()
            if msg.startswith("create_symbol") and "size()" in msg:
                found.append(msg[:160])

    logger = logging.getLogger(SYMBOLS_LOG)
    handler, level = Catch(level=logging.INFO), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield found
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)


def _settings(workload: str, mode: str = "default") -> dict[str, Any]:
    return EvalSettings(
        seed=3, workloads=[workload], input_sets=1, min_reps=1, max_reps=2, compile_mode=mode
    ).model_dump()  # type: ignore[arg-type]


@pytest.mark.slow
def test_each_workload_gets_its_own_static_compile(
    affine: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With profile-guided dynamism on (a compile job id turns it on), dynamo remembers which sizes changed in
    # earlier compiles of the same code and starts the next compile dynamic, after a reset as in a fresh
    # process: only dynamic=False keeps a compile static then. Without the reset, each workload after the
    # first would be a recompile of the previous one's code. Either omission fails below.
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    with torch.compiler.config.patch(job_id=f"ksearch-test-{secrets.token_hex(4)}"):
        _own_static_compiles(affine)


def _own_static_compiles(affine: Task) -> None:
    state = WorkerState(torch.device("cpu"), {})
    state.set_task({"task": json.loads(affine.model_dump_json())})
    small, smoke = affine.workload("small"), affine.workload("smoke")
    assert small.params != smoke.params  # two shapes: (32, 96) and (8, 40)

    # The detector, shown to work: one plain compile fed both shapes makes the second one's sizes symbolic
    # (what the baseline did before). A detector that saw nothing here would prove nothing below.
    torch._dynamo.reset()
    shared = torch.compile(state.rt.build_reference(small, "cpu"))
    with symbols_created() as control:
        shared(state.rt.make_inputs(small, 1, "cpu"))
        shared(state.rt.make_inputs(smoke, 1, "cpu"))
    assert control, "dynamo made no size symbolic for a plain compile fed two shapes: the detector is blind"

    compiled: dict[str, Any] = {}
    with symbols_created() as made_dynamic:
        for wl in (small, smoke):
            before = len(get_compilation_metrics())
            out = state.benchmark({"workload": wl.name, "settings": _settings(wl.name), "which": "compile"})
            assert out["compile_mode"] == "default" and out["median_us"] > 0
            compiled[wl.name] = state._compiled_refs[(wl.name, "default")]
            fresh = get_compilation_metrics()[before:]
            # its own compile, the first of the process as far as dynamo knows: not a recompile of another
            # workload's graph (whose guards would have failed on the new shape)
            assert fresh and all(m.recompile_reason is None for m in fresh), [
                m.recompile_reason for m in fresh
            ]
    assert made_dynamic == []
    assert compiled["small"] is not compiled["smoke"]
    # another mode is another compile, and the timing says which
    out = state.benchmark(
        {"workload": "smoke", "settings": _settings("smoke", "max-autotune"), "which": "compile"}
    )
    assert out["compile_mode"] == "max-autotune" and ("smoke", "max-autotune") in state._compiled_refs


@pytest.mark.anyio
async def test_the_cache_key_names_the_mode_and_the_eager_key_does_not(tmp_path: Any, affine: Task) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, cpu_mode=True)
    env = Environment(device="NVIDIA H200", cpu_mode=False, torch="2.11")
    plain = EvalSettings(seed=1)
    tuned = EvalSettings(seed=1, compile_mode="max-autotune")
    try:
        key = sb._baseline_key
        assert key(affine, "small", "compile", env, plain) != key(affine, "small", "compile", env, tuned)
        assert "max-autotune" in key(affine, "small", "compile", env, tuned)
        assert key(affine, "small", "eager", env, plain) == key(affine, "small", "eager", env, tuned)
        # entries from before the baseline was compiled per shape are never read again
        for kind in ("eager", "compile"):
            assert key(affine, "small", kind, env, plain).startswith(f"baseline:{BASELINE_VERSION}:")
        assert BASELINE_VERSION != "v2"
    finally:
        await sb.close()


@pytest.mark.anyio
@pytest.mark.slow
async def test_the_baseline_process_compiles_per_workload_and_the_summary_names_the_mode(
    tmp_path: Any, affine: Task, cand: Any, st: Any
) -> None:
    """Through the sandbox: the clean baseline process measures a compiled reference for each workload, each
    timing says how it was compiled, and the result is cached under its mode (no second baseline process)."""
    sb = LocalSandbox(
        scratch_dir=tmp_path, n_workers=1, call_timeout_s=120.0, clean_baselines=True, compile_baseline=True
    )
    w = sb.pool.workers[0]
    try:
        ev = await sb.evaluate(cand("good_triton"), affine, st("small", "smoke"))
        assert ev.status == "ok", ev.error
        assert [t.workload for t in ev.timings] == ["small", "smoke"]
        for t in ev.timings:
            assert t.compile_us is not None and t.compile_mode == "default", t
        text = summarize(ev)
        # on the CPU no ratio is stated, but each line still names how its baseline was compiled
        assert text.count("torch.compile (static, per shape; ") == 2, text
        env = await sb._environment()
        for wl in ("small", "smoke"):
            key = sb._baseline_key(affine, wl, "compile", env, st(wl))
            assert (
                "compile[default]" in key and (await sb.cache.get(key) or {}).get("compile_mode") == "default"
            )
        starts = w.starts
        again = await sb.evaluate(cand("good_triton"), affine, st("smoke"))
        assert w.starts == starts and again.timings[0].compile_us == ev.timings[1].compile_us
    finally:
        await sb.close()


def test_the_summary_names_the_mode_of_each_baseline() -> None:
    def timing(mode: str | None) -> WorkloadTiming:
        return WorkloadTiming(
            workload="w", device="NVIDIA H200", median_us=100.0, iqr_us=1.0, ci_low_us=99.0, ci_high_us=101.0,
            n=50, compile_us=120.0, speedup_vs_compile=1.2, compile_mode=mode,
        )  # fmt: skip

    lines = summarize(Evaluation(status="ok", timings=[timing("max-autotune"), timing(None)])).splitlines()
    assert lines[1].startswith("timed: ksearch (")  # the protocol, named once above the timings
    assert "1.200x vs torch.compile (max-autotune, static, per shape; 120.0 us)" in lines[2]
    assert "1.200x vs torch.compile (120.0 us)" in lines[3]  # a record from before the mode was kept


NOISY = '''"""A reference that draws noise inside forward: eager and compiled draw different values."""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "noisy", "dtype": "float32", "bound": "memory"}
WORKLOADS = [
    {"name": "small", "params": {"M": 16, "N": 40}, "split": "search"},
    {"name": "smoke", "params": {"M": 8, "N": 40}, "split": "smoke"},
]
TOLERANCE = {"atol": {"float32": 1e-5}, "rtol": {"float32": 1e-5}}


class Model(torch.nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)


def get_inputs(M=8, N=40):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
'''


@pytest.mark.slow
def test_the_compiled_baselines_output_is_judged_by_the_candidates_rule(
    affine: Task, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Real torch.compile: a compiled reference that computes the same values passes; one whose values differ
    (its own random draws) is reported with the kind of failure, once per workload."""
    from ksearch.gpu.tasks import load_task

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    noisy_path = tmp_path / "noisy.py"
    noisy_path.write_text(NOISY)
    for task, passes in ((affine, True), (load_task(str(noisy_path)), False)):
        state = WorkerState(torch.device("cpu"), {})
        state.set_task({"task": json.loads(task.model_dump_json())})
        out = state.benchmark({"workload": "smoke", "settings": _settings("smoke"), "which": "compile"})
        check = out["output_check"]
        assert check["passed"] is passes, check
        if not passes:
            assert check["kind"] and check["max_abs_err"] > 1e-3, check


@pytest.mark.anyio
@pytest.mark.slow
async def test_a_baseline_that_fails_the_rule_is_named_in_every_evaluation(
    tmp_path: Any, affine: Task, cand: Any, st: Any
) -> None:
    """A compile baseline whose output failed the rule when it was measured (as the cache keeps it) is named in the
    evaluation's notes, beside the speedup it divides."""
    sb = LocalSandbox(scratch_dir=tmp_path, n_workers=1, call_timeout_s=120.0, compile_baseline=True)
    try:
        env = await sb._environment()
        key = sb._baseline_key(affine, "smoke", "compile", env, st("smoke"))
        failed = {"passed": False, "kind": "wrong_values", "message": "max abs err 0.5 at [0, 3]"}
        await sb.cache.put(
            key,
            {"median_us": 50.0, "mean_us": 50.0, "iqr_us": 1.0, "ci_low_us": 49.0, "ci_high_us": 51.0, "n": 5,
             "compile_mode": "default", "output_check": failed},
        )  # fmt: skip
        ev = await sb.evaluate(cand("good_triton"), affine, st("smoke"))
        assert ev.status == "ok", ev.error
        [note] = [f for f in ev.flags if "torch.compile's own output fails" in f]
        assert "on smoke (wrong_values: max abs err 0.5 at [0, 3])" in note
        assert "against a baseline that would not pass" in note
    finally:
        await sb.close()
