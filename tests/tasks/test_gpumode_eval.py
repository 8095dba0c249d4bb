"""GPU MODE tasks through the sandbox: every check of an output uses the task's own rule, and the `gpumode`
timing protocol times as the task's evaluator does."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.gpu.tasks import load_task
from ksearch.gpu.timing import measure as timing
from ksearch.worldmodel.models import Candidate, EvalSettings
from tests.fixtures.cli import ksearch_cli

ROOT = Path(__file__).resolve().parents[2]
FIX = Path(__file__).parent / "fixtures" / "gpumode"

# The right answer in fp16, which the task's own check accepts (it compares in fp32 at 2e-2): cast by a
# Triton kernel of the candidate's own, so the kernel audit sees a kernel.
HALF = """
import torch
import triton
import triton.language as tl


@triton.jit
def _to_half(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m).to(tl.float16), mask=m)


def custom_kernel(data):
    x, mask, w, cfg = data
    left = (x @ w["proj"]) * torch.sigmoid(x @ w["gate"]) * mask.unsqueeze(-1)
    out = torch.einsum("bikd,bjkd->bijd", left, left) / x.shape[1]
    out = torch.nn.functional.layer_norm(out, (cfg["dim"],)).contiguous()
    half = torch.empty(out.shape, dtype=torch.float16, device=out.device)
    _to_half[(triton.cdiv(out.numel(), 256),)](out, half, out.numel(), BLOCK=256)
    return half
"""

# Right only on the first call of the process, then an answer cached from it: the checks after timing see it.
STALE = HALF.replace(
    "def custom_kernel(data):",
    "_seen = []\n\n\ndef custom_kernel(data):\n    if _seen:\n        return _seen[0]\n    _seen.append(_real(data))\n"
    "    return _seen[0]\n\n\ndef _real(data):",
)

DOUBLE = """
import triton
import triton.language as tl


@triton.jit
def _double(src, dst, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst + offs, tl.load(src + offs, mask=m) * 2, mask=m)


def custom_kernel(data):
    out = data.new_empty(data.shape)
    _double[(triton.cdiv(data.numel(), 256),)](data, out, data.numel(), BLOCK=256)
    return out
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sandbox(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=120.0)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.fixture(scope="module")
def pairmix() -> Task:
    return load_task(str(FIX / "pairmix"))


def settings(*workloads: str, **kw: Any) -> EvalSettings:
    base: dict[str, Any] = {
        "seed": 7,
        "trials": 2,
        "input_sets": 2,
        "min_reps": 3,
        "max_reps": 5,
        "time_budget_s": 0.5,
    }
    return EvalSettings(workloads=list(workloads), **{**base, **kw})


def _cheats(ev: Any) -> list[str]:
    return [f for f in ev.flags if f.startswith(("recheck_failed", "stale_output", "final_recheck_failed"))]


@pytest.mark.anyio
@pytest.mark.parametrize("final", [False, True], ids=["search", "final"])
@pytest.mark.slow
async def test_an_fp16_answer_the_task_accepts_is_never_flagged(
    sandbox: LocalSandbox, pairmix: Task, final: bool
) -> None:
    """The first check, the re-check after timing, the stale-output check and the final mode's check of every
    timed call all ask the task's check_implementation (fp16 accepted), not ksearch's fp32 tolerance."""
    wls = ["smoke"] if sandbox.cpu_mode else ["bench0", "bench1"]
    ev = await sandbox.evaluate(Candidate.of(HALF, "triton"), pairmix, settings(*wls, final=final))
    assert ev.status == "ok", (ev.error, ev.flags)
    assert ev.correct and len(ev.timings) == len(wls) and _cheats(ev) == []


@pytest.mark.anyio
async def test_a_cached_answer_is_still_caught_by_the_tasks_rule(
    sandbox: LocalSandbox, pairmix: Task
) -> None:
    wl = "smoke" if sandbox.cpu_mode else "bench0"
    ev = await sandbox.evaluate(Candidate.of(STALE, "triton"), pairmix, settings(wl, trials=1))
    # right on its one trial, then the answer cached from it: wrong on the timed data and on new values
    assert ev.status == "flagged", ev.flags
    kinds = {f.split(":")[0] for f in _cheats(ev)}
    assert kinds == {"recheck_failed", "stale_output"}, ev.flags


@pytest.mark.anyio
@pytest.mark.cpu
async def test_a_cuda_task_is_refused_on_the_cpu_with_its_reason(sandbox: LocalSandbox) -> None:
    task = load_task(str(FIX / "cuda_pinned"))
    ev = await sandbox.evaluate(Candidate.of(DOUBLE, "triton"), task, settings("smoke"))
    assert ev.status == "error" and ev.correctness == []
    assert ev.error is not None and "needs a GPU (reference.py line 13 puts tensors on CUDA" in ev.error


# ---------------------------------------------------------------- the gpumode protocol's loop


class _FakeEvent:
    """CUDA events on the CPU: each pair measures `step` ms more than the previous one (or a constant)."""

    clock = 0.0
    step = 0.0
    base = 1.0

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        _FakeEvent.clock += 1.0
        self.t = _FakeEvent.clock

    def elapsed_time(self, end: _FakeEvent) -> float:
        _FakeEvent.base += _FakeEvent.step
        return _FakeEvent.base


