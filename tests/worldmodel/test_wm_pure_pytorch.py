"""A pure-PyTorch attempt (no kernel of the candidate's own ran) keeps its numbers and is never a best:
not the first correct attempt of a node, not the search's, however fast it was timed on a GPU."""

from __future__ import annotations

import pytest

from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import Attempt, Environment, Evaluation, Search, WorkloadTiming
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio


def timed(speedup: float, *, pure: bool = False, device: str = "NVIDIA H200") -> Evaluation:
    med = 100.0 / speedup
    timing = WorkloadTiming(
        workload="w",
        device=device,
        median_us=med,
        iqr_us=med * 0.01,
        ci_low_us=med * 0.99,
        ci_high_us=med * 1.01,
        n=50,
        eager_us=100.0,
        speedup_vs_eager=speedup,
    )
    return Evaluation(
        status="ok",
        timings=[timing],
        speedup_vs_eager=speedup,
        env=Environment(device=device, cpu_mode=device == "cpu-interpreter"),
        pure_pytorch=pure,
    )


async def test_a_pure_pytorch_attempt_is_never_a_best(store: Store, search: Search) -> None:
    (n,) = await apply_intents(store, search.id, [{"title": "call cuBLAS"}], "human", 0)
    cand = await store.put_candidate("src", "triton")

    def always(a: Attempt, b: Attempt) -> bool:
        return True

    async def record(ev: Evaluation) -> Attempt:
        return await store.record_attempt(search.id, n.id, cand.id, ev, better=always)

    async def bests() -> tuple[int | None, int | None]:
        return (await store.get_node(n.id)).best_attempt_id, (
            await store.get_search(search.id)
        ).best_attempt_id

    fast = await record(timed(9.0, pure=True))  # the first correct attempt, the fastest, on a GPU
    cpu = await record(timed(5.0, pure=True, device="cpu-interpreter"))  # the CPU rule's "first correct"
    assert await bests() == (None, None)
    kernel = await record(timed(1.1))
    assert await bests() == (kernel.id, kernel.id)
    await record(timed(20.0, pure=True))  # even a rule that lets anything win does not let it in
    assert await bests() == (kernel.id, kernel.id)
    kept = await store.get_attempt(fast.id)
    assert kept.speedup == 9.0 and kept.evaluation == timed(9.0, pure=True)  # its numbers are kept
    assert not kept.evaluation.ranks and not (await store.get_attempt(cpu.id)).evaluation.ranks  # type: ignore[union-attr]


def test_records_from_before_the_label_read_as_kernels() -> None:
    old = Evaluation.model_validate_json('{"status": "ok", "speedup_vs_eager": 2.0}')
    assert not old.pure_pytorch and old.ranks


async def test_an_attempt_whose_kernel_audit_was_left_out_is_never_a_best(
    store: Store, search: Search
) -> None:
    """The audit is left out only for an attempt slower than its node's best everywhere; should such an attempt
    still read faster (a rule that lets anything win, a relabelled timing), it does not take a best's place."""
    (n,) = await apply_intents(store, search.id, [{"title": "tile it"}], "human", 0)
    cand = await store.put_candidate("src", "triton")

    def always(a: Attempt, b: Attempt) -> bool:
        return True

    audited = await store.record_attempt(
        search.id, n.id, cand.id, timed(1.5).model_copy(update={"audited": True})
    )
    unaudited = timed(30.0).model_copy(update={"audited": False})
    await store.record_attempt(search.id, n.id, cand.id, unaudited, better=always)
    assert (await store.get_node(n.id)).best_attempt_id == audited.id
    assert (await store.get_search(search.id)).best_attempt_id == audited.id
