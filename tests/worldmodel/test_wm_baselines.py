"""One baseline per search (worldmodel/baselines.py), on a real SQLite store: the first readings a search's
evaluations used are pinned, later attempts divide by them whatever their sandbox read, and a re-measurement pins a
new generation and restates every attempt, which the schema's trigger allows for the ratios and nothing else.

The readings are injected (a CPU cannot produce a GPU's): the pinning and restating are the store's own code. The
figures are the ones an H200 gave a ConvTranspose2d bf16 layer's torch.compile baseline on two machines."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

import pytest

from ksearch.worldmodel import baselines
from ksearch.worldmodel.models import (
    BaselineReading,
    Evaluation,
    Search,
    WorkloadCorrectness,
    WorkloadTiming,
)
from ksearch.worldmodel.store import Store

pytestmark = pytest.mark.anyio

H200 = "NVIDIA H200"
UUID_A = "GPU-1a2b3c4d-0000-1111-2222-333344445555"
UUID_B = "GPU-9f8e7d6c-0000-1111-2222-333344445555"


def reading(kind: str, us: float, uuid: str = UUID_A, hour: int = 19) -> BaselineReading:
    return BaselineReading(
        kind=kind,  # type: ignore[arg-type]
        time_us=us,
        ci_low_us=us * 0.995,
        ci_high_us=us * 1.005,
        n=100,
        median_us=us,
        mean_us=us,
        compile_mode="default" if kind == "compile" else None,
        measured_at=datetime(2026, 12, 4, hour, 2, tzinfo=UTC),
        device=H200,
        gpu_uuid=uuid,
        env_key=f"{H200}|570|12.8|2.9|3.4",
    )


def timed(time_us: float, eager_us: float, compile_us: float, uuid: str = UUID_A) -> Evaluation:
    """An evaluation as the sandbox returns it: divided by its own baseline readings."""
    t = WorkloadTiming(
        workload="w",
        device=H200,
        median_us=time_us,
        iqr_us=1.0,
        ci_low_us=time_us - 0.5,
        ci_high_us=time_us + 0.5,
        n=100,
        eager_us=eager_us,
        compile_us=compile_us,
        compile_mode="default",
        eager_baseline=reading("eager", eager_us, uuid),
        compile_baseline=reading("compile", compile_us, uuid),
        gpu_uuid=uuid,
        speedup_vs_eager=eager_us / time_us,
        speedup_vs_compile=compile_us / time_us,
        flags=["note: a tiny µs-sized flag keeps its text"],
    )
    return Evaluation(
        status="ok",
        correctness=[
            WorkloadCorrectness(workload="w", passed=True, kind="ok", trials=3, max_abs_err=3.2e-07)
        ],
        timings=[t],
        speedup_vs_eager=t.speedup_vs_eager,
        speedup_vs_compile=t.speedup_vs_compile,
    )


async def _record(store: Store, search: Search, ev: Evaluation) -> int:
    cand = await store.put_candidate(f"# {ev.timings[0].median_us}\n", "triton")
    return (await store.record_attempt(search.id, None, cand.id, ev)).id


async def test_a_later_attempt_divides_by_the_pinned_baseline(store: Store, search: Search) -> None:
    first = await _record(store, search, timed(395.8, 1000.0, 320.3))
    # another process, another cache: this evaluation's sandbox read torch.compile at 467.0 us
    second = await _record(store, search, timed(386.9, 1010.0, 467.0))
    a, b = await store.get_attempt(first), await store.get_attempt(second)
    assert a.evaluation is not None and b.evaluation is not None
    tb = b.evaluation.timings[0]
    assert tb.compile_us == 320.3 and tb.eager_us == 1000.0
    assert tb.speedup_vs_compile == pytest.approx(320.3 / 386.9)  # 0.83x, not 1.21x
    assert b.evaluation.speedup_vs_compile == pytest.approx(320.3 / 386.9)
    assert b.speedup == pytest.approx(1000.0 / 386.9)
    assert tb.baseline_generation == 1 and tb.compile_baseline is not None
    assert tb.compile_baseline.measured_at == datetime(2026, 12, 4, 19, 2, tzinfo=UTC)
    # both ratios rank against one reading: the faster kernel reads faster
    assert b.evaluation.speedup_vs_compile > a.evaluation.speedup_vs_compile  # type: ignore[operator]
    drift = [f for f in b.evaluation.flags if "own torch.compile reading" in f]
    assert drift and "467.0 us, +46% off the search's baseline 320.3 us" in drift[0], b.evaluation.flags
    assert "ksearch baselines demo --remeasure" in drift[0]
    (pin,) = await baselines.pinned(store, search.id)
    assert pin.compile is not None and pin.compile.time_us == 320.3 and pin.generation == 1


async def test_a_baseline_from_another_gpu_is_said(store: Store, search: Search) -> None:
    await _record(store, search, timed(395.8, 1000.0, 320.3, UUID_A))
    b = await store.get_attempt(await _record(store, search, timed(390.0, 1000.0, 320.3, UUID_B)))
    assert b.evaluation is not None
    other = [f for f in b.evaluation.flags if "another GPU" in f]
    assert other and "GPU-1a2b3c4d" in other[0] and "GPU-9f8e7d6c" in other[0], b.evaluation.flags
    line = baselines.baselines_line(b.evaluation)
    assert (
        line
        == "baselines: the search's (generation 1), measured 2026-12-04 19:02 UTC on NVIDIA H200 GPU-1a2b3c4d…"
    )


async def test_a_remeasurement_restates_every_attempt(store: Store, search: Search) -> None:
    ids = [
        await _record(store, search, timed(395.8, 1000.0, 320.3)),
        await _record(store, search, timed(386.9, 1000.0, 467.0)),
    ]
    before = {i: (await store.get_attempt(i)).evaluation for i in ids}
    new = {
        "w": {"eager": reading("eager", 900.0, UUID_B, 20), "compile": reading("compile", 400.0, UUID_B, 20)}
    }
    out = await baselines.repin(store, search.id, new, reason="re-measured on request")
    assert out.generation == 2 and out.attempts_restated == 2
    assert out.before[0].compile is not None and out.before[0].compile.time_us == 320.3
    for i in ids:
        a = await store.get_attempt(i)
        ev = a.evaluation
        assert ev is not None
        t, old = ev.timings[0], before[i].timings[0]  # type: ignore[union-attr]
        assert t.baseline_generation == 2 and t.compile_us == 400.0 and t.eager_us == 900.0
        assert t.speedup_vs_compile == pytest.approx(400.0 / t.time_us)
        assert a.speedup == pytest.approx(900.0 / t.time_us)
        # what was measured stays as it was written
        assert (t.median_us, t.ci_low_us, t.n, t.flags) == (old.median_us, old.ci_low_us, old.n, old.flags)
        assert ev.correctness == before[i].correctness  # type: ignore[union-attr]
    speedups = await store.attempt_speedups(search.id)
    assert speedups[ids[0]] == pytest.approx(900.0 / 395.8)
    # a later attempt divides by the new generation
    c = await store.get_attempt(await _record(store, search, timed(380.0, 1000.0, 320.3)))
    assert c.evaluation is not None and c.evaluation.timings[0].compile_us == 400.0


async def test_the_trigger_still_refuses_any_other_change(store: Store, search: Search) -> None:
    aid = await _record(store, search, timed(395.8, 1000.0, 320.3))
    raw = sqlite3.connect(store.path)
    try:
        for sql in (
            "UPDATE attempts SET evaluation = json_set(evaluation, '$.timings[0].median_us', 1.0) WHERE id = ?",
            "UPDATE attempts SET evaluation = json_set(evaluation, '$.correctness[0].passed', json('false')) "
            "WHERE id = ?",
            "UPDATE attempts SET speedup = 99.0 WHERE id = ?",
            "UPDATE attempts SET status = 'incorrect' WHERE id = ?",
            "UPDATE attempts SET evaluation = json_set(evaluation, '$.timings[0].flags', json('[]')) WHERE id = ?",
        ):
            with pytest.raises(sqlite3.IntegrityError, match="written once"):
                raw.execute(sql, (aid,))
        # the ratios with the speedup column that mirrors them: restating, which the trigger lets through
        raw.execute(
            "UPDATE attempts SET evaluation = json_set(evaluation, '$.speedup_vs_eager', 2.0), speedup = 2.0 "
            "WHERE id = ?",
            (aid,),
        )
        with pytest.raises(sqlite3.IntegrityError, match="kept"):
            raw.execute("DELETE FROM search_baselines")
    finally:
        raw.close()


async def test_an_attempt_written_under_the_former_field_names_loads_and_is_restated(
    store: Store, search: Search
) -> None:
    """Evaluations stored before the baselines were named for what they hold (a mean under GPU MODE's protocol) say
    `eager_median_us` / `compile_median_us`: they read as `eager_us` / `compile_us`, and a re-measurement restates
    them under the names they have (the trigger sets either aside, nothing else)."""
    aid = await _record(store, search, timed(395.8, 1000.0, 320.3))
    raw = sqlite3.connect(store.path)
    try:  # what an older ksearch wrote: the same record under the former names (the trigger sets both aside)
        raw.execute(
            "UPDATE attempts SET evaluation = json_set(json_remove(evaluation, '$.timings[0].eager_us', "
            "'$.timings[0].compile_us'), '$.timings[0].eager_median_us', 1000.0, '$.timings[0].compile_median_us', "
            "320.3) WHERE id = ?",
            (aid,),
        )
        raw.commit()
    finally:
        raw.close()
    t = (await store.get_attempt(aid)).evaluation.timings[0]  # type: ignore[union-attr]
    assert (t.eager_us, t.compile_us) == (1000.0, 320.3)
    new = {
        "w": {"eager": reading("eager", 900.0, UUID_B, 20), "compile": reading("compile", 400.0, UUID_B, 20)}
    }
    out = await baselines.repin(store, search.id, new, reason="re-measured on request")
    assert out.attempts_restated == 1
    t = (await store.get_attempt(aid)).evaluation.timings[0]  # type: ignore[union-attr]
    assert (t.eager_us, t.compile_us, t.baseline_generation) == (900.0, 400.0, 2)
    raw = sqlite3.connect(store.path)
    try:
        stored = raw.execute(
            "SELECT json_extract(evaluation, '$.timings[0]') FROM attempts WHERE id = ?", (aid,)
        )
        text = stored.fetchone()[0]
        assert (
            '"compile_median_us":400.0' in text and '"compile_us"' not in text
        )  # restated under its own name
        with pytest.raises(sqlite3.DatabaseError, match="written once"):
            raw.execute(
                "UPDATE attempts SET evaluation = json_set(evaluation, '$.timings[0].median_us', 1.0) WHERE id = ?",
                (aid,),
            )
    finally:
        raw.close()
