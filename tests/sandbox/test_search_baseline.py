"""One baseline per search, through the real sandbox and tools: on a simulated GPU (gpu/worker/simulated.py: the GPU's
scheduling path, clean baseline processes and all), a search's second benchmark divides by the baseline its first one
pinned even when its sandbox reads another (the cache now holding another process's reading), says when and where
that baseline was measured, and `ksearch baselines --remeasure` measures anew and restates every attempt.

The interpreter's timings divide by nothing (CPU times are no speed), so the sandbox's evaluations are relabelled
as a GPU's on their way out (`Relabelled`): their device named so, their ratios divided as `_timing` divides them.
The times and baseline readings are the sandbox's own; the pinning and restating are the tools' and the store's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from ksearch.gpu.sandbox.kvcache import JsonFileCache
from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.tools.baselines import BaselinesIn, remeasure_baselines
from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Evaluation
from ksearch.worldmodel.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

LABEL = "NVIDIA H200 (relabelled CPU interpreter times)"


def relabel(ev: Evaluation) -> Evaluation:
    timings = []
    for t in ev.timings:
        base = {
            k: r.model_copy(update={"device": LABEL})
            for k, r in (("eager_baseline", t.eager_baseline), ("compile_baseline", t.compile_baseline))
            if r is not None
        }
        e = t.eager_us
        timings.append(
            t.model_copy(update={"device": LABEL, **base, "speedup_vs_eager": e / t.time_us if e else None})
        )
    sp = [t.speedup_vs_eager for t in timings if t.speedup_vs_eager]
    return ev.model_copy(update={"timings": timings, "speedup_vs_eager": sp[0] if len(sp) == 1 else None})


class Relabelled:
    """The sandbox, its evaluations named as a GPU's (see the module's docstring)."""

    def __init__(self, inner: LocalSandbox) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def evaluate(self, *args: Any, **kwargs: Any) -> Evaluation:
        return relabel(await self.inner.evaluate(*args, **kwargs))


GOOD = (Path(__file__).parent / "fixtures" / "candidates" / "good_triton.py").read_text()


@pytest.fixture(scope="module")
async def sim(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    sb = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sb"), simulated_gpus=1, kernel_audit=False)
    try:
        yield sb
    finally:
        await asyncio.wait_for(sb.close(), 120)


async def _bench(ws: Workspace, search: int, source: str) -> Evaluation:
    out = await benchmark(ws, BenchmarkIn(search=search, candidate=CandidateRef(source=source)))
    assert out.evaluation.status == "ok", out.evaluation.error
    assert out.attempt_id is not None
    att = await ws.store.get_attempt(out.attempt_id)
    assert att.evaluation == out.evaluation  # the result said is the one recorded
    return out.evaluation


async def _scale_cached_baselines(sb: LocalSandbox, factor: float) -> int:
    """What another process's reading of the same baselines would leave in the sandbox's cache."""
    assert isinstance(sb.cache, JsonFileCache)
    keys = [k for k in json.loads(sb.cache.path.read_text()) if k.startswith("baseline:")]
    for k in keys:
        v = await sb.cache.get(k)
        assert v is not None
        scaled = {f: v[f] * factor for f in ("median_us", "mean_us", "ci_low_us", "ci_high_us") if v.get(f)}
        await sb.cache.put(k, {**v, **scaled})
    return len(keys)


async def test_one_baseline_per_search_and_its_remeasurement(
    tmp_path: Path, sim: LocalSandbox, affine: Task
) -> None:
    db = tmp_path / "k.db"
    ws = Workspace(await Store.open(db), Relabelled(sim))  # type: ignore[arg-type]
    try:
        s = await create_search(ws, CreateSearchIn(task=str(affine.source_path)))
        first = await _bench(ws, s.id, GOOD)
        t1 = first.timings[0]
        assert t1.device == LABEL and t1.eager_baseline is not None and t1.baseline_generation == 1
        pinned_us = t1.eager_baseline.time_us
        assert t1.eager_us == pinned_us and t1.speedup_vs_eager == pytest.approx(
            pinned_us / t1.time_us
        )

        assert await _scale_cached_baselines(sim, 3.0) >= 1
        second = await _bench(ws, s.id, GOOD + "\n# the same kernel again\n")
        t2 = second.timings[0]
        assert t2.eager_us == pinned_us  # not the 3x reading its sandbox found
        assert t2.speedup_vs_eager == pytest.approx(pinned_us / t2.time_us)
        assert any(
            "own eager reading" in f and "+200% off the search's baseline" in f for f in second.flags
        ), second.flags
        out = await benchmark(ws, BenchmarkIn(search=s.id, candidate=CandidateRef(source=GOOD)))
        assert "baselines: the search's (generation 1), measured 20" in out.summary
        assert f"UTC on {LABEL}" in out.summary, out.summary

        listed = await remeasure_baselines(ws, BaselinesIn(search=s.id))
        assert listed.generation == 1 and listed.restated is None
        again = await remeasure_baselines(ws, BaselinesIn(search=s.id, remeasure=True))
        assert again.restated is not None and again.generation == 2
        assert again.restated.attempts_restated == 3
        new_us = again.baselines[0].eager.time_us  # type: ignore[union-attr]
        # measured anew, not the planted 3x cache entry (a CPU reading under load may be far off either way)
        assert new_us != pytest.approx(3.0 * pinned_us, rel=1e-9)
        assert "re-measured: generation 2 pinned; 3 attempts' speedups restated" in again.text
        for a in await ws.store.list_attempts(s.id):
            t = a.evaluation.timings[0]  # type: ignore[union-attr]
            assert t.baseline_generation == 2 and t.eager_us == new_us
            assert a.speedup == pytest.approx(new_us / t.time_us)
    finally:
        await ws.store.close()
