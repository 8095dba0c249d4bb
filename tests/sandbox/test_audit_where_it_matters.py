"""The kernel audit where it matters: a candidate slower beyond noise than its node's best on every workload can become
no best, so its audit (a profiler session, seconds on a GPU) is left out and said so; an attempt left unaudited never
becomes a best, and the benchmark tool asks for the audit to be left out only against an audited, GPU-timed best.
Real sandbox on a simulated GPU (gpu/worker/simulated.py), real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import Task
from ksearch.tools.benchmark import _audit_threshold
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.models import Evaluation
from ksearch.worldmodel.store import Store
from tests.sandbox.conftest import candidate, settings

pytestmark = [pytest.mark.anyio, pytest.mark.slow, pytest.mark.timeout(300)]


def _as_gpu(ev: Evaluation, us: float) -> Evaluation:
    """The evaluation's timing as a GPU's, at `us` (a simulated GPU's workers time in the interpreter)."""
    t = ev.timings[0].model_copy(
        update={
            "device": "NVIDIA H200",
            "median_us": us,
            "mean_us": us,
            "ci_low_us": 0.99 * us,
            "ci_high_us": 1.01 * us,
        }
    )
    env = ev.env.model_copy(update={"device": "NVIDIA H200", "cpu_mode": False}) if ev.env else None
    return ev.model_copy(update={"timings": [t], "env": env})


async def test_a_candidate_slower_than_the_best_everywhere_is_not_audited_and_never_a_best(
    tmp_path: Path, affine: Task
) -> None:
    sb = LocalSandbox(scratch_dir=tmp_path / "sb", simulated_gpus=1, call_timeout_s=90.0)
    st = settings(trials=1)
    try:
        first = await sb.evaluate(candidate("good_triton"), affine, st)
        assert first.status == "ok" and first.audited is True and "audit" in first.seconds_by_step
        wl = first.timings[0].workload
        # slower than the threshold on every workload: no audit, and it says so
        slow = await sb.evaluate(
            candidate(candidate("good_triton").source + "\n# v2\n"),
            affine,
            st,
            audit_unless_slower_than={wl: 1e-6},
        )
        assert slow.status == "ok" and slow.audited is False, (slow.audited, slow.flags)
        assert "audit" not in slow.seconds_by_step
        assert any("kernel audit was left out" in f for f in slow.flags), slow.flags
        # faster than the threshold: audited
        fast = await sb.evaluate(
            candidate(candidate("good_triton").source + "\n# v3\n"),
            affine,
            st,
            audit_unless_slower_than={wl: 1e12},
        )
        assert fast.audited is True and "audit" in fast.seconds_by_step
        # a workload the threshold does not name: audited (it could be faster there)
        other = await sb.evaluate(
            candidate(candidate("good_triton").source + "\n# v4\n"),
            affine,
            st,
            audit_unless_slower_than={"x": 1e-6},
        )
        assert other.audited is True
    finally:
        await sb.close()

    async with await Store.open(tmp_path / "k.db") as store:
        s = await store.create_search("a", str(affine.source_path))
        (n,) = await apply_intents(store, s.id, [{"title": "an idea"}], "human", 0)
        best = await store.record_attempt(
            s.id, n.id, (await store.put_candidate("# a\n", "triton")).id, _as_gpu(first, 10.0)
        )
        assert (await store.get_node(n.id)).best_attempt_id == best.id
        # the benchmark tool's threshold: the node's best's upper CI per workload
        ws = Workspace(store, None)
        assert await _audit_threshold(ws, await store.get_node(n.id)) == {wl: pytest.approx(10.1)}
        assert await _audit_threshold(ws, await store.root(s.id)) is None  # no best there: always audit
        # the slower candidate, unaudited, is recorded and stays out of the best
        await store.record_attempt(
            s.id, n.id, (await store.put_candidate("# b\n", "triton")).id, _as_gpu(slow, 20.0)
        )
        assert (await store.get_node(n.id)).best_attempt_id == best.id
