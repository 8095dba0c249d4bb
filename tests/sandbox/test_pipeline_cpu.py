"""The full pipeline on the CPU: a correct Triton candidate compiles, passes and is timed (interpreter)."""

from __future__ import annotations

import pytest

from ksearch.gpu.timing.measure import CPU_REPS

# every test here asserts what the Triton interpreter does (device, timings, hardware facts)
pytestmark = [pytest.mark.anyio, pytest.mark.cpu]


@pytest.mark.slow
async def test_good_candidate_is_ok_and_timed(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("good_triton"), affine, st("small", "smoke"))
    assert ev.status == "ok", ev.error
    assert [c.workload for c in ev.correctness] == ["small", "smoke"]
    assert all(c.passed and c.kind == "ok" and c.trials == 2 for c in ev.correctness)
    assert ev.correctness[0].max_abs_err is not None and ev.correctness[0].max_abs_err < 1e-5
    assert len(ev.timings) == 2
    t = ev.timings[0]
    assert t.device == "cpu-interpreter"
    assert t.n == CPU_REPS and t.ci_low_us <= t.median_us <= t.ci_high_us
    # both medians are kept as measured; their ratio (the interpreter against CPU eager) is no speedup: none stated
    assert t.eager_us is not None and t.speedup_vs_eager is None and ev.speedup_vs_eager is None
    assert t.compile_us is None  # no torch.compile baseline on the CPU
    assert ev.env is not None and ev.env.cpu_mode
    assert any("interpreter" in f for f in ev.flags)
    # where its seconds went: each step measured, none more than the whole, drawing inputs inside them
    steps = ev.seconds_by_step
    # (waiting for a worker shows only when it took a measurable time: a started worker is there at once)
    assert {"load", "correctness", "timing", "baselines", "inputs", "reference"} <= set(steps), steps
    assert steps["correctness"] > 0 and steps["timing"] > 0
    inside = ("inputs", "reference", "build", "compile")
    assert sum(v for k, v in steps.items() if k not in inside) <= ev.seconds + 1e-3
    assert 0 < steps["inputs"] < steps["correctness"] + steps["timing"] + steps["baselines"]
    # the reference's runs for the checks: inside correctness and the re-check after timing
    assert 0 < steps["reference"] < steps["correctness"] + steps["timing"], steps


async def test_correctness_only_has_no_timings(sandbox, affine, cand, st) -> None:
    ev = await sandbox.correctness(cand("good_triton"), affine, st("small"))
    assert ev.status == "ok" and ev.correct and ev.timings == []


async def test_unknown_workload_is_an_error_naming_the_choices(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("good_triton"), affine, st("nope"))
    assert ev.status == "error"
    assert "nope" in ev.error and "small" in ev.error and "smoke" in ev.error


async def test_hardware_facts_in_cpu_mode(sandbox) -> None:
    hw = await sandbox.hardware()
    assert hw.cpu_mode and hw.device == "cpu-interpreter" and hw.workers == 1
    assert hw.copy_bandwidth_gbps is None and hw.matmul_tflops == {}


async def test_baselines_are_cached_per_task_workload_environment(sandbox, affine, cand, st) -> None:
    ev1 = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
    ev2 = await sandbox.evaluate(cand("good_triton"), affine, st("small"))
    assert ev1.timings[0].eager_us == ev2.timings[0].eager_us  # the cached measurement
    keys = [k for k in (await _keys(sandbox)) if k.startswith("baseline:") and ":small:" in k]
    assert keys, "the eager baseline was not stored in the cache"


async def _keys(sandbox) -> list[str]:
    import json

    return list(json.loads(sandbox.cache.path.read_text()))


async def test_final_mode_times_fresh_inputs_and_checks_every_call(sandbox, affine, cand, st) -> None:
    ev = await sandbox.evaluate(cand("good_triton"), affine, st("small", final=True))
    assert ev.status == "ok", ev.error
    assert ev.timings[0].n == CPU_REPS and not any(f.startswith("final_recheck_failed") for f in ev.flags)
    bad = await sandbox.evaluate(cand("address_cache"), affine, st("small", final=True))
    assert bad.correct and bad.status == "flagged"  # stale answers on fresh inputs, or at reused addresses


@pytest.mark.parametrize("fork", ["0", "1"])
async def test_a_first_evaluation_accounts_for_its_seconds_worker_start_included(
    tmp_path, affine, cand, st, monkeypatch, fork
) -> None:
    from ksearch.gpu.sandbox.local import LocalSandbox

    monkeypatch.setenv("KSEARCH_FORK_WORKERS", fork)  # started anew, or forked from this process's zygote
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0)  # no worker started yet
    try:
        ev = await sb.correctness(cand("good_triton"), affine, st("small"))
    finally:
        await sb.close()
    assert ev.status == "ok", ev.error
    steps = ev.seconds_by_step
    # a worker process started for it: Python and torch's imports, or a fork of a process that made them
    assert steps.get("wait_for_worker", 0) > (0.3 if fork == "0" else 0.0), steps
    # drawing inputs and the reference's runs are inside the others; a Triton candidate's static check is awaited
    # before anything else (other languages compile beside the steps): the rest is the whole call
    summed = [v for k, v in steps.items() if k not in ("inputs", "reference", "build")]
    accounted = sum(summed)
    # each step is reported to the millisecond: their sum may exceed the whole by half a millisecond per step
    rounding = 0.0005 * len(summed) + 1e-9
    assert 0.9 * ev.seconds <= accounted <= ev.seconds + rounding, (accounted, ev.seconds, steps)


async def test_a_kernel_only_the_interpreter_cannot_run_is_said_so_at_its_own_line(
    sandbox, affine, cand, st
) -> None:
    """A live host read "Triton compile error: AttributeError(...)" at the launch line in `forward`, for a kernel that
    compiles for a GPU: the interpreter runs `range` as Python, so `b.to(...)` fails only there."""
    c = cand("interpreter_only")
    ev = await sandbox.correctness(c, affine, st("smoke"))
    # the GPU compile (a dry run) builds it: not judged here, which is no failure of the candidate's
    assert ev.status == "interpreter_unsupported", ev.error
    assert ev.inconclusive
    assert ev.error is not None and ev.error.startswith(
        "Triton interpreter error: the Triton interpreter (CPU)"
    )
    assert "AttributeError: 'int' object has no attribute 'to'" in ev.error
    assert "The GPU compile (a dry run for sm_" in ev.error and "not judged on this machine" in ev.error
    assert "gpu_compile_check" in ev.seconds_by_step
    kernel_line = next(i for i, ln in enumerate(c.source.splitlines(), 1) if "b.to(tl.int64)" in ln)
    assert ev.compile is not None and ev.compile.ok
    assert [k.name for k in ev.compile.kernels] == ["_affine"]  # compiled for the GPU's target
    assert [(d.severity, d.line) for d in ev.compile.diagnostics if d.severity != "note"] == [
        ("warning", kernel_line)
    ], ev.compile
    # a kernel the GPU compile refuses too stays a compile error, the compiler's words added
    broken = cand(c.source.replace("b.to(tl.int64)", "b.to_nowhere(tl.int64)"))
    ev = await sandbox.correctness(broken, affine, st("smoke"))
    assert ev.status == "compile_error", ev.error
    assert (
        ev.error is not None and "The GPU compile (a dry run for sm_" in ev.error and "fails too" in ev.error
    )
    assert not ev.inconclusive
    assert ev.compile is not None
    assert [d.line for d in ev.compile.diagnostics if d.severity == "error"] == [kernel_line], ev.compile
