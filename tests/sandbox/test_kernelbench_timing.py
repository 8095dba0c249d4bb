"""The `kernelbench` timing protocol: the loop of KernelBench's `time_execution_with_cuda_event` (checked here with
fake CUDA events on the CPU, and against KernelBench's own function on a GPU), the sandbox taking the protocol on
both, and KernelBench's correctness rule for plain KernelBench files."""

from __future__ import annotations

import gc
import importlib.util
import random
import statistics
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.checks import outputs as checking
from ksearch.gpu.task import Tolerance
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.kernelbench_rules import KERNELBENCH_TOLERANCE, kernelbench_tolerance
from ksearch.gpu.worker import protocol_kernelbench as timing_kernelbench

ROOT = Path(__file__).resolve().parents[2]
KB_TIMING = ROOT / ".ext" / "kb" / "src" / "kernelbench" / "timing.py"


# ---------------------------------------------------------------- the loop, with fake CUDA events


class _Log:
    def __init__(self) -> None:
        self.calls: list[str] = []
        self.times: Iterator[float] = iter(())  # elapsed ms per event pair, in order
        self.clock = 0.0


class _FakeEvent:
    log: _Log

    def __init__(self, enable_timing: bool = False) -> None:
        assert enable_timing

    def record(self) -> None:
        self.log.calls.append("record")

    def elapsed_time(self, end: _FakeEvent) -> float:
        return next(self.log.times)


@pytest.fixture
def fake(monkeypatch: pytest.MonkeyPatch) -> _Log:
    log = _Log()
    _FakeEvent.log = log
    monkeypatch.setattr(timing_kernelbench, "_Event", _FakeEvent)
    monkeypatch.setattr(timing_kernelbench, "_sync", lambda: log.calls.append("sync"))
    monkeypatch.setattr(timing_kernelbench, "_empty_cache", lambda: log.calls.append("empty_cache"))
    monkeypatch.setattr(timing_kernelbench, "_device_name", lambda: "fake")
    monkeypatch.setattr(timing_kernelbench, "_perf", lambda: log.clock)
    return log


def test_the_loop_is_kernelbenchs_warm_up_then_clear_and_events_around_each_trial(fake: _Log) -> None:
    fake.times = iter([9.0, 1.0, 2.0, 3.0])  # the first trial is discarded, as upstream's discard_first=1

    def fn(inputs: list[Any]) -> int:
        fake.calls.append("call")
        return 0

    res = timing_kernelbench.time_like_kernelbench(
        fn,
        lambda k: fake.calls.append(f"in{k}") or [],  # type: ignore[func-returns-value]
        warmup=2,
        trials=3,
        clear_l2=lambda: fake.calls.append("clear"),
        host_check=False,
    )
    trial = ["sync", "clear", "record", "call", "record", "sync"]
    assert fake.calls == [
        *["in-1", "call", "sync", "in-2", "call", "sync"],  # warm-up: a synchronize after each call, no clear
        "empty_cache",
        *[x for k in range(4) for x in [f"in{k}", *trial]],
    ]
    assert res.samples_us == [1000.0, 2000.0, 3000.0] and res.mean_us == pytest.approx(2000.0)
    assert res.summary.n == 3 and res.to_dict()["mean_us"] == pytest.approx(2000.0)
    assert res.device == "fake" and res.flags == []


def test_defaults_are_kernelbenchs_and_the_mean_is_of_the_kept_trials(fake: _Log) -> None:
    ms = [random.uniform(0.5, 2.0) for _ in range(101)]
    fake.times = iter(ms)
    calls = []
    kb = timing_kernelbench
    res = kb.time_like_kernelbench(lambda x: calls.append(1), lambda k: [], host_check=False)
    assert (kb.WARMUP, kb.TRIALS, kb.DISCARD_FIRST, kb.REFERENCE_WARMUP) == (3, 100, 1, 5)
    assert len(calls) == kb.WARMUP + kb.TRIALS + kb.DISCARD_FIRST
    assert res.summary.n == 100 and res.mean_us == pytest.approx(statistics.fmean(ms[1:]) * 1000.0)


@pytest.mark.slow
def test_each_output_lives_until_the_next_call_returns(fake: _Log) -> None:
    """Upstream assigns each result to `_`: the previous one is freed only once the next call has returned."""
    fake.times = iter([1.0] * 4)

    class Out:
        pass

    alive_at_entry: list[bool] = []
    last: list[weakref.ref[Out]] = []

    def fn(inputs: list[Any]) -> Out:
        gc.collect()
        alive_at_entry.append(bool(last) and last[-1]() is not None)
        out = Out()
        last.append(weakref.ref(out))
        return out

    timing_kernelbench.time_like_kernelbench(fn, lambda k: [], warmup=1, trials=3, host_check=False)
    # warm-up results are dropped at once; from the second trial on the previous trial's output is alive
    assert alive_at_entry == [False, False, True, True, True]
    gc.collect()
    assert all(r() is None for r in last)  # and nothing is kept after the loop


