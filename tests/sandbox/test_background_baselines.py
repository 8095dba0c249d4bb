"""On a GPU the baselines a search divides by are measured in the background from its creation: a prompt never
waits for them, and the first benchmark finds them. Without a GPU, on a simulated one (gpu/worker/simulated.py): the
same scheduling path, the candidates in the interpreter."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox, gpus_visible
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.prompting.contexts import reference_times_text
from ksearch.tools.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.slow]


def _sandbox(tmp: Path) -> LocalSandbox:
    return LocalSandbox(scratch_dir=tmp / "sb", simulated_gpus=0 if gpus_visible() else 1)


async def test_baselines_start_at_creation_and_no_prompt_waits(tmp_path, affine) -> None:
    sb = _sandbox(tmp_path)
    ws = await Workspace.open(tmp_path / "k.db", sandbox=sb)
    try:
        s = await create_search(ws, CreateSearchIn(task=str(affine.source_path)))
        assert len(sb._ref_jobs) == 1  # started by create_search itself
        t0 = time.perf_counter()
        text = await reference_times_text(ws, s)
        assert time.perf_counter() - t0 < 1.0, "a prompt waited for a measurement"
        assert text.startswith(f"timed: {s.config.timing_protocol}")
        (job,) = sb._ref_jobs.values()
        await asyncio.wait_for(asyncio.shield(job), 300)
        measured = await reference_times_text(ws, s)
        assert "being measured" not in measured and " us" in measured, measured
    finally:
        await ws.close()


async def test_a_benchmark_started_with_the_baselines_accounts_for_every_second(tmp_path, affine) -> None:
    """Started while the background baselines run: on a GPU the candidate gets a fresh worker of its own, so
    it may not wait for them at all; where it waits, the wait is a step named for what it waited on."""
    from ksearch.tools.benchmark import BenchmarkIn, benchmark
    from ksearch.tools.common import CandidateRef

    sb = _sandbox(tmp_path)
    ws = await Workspace.open(tmp_path / "k.db", sandbox=sb)
    try:
        s = await create_search(ws, CreateSearchIn(task=str(affine.source_path)))
        out = await benchmark(
            ws,
            BenchmarkIn(
                search=s.id,
                candidate=CandidateRef(
                    source=(Path(__file__).parent / "fixtures" / "candidates" / "good_triton.py").read_text()
                ),
            ),
        )
        ev = out.evaluation
        assert ev.status == "ok", ev.error
        waits = {k for k in ev.seconds_by_step if k.startswith("wait_for_")}
        assert waits <= {"wait_for_baselines", "wait_for_worker", "wait_for_spare"}, ev.seconds_by_step
        # every second of the call is in a step (the wait included), not only the candidate's own
        steps = sum(v for k, v in ev.seconds_by_step.items() if k != "inputs")
        assert steps >= 0.9 * ev.seconds, (steps, ev.seconds, ev.seconds_by_step)
    finally:
        await ws.close()
