"""evaluate_file: a candidate file measured on a task outside any search, with the real sandbox (the Triton
interpreter without a GPU) and no store: the settings come from the same code as run_correctness's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from pydantic import ValidationError

from ksearch.gpu.sandbox.local import LocalSandbox
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.solution import SolutionError
from ksearch.tools.common import eval_settings
from ksearch.tools.errors import ToolFailure
from ksearch.tools.files.candidate import detect_language
from ksearch.tools.files.evaluate import EvaluateFileIn, evaluate_file
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Candidate
from ksearch.worldmodel.store import Store

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]

TESTS = Path(__file__).resolve().parents[1]
AFFINE = TESTS / "sandbox" / "fixtures" / "affine.py"
CANDIDATES = TESTS / "sandbox" / "fixtures" / "candidates"
TRACE = TESTS / "tasks" / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
GEMM = TRACE / "definitions" / "gemm" / "gemm_n64_k32.json"
ROWS = TRACE / "solutions" / "ksearch-fixtures" / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"


@pytest.fixture(scope="module")
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(scope="module")
async def sb(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[LocalSandbox]:
    """One sandbox for the module (its workers take seconds to start), in its own scratch directory."""
    sandbox = LocalSandbox(scratch_dir=tmp_path_factory.mktemp("sandbox"), call_timeout_s=120.0)
    try:
        yield sandbox
    finally:
        await asyncio.wait_for(sandbox.close(), 120)


def _inp(candidate: Path, task: Path = AFFINE, **kw: object) -> EvaluateFileIn:
    return EvaluateFileIn(task=str(task), path=str(candidate), **kw)


@pytest.mark.cpu
@pytest.mark.slow
async def test_a_correct_kernel_is_ok_on_the_smoke_workload(sb: LocalSandbox) -> None:
    out = await evaluate_file(_inp(CANDIDATES / "good_triton.py", seed=5, trials=2), sandbox=sb)
    ev = out.evaluation
    assert ev.status == "ok", ev.error
    assert out.settings.workloads == ["smoke"]  # without a GPU, the default is the smoke workload
    assert (out.settings.seed, out.settings.trials, out.settings.timing_protocol) == (5, 2, "ksearch")
    assert ev.settings is not None and ev.settings.seed == 5
    assert [(r.workload, r.passed, r.trials) for r in ev.correctness] == [("smoke", True, 2)]
    assert ev.timings and ev.timings[0].device == "cpu-interpreter"
    assert out.language == "triton" and out.note is None and out.isolation == sb.isolation
    source = (CANDIDATES / "good_triton.py").read_text()
    assert out.candidate_id == Candidate.of(source, "triton").id
    assert "status: ok" in out.summary and "correct on smoke (2 trials" in out.summary


async def test_a_wrong_kernel_is_incorrect_on_the_named_workload(sb: LocalSandbox) -> None:
    out = await evaluate_file(
        _inp(CANDIDATES / "wrong_values.py", workloads=["small"], trials=1, timing=False), sandbox=sb
    )
    ev = out.evaluation
    assert ev.status == "incorrect"
    assert out.settings.workloads == ["small"]
    assert [(r.workload, r.kind) for r in ev.correctness] == [("small", "wrong_values")]
    assert ev.timings == []  # timing=False: correctness only
    assert "INCORRECT on small: wrong_values" in out.summary


async def test_a_source_that_does_not_parse_is_its_compile_error_not_a_refusal(sb: LocalSandbox) -> None:
    # as `ksearch eval` always did: the evaluation says what is wrong with the candidate
    out = await evaluate_file(_inp(CANDIDATES / "broken_syntax.txt", trials=1, timing=False), sandbox=sb)
    assert out.evaluation.status == "compile_error"
    assert out.evaluation.compile is not None and not out.evaluation.compile.ok


@pytest.mark.cpu
@pytest.mark.slow
async def test_a_solution_json_runs_as_its_spec_says(sb: LocalSandbox) -> None:
    out = await evaluate_file(_inp(ROWS, task=RMSNORM, trials=1, language="cuda"), sandbox=sb)
    name = json.loads(ROWS.read_text())["name"]
    assert out.evaluation.status == "ok", out.evaluation.error
    assert out.language == "triton"  # the solution's spec wins over `language`
    assert out.note is not None and name in out.note
    assert not out.evaluation.pure_pytorch  # its own Triton kernel ran


async def test_the_settings_are_run_correctness_s(sb: LocalSandbox, tmp_path: Path) -> None:
    # a free-standing task in a workspace: the same choice of workloads, compile mode and protocol
    store = await Store.open(tmp_path / "k.db")
    try:
        ws = Workspace(store, sb)
        task = load_task(str(AFFINE))
        theirs = await eval_settings(ws, None, task, None, 3)
    finally:
        await store.close()
    out = await evaluate_file(_inp(CANDIDATES / "good_triton.py", timing=False), sandbox=sb)
    mine = out.settings
    assert mine.model_dump(exclude={"seed"}) == theirs.model_dump(exclude={"seed"})


async def test_refusals_say_what_was_wrong(sb: LocalSandbox, tmp_path: Path) -> None:
    with pytest.raises(ToolFailure, match=r"unknown workload\(s\) 'huge' for task .*; it has: small, smoke"):
        await evaluate_file(_inp(CANDIDATES / "good_triton.py", workloads=["huge"]), sandbox=sb)
    with pytest.raises(ToolFailure, match=r"cannot read .*missing\.py: No such file or directory"):
        await evaluate_file(_inp(tmp_path / "missing.py"), sandbox=sb)
    with pytest.raises(TaskError, match="unknown task 'no_such_task'"):
        await evaluate_file(
            EvaluateFileIn(task="no_such_task", path=str(CANDIDATES / "good_triton.py")), sandbox=sb
        )
    with pytest.raises(SolutionError, match="not for this task's 'gemm_n64_k32'"):
        await evaluate_file(_inp(ROWS, task=GEMM), sandbox=sb)
    with pytest.raises(
        ValidationError, match=r"unknown timing protocol 'fastest'; accepted: ksearch, gpumode"
    ):
        _inp(CANDIDATES / "good_triton.py", timing_protocol="fastest")
    # a protocol the task cannot support is refused with what it accepts (the default is the owner's)
    with pytest.raises(
        ToolFailure, match=r"'gpumode' cannot time task 'affine'.*accepted for this task: ksearch"
    ):
        await evaluate_file(_inp(CANDIDATES / "good_triton.py", timing_protocol="gpumode"), sandbox=sb)
    with pytest.raises(
        ValidationError, match=r"unknown language 'rust'; accepted: auto, triton, cuda, cpp_ext"
    ):
        _inp(CANDIDATES / "good_triton.py", language="rust")
    with pytest.raises(ValidationError, match="trials"):
        _inp(CANDIDATES / "good_triton.py", trials=0)


def test_the_language_is_detected_from_the_source() -> None:
    assert detect_language((CANDIDATES / "cuda_good.py").read_text()) == "cuda"
    assert detect_language((CANDIDATES / "cpp_ext_broken.py").read_text()) == "cpp_ext"
    assert detect_language((CANDIDATES / "good_triton.py").read_text()) == "triton"


ROWSCALE_DEF = TESTS / "tasks" / "fixtures" / "flashinfer" / "rowscale_h64.json"
ROWSCALE_RUN = """import torch
import triton
import triton.language as tl