@pytest.fixture
def fake_cuda(monkeypatch: pytest.MonkeyPatch) -> type[_FakeEvent]:
    monkeypatch.setattr(timing, "_Event", _FakeEvent)
    monkeypatch.setattr(timing, "_sync", lambda: None)
    monkeypatch.setattr(timing.torch.cuda, "get_device_name", lambda *a: "fake")
    _FakeEvent.clock, _FakeEvent.step, _FakeEvent.base = 0.0, 0.0, 1.0
    return _FakeEvent


def _clone(inputs: list[Any]) -> list[Any]:
    return [x.clone() for x in inputs]


def test_benchmark_mode_checks_the_first_call_on_a_copy_and_times_the_data_itself(fake_cuda: Any) -> None:
    data = [torch.zeros(4)]
    made: list[int] = []
    seen: list[Any] = []

    def inputs_for(k: int) -> list[Any]:
        made.append(k)
        return data

    def fn(inputs: list[Any]) -> Any:
        inputs[0] += 1  # writes into its data, as an output buffer would be written
        seen.append(inputs[0])
        return inputs[0].clone()

    checked: list[tuple[float, float]] = []

    def check(copy: list[Any], out: Any) -> str | None:
        checked.append((float(copy[0][0]), float(out[0])))
        return None

    res, failure = timing.time_like_gpumode(fn, inputs_for, copy=_clone, check=check)
    assert failure is None and made == [0]  # one data set, as the evaluator's benchmark mode has
    assert checked == [(0.0, 1.0)]  # the copy was taken before the call changed the data
    assert all(s is data[0] for s in seen)  # every call on the data itself: no copy inside the timed region
    # constant samples: the standard error is 0 at the third timed call, where the evaluator stops
    assert (
        res.summary.n == 3
        and res.mean_us == pytest.approx(1000.0)
        and res.to_dict()["mean_us"] == res.mean_us
    )


def test_leaderboard_mode_draws_and_checks_every_call(fake_cuda: Any) -> None:
    fake_cuda.step = 0.05  # samples keep growing: only the repeat limit stops the loop
    made: list[int] = []

    def inputs_for(k: int) -> list[Any]:
        made.append(k)
        return [torch.full((2,), float(k))]

    def check(copy: list[Any], out: Any) -> str | None:
        return "wrong" if float(copy[0][0]) == 3.0 else None

    res, failure = timing.time_like_gpumode(
        lambda x: x[0] * 2, inputs_for, copy=_clone, check=check, fresh_each=True, max_repeats=6
    )
    assert made == list(range(7)) and res.summary.n == 6
    assert failure == "wrong"  # the call on the fourth fresh data set failed its check


def test_the_host_timer_and_the_l2_clear_run_around_each_call(fake_cuda: Any) -> None:
    order: list[str] = []
    res, _ = timing.time_like_gpumode(
        lambda x: order.append("call"),
        lambda k: [torch.zeros(1)],
        copy=_clone,
        check=None,
        timer="host",
        clear_l2=lambda: order.append("clear"),
        max_repeats=4,
        rel_err_stop=0.0,
    )
    assert res.summary.n == 4 and order[:3] == [
        "call",
        "clear",
        "call",
    ]  # untimed first call, then flush+call
    assert all(s >= 0 for s in res.samples_us)


# ---------------------------------------------------------------- on a GPU


@pytest.mark.gpu
@pytest.mark.anyio
@pytest.mark.parametrize("final", [False, True], ids=["benchmark", "leaderboard"])
async def test_the_gpumode_protocol_reports_the_evaluators_mean(
    sandbox: LocalSandbox, pairmix: Task, final: bool
) -> None:
    st = settings("bench0", "bench2", timing_protocol="gpumode", final=final)
    ev = await sandbox.evaluate(Candidate.of(HALF, "triton"), pairmix, st)
    assert ev.status == "ok", (ev.error, ev.flags)
    for t in ev.timings:
        assert t.mean_us is not None and t.mean_us > 0 and 3 <= t.n <= 100
        assert t.eager_us is not None  # the baseline timed the same way


@pytest.mark.gpu
@pytest.mark.anyio
async def test_the_gpumode_protocol_follows_a_host_timed_l2_flushing_evaluator(sandbox: LocalSandbox) -> None:
    task = load_task(str(FIX / "cuda_pinned"))
    st = settings("bench0", timing_protocol="gpumode")
    ev = await sandbox.evaluate(Candidate.of(DOUBLE, "triton"), task, st)
    assert ev.status == "ok", (ev.error, ev.flags)
    assert ev.timings[0].mean_us is not None


# ---------------------------------------------------------------- the CLI


_ksearch = ksearch_cli


@pytest.mark.slow
def test_eval_takes_the_timing_protocol(tmp_path: Path) -> None:
    cand = tmp_path / "half.py"
    cand.write_text(HALF)
    wl = "smoke" if not torch.cuda.is_available() else "bench0"
    p = _ksearch(tmp_path, "eval", str(FIX / "pairmix"), str(cand), "-w", wl, "--timing", "gpumode", "--json")
    assert p.returncode == 0, p.stderr[-2000:]
    ev = json.loads(p.stdout)
    assert ev["status"] == "ok" and ev["settings"]["timing_protocol"] == "gpumode"
    assert ev["timings"][0]["mean_us"] is not None
    bad = _ksearch(tmp_path, "eval", str(FIX / "pairmix"), str(cand), "--timing", "fastest")
    assert bad.returncode != 0 and "unknown timing protocol 'fastest'" in bad.stderr