def test_outputs_of_kept_trials_are_handed_to_the_check(fake: _Log) -> None:
    fake.times = iter([1.0] * 4)
    seen: list[tuple[int, int]] = []
    count = iter(range(100))
    timing_kernelbench.time_like_kernelbench(
        lambda x: next(count),
        lambda k: [],
        warmup=1,
        trials=3,
        after_each=lambda t, out: seen.append((t, out)),
        host_check=False,
    )
    assert seen == [(0, 2), (1, 3), (2, 4)]  # call 0 warmed up, call 1 was the discarded trial


def test_a_loop_past_its_wall_limit_stops_and_says_so(fake: _Log) -> None:
    fake.times = iter([1.0] * 10)

    def slow(inputs: list[Any]) -> None:
        fake.clock += 1.0

    res = timing_kernelbench.time_like_kernelbench(
        slow, lambda k: [], warmup=1, trials=8, wall_s=3.5, host_check=False
    )
    # warm-up and the discarded trial take 2 s; two kept trials later the clock is past 3.5 s
    assert res.summary.n == 2 and res.flags and "stopped after 2 of 8 trials" in res.flags[0]
    assert res.flags[0].startswith("note:")  # a note: it never changes the evaluation's status


def test_the_l2_clear_is_kernelbenchs_256_mib_of_int64() -> None:
    assert timing_kernelbench.L2_CLEAR_SHAPE == (32, 1024, 1024)
    n = 1
    for d in timing_kernelbench.L2_CLEAR_SHAPE:
        n *= d
    assert n * 8 == 256 << 20 and timing_kernelbench.L2_CLEAR_VALUE == 42


# ---------------------------------------------------------------- the worker's branch, on the CPU with fake events

HONEST = "import torch\n\n\nclass ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return x * 2.0 + 1.0\n"
# right for its first 20 calls, then wrong: only a check of the timed calls' outputs sees it
TIRES = HONEST.replace(
    "        return x * 2.0 + 1.0",
    "        global N\n        N += 1\n        return x * (2.0 if N <= 20 else 2.5) + 1.0",
).replace("class ModelNew", "N = 0\n\n\nclass ModelNew")


@pytest.fixture
def worker(fake: _Log, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, affine: Any) -> Any:
    """A CPU worker whose GPU calls are fakes, the affine task loaded; `worker.load_source(src)` loads a candidate."""
    from ksearch.gpu.timing import measure as timing
    from ksearch.gpu.worker.state import WorkerState

    fake.times = iter([0.5] * 100_000)
    monkeypatch.setattr(timing, "_Event", _FakeEvent)  # the host-clock check's events
    monkeypatch.setattr(timing, "_sync", lambda: None)
    monkeypatch.setattr(timing_kernelbench, "l2_clearer", lambda device: lambda: fake.calls.append("clear"))
    monkeypatch.chdir(tmp_path)
    state = WorkerState(torch.device("cpu"), {})
    task = affine.model_dump(mode="json")
    state.set_task({"task": task})

    def load_source(src: str) -> None:
        out = state.load(
            {"task": task, "candidate": {"id": str(hash(src)), "language": "triton", "source": src}}
        )
        assert out["ok"], out

    state.load_source = load_source  # type: ignore[attr-defined]
    return state


def _args(which: str, **kw: Any) -> dict[str, Any]:
    from ksearch.worldmodel.models import EvalSettings

    st = EvalSettings(seed=3, workloads=["small"], timing_protocol="kernelbench", **kw)
    return {"workload": "small", "settings": st.model_dump(), "which": which}


def test_the_worker_times_the_eager_reference_with_five_warm_up_calls(worker: Any, fake: _Log) -> None:
    calls = []
    ref = worker._reference_fn(worker.task.workload("small"))

    def counted(inputs: list[Any]) -> Any:
        calls.append(1)
        return ref(inputs)

    worker._ref_fns["small"] = counted
    out = timing_kernelbench.benchmark(worker, _args("eager"))
    assert out["protocol"] == "kernelbench" and out["n"] == 100 and out["mean_us"] == pytest.approx(500.0)
    # 5 warm-up calls, 101 trials, then the 7 calls of the host-clock check
    assert len(calls) == 5 + 101 + 7 and fake.calls.count("clear") == 101


def test_the_worker_times_a_candidate_and_checks_it_after_the_loop(worker: Any) -> None:
    worker.load_source(HONEST)
    out = timing_kernelbench.benchmark(worker, _args("candidate", max_reps=30))
    assert out["protocol"] == "kernelbench" and out["n"] == 30, out
    assert not [f for f in out["flags"] if not f.startswith("note:")], out["flags"]


