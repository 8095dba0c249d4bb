"""An assistant's prompt reading does not wait for the GPU's measured ceilings. On the H200 the first analyse reading
of a TriMul search took 80 s: the task needs a GPU, asking whether this machine has one went through `hardware()`,
and the ceilings waited for the only worker, which the background baselines held. Real store, real sandbox (CPU
mode); the sandbox's `hardware()` is made slow, as a held worker makes it."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import pytest

from ksearch.tools.common import gpu_lacking
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.prompting.contexts import hardware_text
from ksearch.tools.prompting.facts_wait import PROMPT_WAIT_S, bounded, within_reading
from ksearch.tools.prompting.phases import analyse_kernel
from ksearch.tools.workspace import Workspace

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]

CUDA_PINNED = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "gpumode" / "cuda_pinned"
HELD_S = 5.0


async def test_a_bounded_reading_gives_up_on_slow_work_which_goes_on() -> None:
    done: list[int] = []

    async def slow() -> int:
        await asyncio.sleep(1.5)
        done.append(1)
        return 7

    t0 = time.monotonic()
    with bounded(0.2):
        got = await within_reading(slow())
    assert got is None and time.monotonic() - t0 < 1.0
    await asyncio.sleep(2.0)
    assert done == [1]  # shielded: the work finished after the reading gave up on it
    assert await within_reading(slow()) == 7  # unbounded: waits


async def test_a_reading_whose_time_is_spent_still_reads_what_is_ready() -> None:
    """A live host read "its versions follow in a later reading" after three benchmarks: a reading whose time the
    task facts had spent gave the cached hardware a zero wait, which never let it answer."""

    async def ready() -> int:
        return 5  # no await: answered at its first step, as a cached `hardware()` is

    async def slow() -> int:
        await asyncio.sleep(1.0)
        return 6

    with bounded(0.0):
        assert await within_reading(ready()) == 5
        assert await within_reading(slow()) is None


async def test_asking_whether_the_machine_has_a_gpu_never_asks_the_hardware(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = await ws.sandbox()

    async def hardware() -> Any:
        raise AssertionError("hardware() was asked: it may wait a minute for a held worker")

    monkeypatch.setattr(sb, "hardware", hardware)
    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    needs = await gpu_lacking(ws, ws.search_task(s))
    assert needs is not None and "CUDA" in needs  # this machine has no GPU, and it said so at once


async def test_the_analyse_reading_answers_while_the_hardware_waits_for_a_held_worker(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    sb = await ws.sandbox()
    real = sb.hardware
    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    await analyse_kernel(ws, s.id)  # the task's facts in the cache, as a second reading finds them

    async def held() -> Any:
        await asyncio.sleep(HELD_S)
        return await real()

    async def on_a_gpu() -> bool:
        return False  # as on the H200: the sandbox has a GPU, whose ceilings wait for the held worker

    monkeypatch.setattr(sb, "hardware", held)
    monkeypatch.setattr(sb, "runs_without_gpu", on_a_gpu)
    t0 = time.monotonic()
    with bounded():
        text = await analyse_kernel(ws, s.id)
    took = time.monotonic() - t0
    assert took < PROMPT_WAIT_S + 2.0, took
    assert "being measured: the GPU's worker is measuring the ceilings and the baselines" in text, text[:2000]
    assert "read this prompt again in a few seconds" in text
    with bounded():
        assert (await hardware_text(ws)).startswith("being measured")
    assert "device=" in await hardware_text(ws)  # the driver's reading waits for them


async def test_without_a_gpu_a_reading_that_cannot_wait_says_there_is_none(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host read "being measured: the GPU's worker …" on a machine without a GPU: its workers were busy."""
    sb = await ws.sandbox()
    assert await sb.runs_without_gpu()
    real = sb.hardware

    async def held() -> Any:
        await asyncio.sleep(HELD_S)
        return await real()

    monkeypatch.setattr(sb, "hardware", held)
    with bounded():
        text = await hardware_text(ws)
    assert text.startswith("this machine has no GPU") and "GPU's worker" not in text, text


async def test_a_benchmarks_settings_do_not_wait_for_the_hardware(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On the H200 a TriMul search's first benchmark took 72 s, 57 of them choosing its workloads (asking
    `hardware()` whether the machine runs candidates without a GPU) before its evaluation began."""
    from ksearch.tools.common import eval_settings

    sb = await ws.sandbox()

    async def hardware() -> Any:
        raise AssertionError("hardware() was asked: it may wait a minute for a held worker")

    async def on_a_gpu() -> bool:
        return False

    monkeypatch.setattr(sb, "hardware", hardware)
    monkeypatch.setattr(sb, "runs_without_gpu", on_a_gpu)
    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    task = ws.search_task(s)
    st = await eval_settings(ws, s, task, None, 1)
    assert st.workloads == [w.name for w in task.by_split("search")] and len(st.workloads) >= 1


async def test_one_reading_reads_a_tasks_facts_once_and_every_reader_gets_them() -> None:
    """A fresh server's first analyse prompt showed no bank lessons: the task brief read the facts and spent the
    reading's time, and the bank's match read them again with none left (no op pattern, nothing related). Within one
    bounded reading the second reader gets what the first got."""
    from ksearch.gpu.tasks import load_task
    from ksearch.gpu.tasks.facts import task_facts
    from ksearch.tools.prompting.facts_wait import facts_for

    task = load_task("softmax")
    await asyncio.to_thread(
        task_facts, task
    )  # derived already (at the search's creation), cached per content
    with bounded(0.5):
        first = await facts_for(task)
        await asyncio.sleep(0.6)  # the reading's time spent elsewhere (the hardware facts, the tree)
        second = await facts_for(task)
    assert first is not None and second is first
    with bounded(0.0):  # a new reading with its time spent reads nothing new
        assert await facts_for(load_task("cross_entropy")) is None
