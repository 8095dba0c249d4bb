"""A task whose reference or inputs are pinned to CUDA, on this machine without a GPU: benchmark and
run_correctness refuse before anything runs or is recorded (no candidate could pass here: a failed attempt would
blame the code for the machine), and `ksearch run` starts no search. Real store, real sandbox (CPU mode)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from toolkit import Snapshot

from ksearch.tools.benchmark import BenchmarkIn, benchmark
from ksearch.tools.common import CandidateRef
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.run_correctness import RunCorrectnessIn, run_correctness
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec
from tests.fixtures.cli import ksearch_cli

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]

CUDA_PINNED = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "gpumode" / "cuda_pinned"
CANDIDATES = Path(__file__).resolve().parents[1] / "sandbox" / "fixtures" / "candidates"
DOUBLE = "def custom_kernel(data):\n    return data * 2\n"
SAID = "this task needs a GPU (reference.py line 13 puts tensors on CUDA"


async def test_benchmark_and_run_correctness_refuse_and_record_nothing(
    ws: Workspace, snapshot: Snapshot
) -> None:
    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    [node] = await propose_intents(ws, ProposeIntentsIn(search=s.id, intents=[IntentSpec(title="double it")]))
    await select_action(ws, SelectActionIn(search=s.id, node_id=node.id))
    before = await snapshot()
    for call in (
        benchmark(ws, BenchmarkIn(search=s.id, node_id=node.id, candidate=CandidateRef(source=DOUBLE))),
        benchmark(ws, BenchmarkIn(search=s.id, candidate=CandidateRef(source=DOUBLE))),
        run_correctness(ws, RunCorrectnessIn(search=s.id, candidate=CandidateRef(source=DOUBLE))),
    ):
        with pytest.raises(ToolFailure) as info:
            await call
        assert SAID in str(info.value) and "nothing was recorded" in str(info.value)
    after = await snapshot()
    assert after["attempts"] == before["attempts"] == [] and after == before


@pytest.mark.slow
def test_ksearch_run_starts_no_search_on_it(tmp_path: Path) -> None:
    db = tmp_path / "k.db"
    said = ksearch_cli(
        tmp_path, "run", str(CUDA_PINNED), "--policy", "tuner", "--rounds", "1", "--db", str(db)
    )
    assert said.returncode == 2, (said.returncode, said.stdout, said.stderr)
    assert SAID in " ".join(said.stderr.split()), said.stderr
    if db.exists():  # opened, perhaps: then without a search in it
        with sqlite3.connect(db) as con:
            assert con.execute("SELECT count(*) FROM searches").fetchone() == (0,)


async def test_its_brief_says_the_facts_are_not_derivable_here_not_pending(ws: Workspace) -> None:
    from ksearch.tools.prompting.contexts import task_brief

    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    brief = await task_brief(ws, s)
    assert brief.facts.startswith("not derivable on this machine: the task needs a GPU (reference.py line 13")
    assert brief.dtype == brief.bound == "not derivable without a GPU (see Task facts)"
    assert "being derived" not in brief.model_dump_json()


async def test_compile_kernel_says_not_checked_never_ok_for_nothing_compiled(ws: Workspace) -> None:
    from ksearch.tools.compile_kernel import CompileKernelIn, compile_kernel

    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    out = await compile_kernel(ws, CompileKernelIn(search=s.id, candidate=CandidateRef(source=DOUBLE)))
    report = out.report
    assert report.verdict() == "not checked" and report.kernels == []
    # dry-run with its CUDA placements read as the CPU's, the candidate launched nothing to compile
    assert "launched no Triton kernel, so none was compiled" in report.unchecked
    assert report.mode.startswith("python/AST checks only; nothing compiled for sm_")
    assert "correctness and timing need a GPU (this task needs one: reference.py line 13" in report.mode


async def test_compile_kernel_compiles_its_kernels_for_sm_90_all_the_same(ws: Workspace) -> None:
    """`ksearch compile` on a GPU MODE task without a GPU said "not compiled: this task needs a GPU": the candidate's
    kernels are compiled for sm_90 now, ptxas's warnings with their codes in the result, and it says what was not
    done."""
    from ksearch.gpu.build.compiler import find_nvcc
    from ksearch.tools.compile_kernel import CompileKernelIn, compile_kernel

    if find_nvcc() is None:
        pytest.skip("nvcc is not installed")
    source = (CANDIDATES / "gpumode_cuda_wgmma.py").read_text()
    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    out = await compile_kernel(
        ws, CompileKernelIn(search=s.id, candidate=CandidateRef(source=source, language="cuda"))
    )
    report = out.report
    assert report.verdict() == "ok" and [k.name for k in report.kernels] == ["wg"], report.diagnostics
    assert report.mode.startswith(
        "compiled for sm_90 without running; correctness and timing need a GPU (this task needs one: reference.py "
        "line 13"
    )
    assert "compiled for sm_90 without running: wg; not done: correctness and timing need a GPU" in "\n".join(
        d.message for d in report.diagnostics
    )
    said = out.model_dump_json()  # what the MCP tool returns
    assert '"severity":"warning","message":"ptxas C7511: Potential Performance Loss: wgmma.mma_async' in said


async def test_final_evaluation_refuses_and_keeps_the_best(ws: Workspace, snapshot: Snapshot) -> None:
    """Here no candidate of it can be re-checked: a final evaluation would fail the search's best (timed on a GPU
    elsewhere) and end the search without a result, as a host's dry run on a copy of an H200 database did."""
    from ksearch.tools.final_eval import FinalEvalIn, final_evaluation

    s = await create_search(ws, CreateSearchIn(task=str(CUDA_PINNED), name="pinned"))
    before = await snapshot()
    with pytest.raises(ToolFailure) as info:
        await final_evaluation(ws, FinalEvalIn(search=s.id))
    assert SAID in str(info.value) and "nothing was recorded" in str(info.value)
    assert await snapshot() == before and (await ws.search(s.id)).status == "new"  # not ended


async def test_a_prompt_served_without_a_gpu_names_the_gpu_the_attempts_ran_on(ws: Workspace) -> None:
    """A search timed on a GPU machine and read here: the brief's hardware is this machine's, and says whose the
    numbers are (a host read 'cpu-interpreter' hardware over attempts that all ran on the H200)."""
    from ksearch.tools.prompting.contexts import task_brief
    from tests.fixtures.evals import gpu_eval

    s = await create_search(ws, CreateSearchIn(task="softmax", name="timed"))
    assert "were timed on" not in (await task_brief(ws, s)).hardware  # nothing timed yet
    cand = await ws.store.put_candidate(DOUBLE, "triton")
    await ws.store.record_attempt(
        s.id, (await ws.store.root(s.id)).id, cand.id, gpu_eval(2.0), author="human"
    )
    hw = (await task_brief(ws, s)).hardware
    assert (
        "cpu_mode=True" in hw and "its attempts were timed on NVIDIA H200: their numbers are that GPU's" in hw
    )
