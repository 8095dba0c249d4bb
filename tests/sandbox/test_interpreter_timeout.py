"""A Triton kernel too slow for the CPU interpreter is reported as that (inconclusive), not as a hang."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.worker import interp_watch
from ksearch.server.driver.policies.tuner import TunerPolicy
from ksearch.server.driver.policies.tuner_model import Observation
from ksearch.tools.finish_intent import close_refine
from ksearch.tools.loop import state as loop
from ksearch.tools.prompting.phase_models import AttemptOutcome
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import INCONCLUSIVE_STATUSES, Evaluation, IntentSpec
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
async def short(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("short"), call_timeout_s=6.0, cpu_mode=True)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


@pytest.mark.slow
async def test_a_slow_interpreted_kernel_is_an_interpreter_timeout(short, affine, cand, st) -> None:
    ev = await short.correctness(cand("slow_interpreted"), affine, st("small"))
    assert ev.status == "interpreter_timeout" and ev.inconclusive, ev.error
    (c,) = ev.correctness
    assert c.kind == "interpreter_timeout" and not c.passed
    msg = ev.error or ""
    assert "probably hangs" not in msg and "not a hang" in msg
    assert "'small' (M=32, N=96)" in msg and "6 s limit" in msg  # the workload's size and the limit
    assert "_affine_slowly" in msg and "of 384" in msg  # where it was: 384 programs of 8 elements
    assert "smoke" in msg and "does not count as a failed" in msg
    ok = await short.correctness(cand("good_triton"), affine, st("small"))  # a fresh worker took over
    assert ok.status == "ok", ok.error


@pytest.mark.slow
async def test_host_code_that_never_returns_is_still_a_hang(short, affine, cand, st) -> None:
    ev = await short.correctness(cand("hangs"), affine, st("small"))
    assert ev.status == "timeout" and not ev.inconclusive
    assert ev.correctness[0].kind == "timeout" and "probably hangs" in (ev.error or "")


def test_the_record_says_where_the_time_went(tmp_path) -> None:
    w = interp_watch.Watch(tmp_path)
    t0 = time.time()
    w._call_start, w._done_s, w._launch_start, w._launches = t0 - 10.0, 2.0, t0 - 4.0, 1
    w._program, w._programs, w._kernel = 5, 20, b"_k"
    w._write()
    s = interp_watch.read(tmp_path, now=t0)
    assert s is not None and s.in_kernel and s.interpreter_bound
    assert s.interpreting_s == pytest.approx(6.0) and s.elapsed_s == pytest.approx(10.0)
    assert "`_k`, at program 5 of 20 of launch 2" in s.progress() and "1.00 s per program" in s.progress()
    w._program = 1
    w._write()
    assert "no program of that grid had finished" in interp_watch.read(tmp_path, now=t0).progress()  # type: ignore[union-attr]
    # host code between two short launches: its own time, not the interpreter's
    w._launch_start, w._done_s = 0.0, 1.0
    w._write()
    s = interp_watch.read(tmp_path, now=t0)
    assert s is not None and not s.in_kernel and not s.interpreter_bound
    w.begin_call()
    assert interp_watch.read(tmp_path) is not None
    assert interp_watch.read(tmp_path / "missing") is None


def test_inconclusive_attempts_are_neither_measured_nor_blamed() -> None:
    assert Evaluation(status="interpreter_timeout").inconclusive
    assert not Evaluation(status="timeout").inconclusive and "timeout" not in INCONCLUSIVE_STATUSES

    def obs(block: int, status: str, speedup: float | None) -> Observation:
        out = AttemptOutcome(
            attempt_id=block, params={"BLOCK": block}, status=status, speedup_vs_eager=speedup
        )
        log = 0.1 if speedup else None
        return Observation({"BLOCK": block}, log, out, inconclusive=status in INCONCLUSIVE_STATUSES)

    good = obs(64, "ok", 1.1)
    assert TunerPolicy._blamed([good, obs(128, "incorrect", None)]) == [("BLOCK", "128")]
    assert TunerPolicy._blamed([good, obs(128, "interpreter_timeout", None)]) == []


async def test_an_intent_whose_attempts_were_inconclusive_is_released_not_failed(
    short, tmp_path, cand
) -> None:
    async with await Store.open(tmp_path / "k.db") as store:
        ws = Workspace(store, short)
        s = await store.create_search("slow", "softmax")
        slow, wrong = await apply_intents(
            store,
            s.id,
            [IntentSpec(title="one tiny block per program"), IntentSpec(title="skip the max")],
            "human",
            0,
        )
        outcomes = {slow.id: "interpreter_timeout", wrong.id: "incorrect"}
        for node in (slow, wrong):
            await store.set_node_status(node.id, "active")
            await loop.claim(ws, s, node, None)
            c = await store.put_candidate(cand("good_triton").source + f"# {node.id}\n", "triton")
            await store.record_attempt(s.id, node.id, c.id, Evaluation(status=outcomes[node.id]), round=0)
        released, _, ctx = await close_refine(ws, s, await store.get_node(slow.id))
        failed, _, _ = await close_refine(ws, s, await store.get_node(wrong.id))
    assert released.status == "open"  # nothing was learnt about the idea: it can be tried again
    assert failed.status == "failed"  # a wrong answer is a failed implementation
    assert [o.status for o in ctx.outcomes] == ["interpreter_timeout"]