@triton.jit
def _rows(x, w, y, rms, eps, H: tl.constexpr):
    r = tl.program_id(0)
    cols = tl.arange(0, H)
    v = tl.load(x + r * H + cols)
    s = tl.sqrt(tl.sum(v * v, axis=0) / H + eps)
    tl.store(rms + r, s)
    tl.store(y + r * H + cols, v / s * tl.load(w + cols))


def run(x, weight, eps):
    tokens, hidden = x.shape
    y = torch.empty_like(x)
    rms = torch.empty(tokens, dtype=x.dtype, device=x.device)
    _rows[(tokens,)](x, weight, y, rms, eps, H=hidden)
    return y, rms
"""


def definition_apart(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A FlashInfer-Bench definition with no workloads beside it, its workloads JSONL elsewhere, and a kernel."""
    definition = tmp_path / "defs" / "rowscale_h64.json"
    definition.parent.mkdir()
    definition.write_text(ROWSCALE_DEF.read_text())
    workloads = tmp_path / "elsewhere" / "rows.jsonl"
    workloads.parent.mkdir()
    workloads.write_text(ROWSCALE_DEF.with_suffix(".jsonl").read_text())
    kernel = tmp_path / "rows.py"
    kernel.write_text(ROWSCALE_RUN)
    return definition, workloads, kernel


@pytest.mark.cpu
@pytest.mark.slow
async def test_a_definition_s_workloads_can_come_from_a_file_elsewhere(
    sb: LocalSandbox, tmp_path: Path
) -> None:
    definition, workloads, kernel = definition_apart(tmp_path)
    with pytest.raises(TaskError, match="no workloads JSONL found for this definition"):
        await evaluate_file(_inp(kernel, task=definition), sandbox=sb)
    out = await evaluate_file(
        _inp(kernel, task=definition, workloads_file=str(workloads), trials=1), sandbox=sb
    )
    assert out.evaluation.status == "ok", out.summary
    task = load_task(str(definition), workloads=str(workloads))
    assert out.settings.workloads == [task.smoke().name] and task.smoke().params["axes"] == {"tokens": 7}


async def test_a_workloads_file_or_a_precision_the_task_cannot_take_is_refused(
    sb: LocalSandbox, tmp_path: Path
) -> None:
    _, workloads, kernel = definition_apart(tmp_path)
    with pytest.raises(TaskError, match=r"a workloads file \(.*rows\.jsonl\) is FlashInfer-Bench's: it goes with a "
                       r"definition \.json; 'affine' is a kernelbench task"):  # fmt: skip
        await evaluate_file(_inp(kernel, workloads_file=str(workloads)), sandbox=sb)
    with pytest.raises(
        ToolFailure, match="precision fp16 is KernelBench's setting, for a KernelBench problem file"
    ):
        await evaluate_file(_inp(CANDIDATES / "good_triton.py", precision="fp16"), sandbox=sb)
    with pytest.raises(ValidationError, match="precision"):
        _inp(CANDIDATES / "good_triton.py", precision="int8")
