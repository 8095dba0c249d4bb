"""tools.solutions, called as functions over a real SQLite store: a FlashInfer-Bench Solution file recognised and
taken as the candidate to submit, and a search's best kernel exported as a Solution that loads back as the
same candidate; every refusal a SolutionError (a KsearchError)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from ksearch.gpu.tasks.flashinfer.solution import SOLUTION_MARK, parse_solution
from ksearch.tools.common import resolve_candidate
from ksearch.tools.files.solutions import SolutionError, export_solution, is_solution, submitted_candidate
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.edits import apply_intents
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import (
    Evaluation,
    IntentSpec,
    Search,
    SearchConfig,
)
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

TRACE = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
ROWS = TRACE / "solutions" / "ksearch-fixtures" / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"
NATIVE = parse_solution(ROWS.read_text()).source("main.py")  # a kernel as a model writes one: `run`
PYTHON = "import torch\n\nclass ModelNew(torch.nn.Module):\n    pass\n"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "sol.db") as w:
        yield w


def gpu_eval(speedup: float) -> Evaluation:
    return evals.gpu_eval(speedup, max_abs_err=1e-3)


async def _search(ws: Workspace, task: str, name: str) -> Search:
    return await ws.store.create_search(name, task, SearchConfig())


def test_a_solution_file_is_told_from_a_python_module() -> None:
    assert is_solution(ROWS.read_text())
    assert not is_solution(PYTHON)
    assert not is_solution(RMSNORM.read_text())  # a definition: JSON, but no spec and sources
    assert not is_solution("{not json")


def test_a_submitted_file_becomes_the_candidate_to_benchmark() -> None:
    text = ROWS.read_text()
    sol = submitted_candidate(text, "cuda")
    assert sol.solution_json == text and sol.source is None  # the Solution's spec gives the language
    py = submitted_candidate(PYTHON, "cuda")
    assert (py.source, py.language, py.solution_json) == (PYTHON, "cuda", None)
    with pytest.raises(ValidationError, match="triton"):  # the accepted languages are named
        submitted_candidate(PYTHON, "fortran")


async def test_a_submitted_solution_loads_as_its_candidate_and_is_checked_against_the_task(
    ws: Workspace,
) -> None:
    rms = ws.task(str(RMSNORM))
    cand = await resolve_candidate(ws, submitted_candidate(ROWS.read_text(), "triton"), rms)
    # the file itself, then the Solution's name, author and entry path (kept for export)
    assert cand.language == "triton" and cand.source.partition(SOLUTION_MARK)[0] == NATIVE + "\n\n"
    with pytest.raises(SolutionError, match="'softmax' is a kernelbench task"):
        await resolve_candidate(ws, submitted_candidate(ROWS.read_text(), "triton"), ws.task("softmax"))


async def test_the_best_kernel_exports_as_a_solution_that_loads_back_as_itself(ws: Workspace) -> None:
    s = await _search(ws, str(RMSNORM), "rms")
    store = ws.store
    root = await store.root(s.id)
    (intent,) = await apply_intents(store, s.id, [IntentSpec(title="split rows")], author="llm:m", round=1)
    slow = await store.put_candidate(NATIVE + "# slower\n", "triton")
    fast = await store.put_candidate(NATIVE, "triton")
    await store.record_attempt(s.id, root.id, slow.id, gpu_eval(1.2), author="human")
    best = await store.record_attempt(s.id, intent.id, fast.id, gpu_eval(2.5), author="llm:claude-test")
    out = await export_solution(ws, "rms")
    assert (out.search_id, out.attempt_id) == (s.id, best.id)
    sol = parse_solution(out.solution_json)
    assert sol.name == out.name == f"rmsnorm_h128_ksearch_rms_a{best.id}" and sol.definition == "rmsnorm_h128"
    assert sol.author == "ksearch-llm-claude-test" and sol.spec.target_hardware == ["NVIDIA_H200"]
    assert sol.description == (
        f"ksearch search 'rms', attempt #{best.id} (split rows); 2.500x vs eager PyTorch on NVIDIA H200"
    )
    # what `ksearch submit` of the exported file would run: the very same candidate
    back = await resolve_candidate(
        ws, submitted_candidate(out.solution_json, "triton"), ws.task(str(RMSNORM))
    )
    assert back.id == fast.id


async def test_refusals_say_why(ws: Workspace) -> None:
    await _search(ws, "softmax", "kb")
    with pytest.raises(
        SolutionError, match=r"'softmax', a kernelbench task: a Solution JSON exists only for"
    ):
        await export_solution(ws, "kb")
    s = await _search(ws, str(RMSNORM), "empty")
    with pytest.raises(SolutionError, match="has no best kernel to export yet: no timed correct attempt yet"):
        await export_solution(ws, s.id)
    helpers = await ws.store.put_candidate(
        "from ksearch.gpu import nvrtc\n\ndef run(hidden_states, weight):\n    return hidden_states\n", "cuda"
    )
    await ws.store.record_attempt(s.id, (await ws.store.root(s.id)).id, helpers.id, gpu_eval(1.5))
    with pytest.raises(SolutionError, match=r"imports ksearch's own `ksearch.gpu.nvrtc`") as info:
        await export_solution(ws, "empty")
    assert isinstance(info.value, KsearchError) and isinstance(info.value, ValueError)


async def test_a_cpu_attempt_exports_by_id_marked_as_never_timed_on_a_gpu(ws: Workspace) -> None:
    s = await _search(ws, str(RMSNORM), "cpu")
    cand = await ws.store.put_candidate(NATIVE, "triton")
    cpu = gpu_eval(1.0)
    cpu = cpu.model_copy(
        update={
            "timings": [
                cpu.timings[0].model_copy(update={"device": "cpu-interpreter", "speedup_vs_eager": None})
            ],
            "speedup_vs_eager": None,
        }
    )
    a = await ws.store.record_attempt(s.id, (await ws.store.root(s.id)).id, cand.id, cpu)
    with pytest.raises(
        SolutionError, match=rf"1 correct, none timed on a GPU; pick one with --attempt N .*#{a.id}"
    ):
        await export_solution(ws, "cpu")
    out = await export_solution(ws, "cpu", attempt=a.id)
    sol = parse_solution(out.solution_json)
    assert out.attempt_id == a.id and sol.spec.target_hardware == [
        "cuda"
    ]  # written for a GPU, never timed on one
    assert sol.description == (
        f"ksearch search 'cpu', attempt #{a.id}; correct on the CPU interpreter, never timed on a GPU"
    )


async def test_export_kernel_writes_the_same_solution_as_export_solution(ws: Workspace) -> None:
    from ksearch.tools.export_kernel import ExportKernelIn, export_kernel

    s = await _search(ws, str(RMSNORM), "rms")
    fast = await ws.store.put_candidate(NATIVE, "triton")
    best = await ws.store.record_attempt(
        s.id, (await ws.store.root(s.id)).id, fast.id, gpu_eval(2.5), author="human"
    )
    out = await export_kernel(ws, ExportKernelIn(search="rms", format="solution"))
    sol = await export_solution(ws, "rms")
    assert (out.attempt_id, out.format, out.language) == (best.id, "solution", "triton")
    assert out.text == sol.solution_json and out.filename == f"{sol.name}.json"
    assert out.status.startswith("correct; timed on")