def test_an_answer_cached_by_address_is_caught_after_the_loop(worker: Any, cand: Any) -> None:
    """KernelBench times one input set, so a cache keyed by its address answers every timed call right."""
    worker.load_source(cand("address_cache").source)
    out = timing_kernelbench.benchmark(worker, _args("candidate", max_reps=10))
    assert any(f.startswith("stale_output") for f in out["flags"]), out["flags"]


def test_final_mode_checks_timed_outputs_chosen_in_secret(worker: Any) -> None:
    worker.load_source(TIRES)
    search = timing_kernelbench.benchmark(worker, _args("candidate", max_reps=10))
    assert any(f.startswith("recheck_failed") for f in search["flags"])  # after the loop
    worker.load_source(TIRES.replace("N <= 20", "N <= 30"))
    final = timing_kernelbench.benchmark(worker, _args("candidate", max_reps=100, final=True))
    bad = [f for f in final["flags"] if f.startswith("final_recheck_failed")]
    # wrong from the 27th timed call on: 8 calls chosen among 100 all fall before it with probability 1.5e-5
    assert len(bad) == 1 and "timed call" in bad[0], final["flags"]
    assert int(bad[0].split("timed call ")[1].split(" ")[0]) >= 26


def test_kept_outputs_are_the_chosen_calls_and_are_checked_after_the_loop() -> None:
    from ksearch.gpu.checks import kept_outputs
    from ksearch.gpu.checks.outputs import compare_outputs

    exp = torch.ones(64)
    kept = kept_outputs.KeptOutputs(exp, trials=100)
    assert len(kept.chosen) == kept_outputs.KEPT and all(0 <= t < 100 for t in kept.chosen)
    assert kept_outputs.KeptOutputs(exp, trials=3).chosen == {0, 1, 2}  # no more than there are calls
    choices = {frozenset(kept_outputs.KeptOutputs(exp, trials=100).chosen) for _ in range(5)}
    assert len(choices) == 5  # drawn afresh, not a fixed pattern a candidate could learn
    wrong = min(kept.chosen)
    for trial in range(100):
        kept.add(trial, exp * (2.0 if trial == wrong else 1.0))
    assert sorted(t for t, _ in kept.kept) == sorted(kept.chosen)
    failed, note = kept.first_failure(lambda got: compare_outputs(got, exp, Tolerance()))
    assert failed is not None and failed[0] == wrong and not failed[1].passed and note is None
    # one buffer returned on every call: checked as it stands, and said
    same = kept_outputs.KeptOutputs(exp, trials=100)
    buf = torch.ones(64)
    for trial in range(100):
        same.add(trial, buf)
    failed, note = same.first_failure(lambda got: compare_outputs(got, exp, Tolerance()))
    assert failed is None and note is not None and "same memory" in note


# ---------------------------------------------------------------- KernelBench's correctness rule


def test_kernelbench_tolerance_per_precision() -> None:
    assert KERNELBENCH_TOLERANCE == {"fp32": 1e-4, "fp16": 1e-2, "bf16": 1e-2}
    tol = kernelbench_tolerance()
    for dtype, t, most in (("float32", 1e-4, 1.0002), ("float16", 1e-2, 1.013), ("bfloat16", 1e-2, 1.027)):
        atol, rtol = tol.for_dtype(dtype)
        assert atol == rtol and t / (1 - t) <= atol <= most * t
    assert tol.for_dtype("float8_e4m3fn") == Tolerance().for_dtype("float8_e4m3fn")  # no KernelBench rule
    assert tol.mismatch_ratio == 0.0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_whatever_kernelbenchs_allclose_accepts_ksearch_accepts(dtype: torch.dtype) -> None:
    name = {torch.float32: "fp32", torch.float16: "fp16", torch.bfloat16: "bf16"}[dtype]
    t = KERNELBENCH_TOLERANCE[name]
    g = torch.Generator().manual_seed(0)
    ref = (torch.randn(4096, generator=g) * 10).to(dtype)
    # right at allclose's edge, on both sides of the reference: |ref - got| = t + t * |got|, where the
    # candidate-relative term lets a larger |got| pass further out than a reference-relative one would
    r = ref.double()
    unwidened = Tolerance(atol={str(ref.dtype)[6:]: t}, rtol={str(ref.dtype)[6:]: t})
    narrower = []
    for s in (1.0, -1.0):  # away from zero (the candidate-relative term is the larger), then towards it
        for nudge in (0.999, 1.0, 1.001, 1.01):
            got = (r + s * torch.sign(r) * nudge * t * (1 + r.abs()) / (1 - s * t)).to(dtype)
            ok = torch.isclose(ref, got, atol=t, rtol=t)  # KernelBench: torch.allclose(reference, candidate)
            if ok.any():
                chk = checking.compare_tensor(got[ok], ref[ok], kernelbench_tolerance())
                assert chk.passed, (s, nudge, chk.message)
                narrower.append(not checking.compare_tensor(got[ok], ref[ok], unwidened).passed)
    assert any(narrower)  # t itself, reference-relative, would have rejected some of what allclose accepts


