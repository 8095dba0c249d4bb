"""Slow input draws are made ahead by a clean (baseline-mode) process into the machine's draws store, once per
(workload, seed): the candidate's process then draws nothing, and neither does another sandbox on the same
machine. Through the real sandbox and workers (jailed where the machine allows it), on a GPU MODE task whose
generator takes 0.6 s per draw."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.sandbox.steps import timed_names
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.draws import seeds as draw_seeds
from ksearch.worldmodel.models import Candidate, EvalSettings

pytestmark = pytest.mark.anyio
SLOW = Path(__file__).parents[1] / "tasks" / "fixtures" / "gpumode" / "slow_draw"
DRAW_S = 0.6
SUM = """
import torch


def custom_kernel(data):
    x, _ = data
    return x.to(torch.float64).sum().to(torch.float32){extra}
"""


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
@pytest.mark.parametrize("parallel", [1, 3])
async def test_slow_draws_are_made_ahead_once_and_served_to_every_process(
    tmp_path: Path, parallel: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(draw_seeds, "parallel_draws", lambda: parallel)
    task = load_task(str(SLOW))
    st = EvalSettings(seed=3, trials=2, workloads=["bench0"])
    ahead = len(draw_seeds.gpumode_seeds(st.seed, st.trials, st.final)) + 1  # and the task's own seed
    first = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, clean_baselines=True, n_workers=1)
    try:
        ev = await first.correctness(Candidate.of(SUM.format(extra=""), "triton"), task, st)
        assert ev.status == "ok", ev.error
        store = first.pool.workers[0].draws
        assert len(list(store.glob("*.pt"))) == ahead
        steps = ev.seconds_by_step
        assert "draw_ahead" in steps
        note = next(f for f in ev.flags if f.startswith("note: inputs drawn ahead"))
        assert f"{ahead} draws" in note and f"{ahead} slow ones kept" in note, note
        # every draw was made ahead, the first in the worker and, with children, the others in them; the
        # candidate's process loaded its two trials from the store (the worker counts its own draws)
        here = ahead if parallel == 1 else 1
        if parallel > 1:
            assert f"{ahead - 1} of them in {parallel} processes at once" in note, note
        assert here * DRAW_S <= steps["inputs"] < (here + 1) * DRAW_S, steps
        ev = await first.correctness(Candidate.of(SUM.format(extra=" + 0"), "triton"), task, st)
        assert ev.status == "ok" and "draw_ahead" not in ev.seconds_by_step  # once per sandbox
        assert ev.seconds_by_step.get("inputs", 0.0) < DRAW_S
    finally:
        await first.close()
    # another sandbox of the machine (another process would do the same) draws nothing: the store serves it
    second = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, clean_baselines=True, n_workers=1)
    try:
        ev = await second.correctness(Candidate.of(SUM.format(extra=" * 1"), "triton"), task, st)
        assert ev.status == "ok", ev.error
        assert ev.seconds_by_step["inputs"] < DRAW_S, ev.seconds_by_step
        assert len(list(store.glob("*.pt"))) == ahead
    finally:
        await second.close()


def test_a_final_gpumode_evaluation_times_the_benchmarks_alone_and_draws_ahead_accordingly() -> None:
    task = load_task(str(SLOW))
    names = [w.name for w in task.workloads if w.split != "smoke"]
    assert names == ["bench0", "test0"]
    final = EvalSettings(seed=1, final=True, timing_protocol="gpumode", workloads=names)
    assert timed_names(task, names, final) == ["bench0"]  # GPU MODE's leaderboard mode checks its tests only
    assert timed_names(task, names, final.model_copy(update={"final": False})) == names
    assert timed_names(task, names, final.model_copy(update={"timing_protocol": "ksearch"})) == names
    assert timed_names(task, ["test0"], final) == ["test0"]  # nothing else to time
    assert draw_seeds.gpumode_seeds(1, 3, True, timed=False) == [1, 2, 3]
    timed = draw_seeds.gpumode_seeds(1, 3, True)
    assert len(timed) == len(set(timed)) == 3 + 2 + draw_seeds.AHEAD_CALLS


LARGE = Path(__file__).parents[1] / "tasks" / "fixtures" / "gpumode" / "large_draw"
FIRST = """
import torch


def custom_kernel(data):
    x, _ = data
    return x[:1000].to(torch.float64).sum().to(torch.float32){extra}
"""


@pytest.mark.slow
async def test_a_task_whose_largest_draw_is_quick_draws_nothing_ahead(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A quick first draw of the largest workload (a GPU generator, a fill kept on the GPU) starts no child."""
    monkeypatch.setattr(draw_seeds, "parallel_draws", lambda: 3)
    task = load_task(str(LARGE))
    st = EvalSettings(seed=3, trials=2, workloads=["bench1"])  # bench1 alone: large and quick
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, clean_baselines=True, n_workers=1)
    try:
        ev = await sb.correctness(Candidate.of(FIRST.format(extra=""), "triton"), task, st)
        assert ev.status == "ok", ev.error
        notes = [f for f in ev.flags if f.startswith("note: inputs drawn ahead")]
        assert not notes or "processes at once" not in notes[0], notes
        assert not list(sb.pool.workers[0].draws.glob("*.pt"))
        assert "draw_ahead" in ev.seconds_by_step, ev.seconds_by_step
        # found quick once: other seeds are not drawn ahead (a worker restart and a draw per workload for nothing)
        again = await sb.correctness(
            Candidate.of(FIRST.format(extra=""), "triton"), task, st.model_copy(update={"seed": 4})
        )
        assert again.status == "ok", again.error
        assert "draw_ahead" not in again.seconds_by_step, again.seconds_by_step
    finally:
        await sb.close()


@pytest.mark.slow
async def test_large_workloads_draw_in_children_from_the_start_and_quick_ones_are_called_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With the inputs' sizes known from the task's facts, only the largest workload's first draw is made in the
    worker (it says the task's draws are slow); the other large workloads' first draws are not (one after another,
    before any child starts: TriMul's final evaluation spent 143 s so): every other draw goes to the children at
    once; a large workload whose first draw was quick has its other draws called off."""
    monkeypatch.setattr(draw_seeds, "parallel_draws", lambda: 3)
    task = load_task(str(LARGE))
    st = EvalSettings(seed=3, trials=2, workloads=["bench0", "bench1"])
    slow = len(draw_seeds.gpumode_seeds(st.seed, st.trials, st.final)) + 1  # and the task's own seed
    sb = LocalSandbox(scratch_dir=tmp_path, call_timeout_s=60.0, clean_baselines=True, n_workers=1)
    try:
        ev = await sb.correctness(Candidate.of(FIRST.format(extra=""), "triton"), task, st)
        assert ev.status == "ok", ev.error
        note = next(f for f in ev.flags if f.startswith("note: inputs drawn ahead"))
        drawn = int(note.split("inputs drawn ahead: ")[1].split(" draws")[0])
        # every draw in the children but bench0's first; bench1's first (quick, not kept) and none or few more
        assert f"{drawn - 1} of them in 3 processes at once" in note, note
        assert slow + 1 <= drawn < 2 * slow, note
        assert f"{slow} slow ones kept" in note, note
        assert "called off" in note, note
        store = sb.pool.workers[0].draws
        assert len(list(store.glob("*.pt"))) == slow  # bench0's: the quick bench1 is never kept
        # serving them is test_slow_draws_are_made_ahead_once_and_served_to_every_process's: here a load is a
        # checksum over 80 MB and a copy, whose seconds on a loaded 2-core machine (up to 1.65 s for the
        # candidate's three) say nothing about whether it drew
    finally:
        await sb.close()