def test_a_plain_kernelbench_file_gets_kernelbenchs_rule_a_native_task_keeps_its_own(tmp_path: Path) -> None:
    plain = tmp_path / "19_ReLU.py"
    plain.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return torch.relu(x)\n\n\n"
        "def get_inputs():\n    return [torch.rand(16, 8)]\n\n\ndef get_init_inputs():\n    return []\n"
    )
    assert load_task(str(plain)).tolerance == kernelbench_tolerance()
    native = tmp_path / "relu_native.py"
    native.write_text(plain.read_text() + '\nMETA = {"op": "relu"}\n')
    assert load_task(str(native)).tolerance == Tolerance()
    assert load_task("softmax").tolerance.for_dtype("float32")[0] == 1e-7  # the suite keeps its own rules


# ---------------------------------------------------------------- the sandbox, CPU and GPU


@pytest.mark.anyio
@pytest.mark.cpu
@pytest.mark.slow
async def test_the_cpu_interpreter_takes_the_protocol(sandbox: Any, affine: Any, cand: Any, st: Any) -> None:
    ev = await sandbox.evaluate(cand("good_triton"), affine, st("small", timing_protocol="kernelbench"))
    assert ev.status == "ok", (ev.error, ev.flags)
    t = ev.timings[0]
    assert t.device == "cpu-interpreter" and t.protocol == "kernelbench" and t.statistic == "mean"


def _upstream_timing() -> Any:
    """KernelBench's own timing.py, loaded as a file (it imports torch, numpy and the standard library only)."""
    spec = importlib.util.spec_from_file_location("kb_upstream_timing", KB_TIMING)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _plain_kernelbench_loop(fn: Any, args: list[Any], trials: int) -> float:
    """The same protocol written out plainly: 3 warm-up calls, a discarded trial, a 256 MiB int64 fill before each."""
    for _ in range(3):
        fn(*args)
        torch.cuda.synchronize()
    torch.cuda.empty_cache()
    times = []
    for trial in range(trials + 1):
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.empty((32, 1024, 1024), dtype=torch.int64, device="cuda").fill_(42)
        s.record()
        _ = fn(*args)
        e.record()
        torch.cuda.synchronize()
        if trial:
            times.append(s.elapsed_time(e) * 1000.0)
    return statistics.fmean(times)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("op", ["elementwise", "matmul", "launches"])
def test_the_protocols_mean_matches_kernelbenchs_own_timing(op: str) -> None:
    x = torch.randn(4096, 4096, device="cuda")
    fns = {
        "elementwise": lambda a: a * 2.0 + 1.0,
        "matmul": lambda a: a @ a,
        "launches": lambda a: torch.relu(a + 1.0).sum(dim=1) * 0.5,  # several kernels per call
    }
    f = fns[op]
    upstream = _upstream_timing() if KB_TIMING.is_file() else None
    ours, theirs = [], []
    for _ in range(3):  # interleaved: the GPU's clocks drift alike for both
        ours.append(
            timing_kernelbench.time_like_kernelbench(
                lambda a: f(*a), lambda k: [x], clear_l2=timing_kernelbench.l2_clearer(x.device)
            ).mean_us
        )
        if upstream is not None:
            ms = upstream.time_execution_with_cuda_event(
                f, [x], num_trials=100, verbose=False, device=x.device
            )
            theirs.append(statistics.fmean(ms) * 1000.0)
        else:
            theirs.append(_plain_kernelbench_loop(f, [x], 100))
    a, b = min(v for v in ours if v), min(theirs)
    assert abs(a / b - 1) < 0.05, (op, ours, theirs)


@pytest.mark.gpu
@pytest.mark.anyio
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a GPU")
@pytest.mark.parametrize("final", [False, True], ids=["search", "final"])
async def test_the_sandbox_times_candidate_and_baseline_as_kernelbench(
    sandbox: Any, affine: Any, cand: Any, st: Any, final: bool
) -> None:
    settings = st("small", timing_protocol="kernelbench", final=final).model_copy(update={"max_reps": 200})
    ev = await sandbox.evaluate(cand("good_triton"), affine, settings)
    assert ev.status == "ok", (ev.error, ev.flags)
    t = ev.timings[0]
    assert t.protocol == "kernelbench" and t.statistic == "mean" and t.n == 100
    assert t.mean_us is not None and t.time_us == t.mean_us and t.eager_us is not None
    assert not any(f.startswith(("recheck_failed", "final_recheck_failed", "stale_output")) for f in ev.flags)
