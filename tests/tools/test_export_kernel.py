"""tools.export_kernel and gpu/export/standalone.py, called as functions over a real SQLite store: a search's kernel written
out as a GPU MODE submission.py or a KernelBench ModelNew file that imports nothing of ksearch (a CUDA or C++
extension candidate with the standalone copy of its helper written in), marked with what ksearch measured of it;
the attempt picked by default (the best) or by id (a CPU run's correct attempts); every refusal saying why.

Evaluations are hand-made (no GPU here); tests/tasks/test_export_runs.py runs exported files with the owners'
evaluators."""

from __future__ import annotations

import ast
import ctypes
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from ksearch.gpu import nvrtc
from ksearch.gpu.export.nvrtc import _ksearch_nvrtc
from ksearch.gpu.export.standalone import HELPERS, StandaloneError, ksearch_imports, standalone
from ksearch.tools.errors import ToolFailure
from ksearch.tools.export_kernel import CPU_STATUS, ExportKernelIn, export_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.errors import KsearchError
from ksearch.worldmodel.models import (
    CPU_INTERPRETER,
    Evaluation,
    Search,
    SearchConfig,
    WorkloadCorrectness,
    WorkloadTiming,
)
from tests.fixtures import evals

pytestmark = pytest.mark.anyio

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "fixtures"
SCALED_ADD = TASKS / "gpumode" / "scaled_add"
ROW_SCALE = TASKS / "kernelbench" / "l1_row_scale.py"
RMSNORM = TASKS / "flashinfer_trace" / "definitions" / "rmsnorm" / "rmsnorm_h128.json"

TRITON = """import torch
import triton
import triton.language as tl


@triton.jit
def _scaled_add(a, b, out, scale, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(out + offs, tl.load(a + offs, mask=m) * scale + tl.load(b + offs, mask=m), mask=m)


def custom_kernel(data):
    a, b, scale, out = data
    _scaled_add[(triton.cdiv(a.numel(), 256),)](a, b, out, scale, a.numel(), BLOCK=256)
    return out
"""

# A KernelBench ModelNew in CUDA as a model writes one, compiling on first use (so the module loads on a CPU)
CUDA = '''"""Row scale in CUDA C through NVRTC."""
from __future__ import annotations

import torch
import torch.nn as nn

from ksearch.gpu import nvrtc

SRC = r"""
extern "C" __global__ void row_scale(const float* x, const float* s, float* y, long long n, int dim) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * s[i % dim];
}
"""


class ModelNew(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(dim))
        self.kernel: nvrtc.Kernel | None = None

    def forward(self, x):
        if self.kernel is None:
            self.kernel = nvrtc.compile(SRC, "row_scale")
        x = x.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        self.kernel.launch(grid=((n + 255) // 256,), block=(256,), args=[x, self.scale, out, nvrtc.i64(n), x.shape[-1]])
        return out
'''


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def ws(tmp_path: Path) -> AsyncIterator[Workspace]:
    async with await Workspace.open(tmp_path / "export.db") as w:
        yield w


def gpu_eval(speedup: float) -> Evaluation:
    return evals.gpu_eval(speedup, workload="bench0", max_abs_err=0.0)


def cpu_eval() -> Evaluation:
    timing = WorkloadTiming(
        workload="smoke",
        median_us=3e3,
        iqr_us=1.0,
        ci_low_us=2e3,
        ci_high_us=4e3,
        n=2,
        device=CPU_INTERPRETER,
    )
    return Evaluation(
        status="ok",
        correctness=[
            WorkloadCorrectness(workload="smoke", passed=True, kind="ok", trials=3, max_abs_err=0.0)
        ],
        timings=[timing],
    )


def wrong_eval() -> Evaluation:
    wrong = WorkloadCorrectness(
        workload="smoke", passed=False, kind="wrong_values", trials=3, max_abs_err=2.0
    )
    return Evaluation(status="incorrect", correctness=[wrong], error="smoke: 7 of 17 elements differ")


async def _search(ws: Workspace, task: Path, name: str, **config: Any) -> Search:
    return await ws.store.create_search(name, str(task), SearchConfig(**config))


async def _attempt(ws: Workspace, s: Search, source: str, language: str, ev: Evaluation) -> int:
    cand = await ws.store.put_candidate(source, language)
    a = await ws.store.record_attempt(s.id, (await ws.store.root(s.id)).id, cand.id, ev, author="human")
    return a.id


async def test_after_a_final_evaluation_every_view_names_which_workloads_each_figure_covers(
    ws: Workspace,
) -> None:
    """The search-phase figure (the search workloads) and the final one (all workloads) were read as one number:
    the export header, the tree's header and list_searches say which set each covers, the final figure first."""
    from ksearch.tools.get_tree import GetTreeIn, get_tree
    from ksearch.tools.list_searches import list_searches
    from ksearch.worldmodel.models import FinalOutcome

    s = await _search(ws, SCALED_ADD, "fin")
    best = await _attempt(ws, s, TRITON, "triton", gpu_eval(2.5))
    tree = (await get_tree(ws, GetTreeIn(search="fin"))).text
    assert "best 2.500x over 1 search workload at #" in tree.splitlines()[0], tree
    cand = (await ws.store.get_attempt(best)).candidate_id
    outcome = FinalOutcome(
        attempt_id=best, candidate_id=cand, passed=True, status="ok", speedup_vs_eager=2.4, workloads=7
    )
    await ws.store.record_final(s.id, [outcome], [])
    out = await export_kernel(ws, ExportKernelIn(search="fin", format="submission"))
    assert out.status.endswith(
        "2.500x vs eager PyTorch (geomean over 1 search workload); final evaluation: 2.400x over all 7 workloads"
    ), out.status
    assert out.status in out.text  # the file's header says the same
    tree = (await get_tree(ws, GetTreeIn(search="fin"))).text
    assert "best 2.400x over all 7 workloads (final evaluation; 2.500x over 1 search workload)" in tree, tree
    (row,) = await list_searches(ws)
    assert (row.best_speedup_vs_eager, row.best_workloads) == (2.5, 1)
    assert (row.final_speedup_vs_eager, row.final_workloads) == (2.4, 7)
    assert row.best.startswith("2.400x over all 7 workloads (final evaluation;"), row.best
    # an attempt the final evaluation did not re-check says so: its figures say nothing of that one
    other = await _attempt(ws, s, TRITON + "\n# another\n", "triton", gpu_eval(2.1))
    out = await export_kernel(ws, ExportKernelIn(search="fin", format="submission", attempt=other))
    assert out.status.endswith(f"not among the attempts the final evaluation re-checked (#{best})"), out.status


def _imports_ksearch(text: str) -> bool:
    return bool(ksearch_imports(ast.parse(text)))


# ---------------------------------------------------------------- the attempt, and what it says of itself


async def test_the_best_triton_kernel_goes_out_as_it_is_with_its_numbers_on_top(ws: Workspace) -> None:
    s = await _search(ws, SCALED_ADD, "sa")
    await _attempt(ws, s, TRITON + "# slower\n", "triton", gpu_eval(1.2))
    best = await _attempt(ws, s, TRITON, "triton", gpu_eval(2.5))
    out = await export_kernel(ws, ExportKernelIn(search="sa", format="submission"))
    assert (out.attempt_id, out.filename, out.helpers) == (best, "submission.py", [])
    assert out.status == (
        "correct; timed on NVIDIA H200 by the ksearch protocol: 2.500x vs eager PyTorch (geomean over 1 search workload)"
    )
    head, body = out.text.split("#\n", 1)
    assert body == TRITON  # the candidate itself, unchanged
    assert head.startswith(
        f"# scaled_add: a GPU MODE submission written by ksearch from search 'sa', attempt #{best}"
    )
    assert f"status: {out.status}" in head
    assert any("eval.py imports custom_kernel" in n for n in out.notes)


async def test_on_a_cpu_a_correct_attempt_is_picked_by_id_and_marked_as_never_timed(ws: Workspace) -> None:
    s = await _search(ws, SCALED_ADD, "cpu")
    first = await _attempt(ws, s, TRITON, "triton", cpu_eval())
    wrong = await _attempt(ws, s, TRITON.replace("* scale", "* 2"), "triton", wrong_eval())
    second = await _attempt(ws, s, TRITON + "# again\n", "triton", cpu_eval())
    with pytest.raises(ToolFailure) as refused:  # nothing was timed on a GPU: no best to pick
        await export_kernel(ws, ExportKernelIn(search="cpu", format="submission"))
    said = str(refused.value)
    assert "has no best kernel to export yet: 2 correct, none timed on a GPU" in said
    assert (
        "--attempt N (attempt=N over MCP)" in said
        and f"#{first}, #{second}" in said
        and f"#{wrong}" not in said
    )
    out = await export_kernel(ws, ExportKernelIn(search="cpu", format="submission", attempt=second))
    assert (
        out.attempt_id == second
        and out.status == CPU_STATUS == "correct on the CPU interpreter, never timed on a GPU"
    )
    assert (
        f"# triton candidate {(await ws.store.get_attempt(second)).candidate_id}; status: {CPU_STATUS}"
        in out.text
    )
    with pytest.raises(
        ToolFailure, match=rf"attempt #{wrong} of search 'cpu' is incorrect: smoke: 7 of 17"
    ) as no:
        await export_kernel(ws, ExportKernelIn(search="cpu", format="submission", attempt=wrong))
    assert f"the resource ksearch://attempts/{wrong} over MCP" in str(
        no.value
    )  # where a host reads its source
    with pytest.raises(ToolFailure, match=rf"has no attempt #99: its attempts are #{first}–#{second}"):
        await export_kernel(ws, ExportKernelIn(search="cpu", format="submission", attempt=99))
    other = await _search(ws, SCALED_ADD, "other")
    with pytest.raises(ToolFailure, match=rf"search 'other' has no attempt #{first}: it has no attempt yet"):
        await export_kernel(ws, ExportKernelIn(search=other.id, format="submission", attempt=first))


@pytest.mark.parametrize(
    ("task", "fmt", "said"),
    [
        (
            ROW_SCALE,
            "submission",
            "a kernelbench task; a GPU MODE submission.py is written for a search on a GPU "
            "MODE folder; this one exports as format 'kernelbench' (`ksearch export --kernelbench`: a KernelBench "
            "ModelNew file)",
        ),
        (
            SCALED_ADD,
            "kernelbench",
            "a gpumode task; a KernelBench ModelNew file is written for a search on a "
            "KernelBench-format task file; this one exports as format 'submission' (`ksearch export --submission`: "
            "a GPU MODE submission.py)",
        ),
        (
            RMSNORM,
            "submission",
            "a flashinfer task; a GPU MODE submission.py is written for a search on a GPU MODE "
            "folder; this one exports as format 'solution' (`ksearch export --solution`: a FlashInfer-Bench "
            "Solution JSON)",
        ),
        (
            ROW_SCALE,
            "solution",
            "a kernelbench task; a FlashInfer-Bench Solution JSON is written for a search on a FlashInfer-Bench "
            "definition; this one exports as format 'kernelbench'",
        ),
    ],
)
async def test_a_format_the_search_s_task_is_not_written_in_is_refused(
    ws: Workspace, task: Path, fmt: str, said: str
) -> None:
    s = await _search(ws, task, "x")
    await _attempt(ws, s, TRITON, "triton", gpu_eval(2.0))
    with pytest.raises(ToolFailure) as refused:
        await export_kernel(ws, ExportKernelIn.model_validate({"search": "x", "format": fmt}))
    assert said in " ".join(str(refused.value).split())


async def test_a_cuda_kernel_goes_out_with_its_launcher_written_in(ws: Workspace) -> None:
    s = await _search(ws, ROW_SCALE, "kb", precision="fp16")
    a = await _attempt(ws, s, CUDA, "cuda", gpu_eval(3.0))
    out = await export_kernel(ws, ExportKernelIn(search=s.id, format="kernelbench"))
    assert (
        out.attempt_id == a
        and out.helpers == ["nvrtc"]
        and out.filename == f"l1_row_scale_ksearch_kb_a{a}.py"
    )
    assert not _imports_ksearch(out.text) and "from __future__" not in out.text
    notes = " ".join(out.notes)
    assert "needs CuPy" in notes and "check_kernel=False" in notes and "evaluate with precision=fp16" in notes
    assert "`from __future__ import annotations` taken out" in notes
    namespace: dict[str, Any] = {}
    exec(compile(out.text, "exported.py", "exec"), namespace)  # defines everything; compiles nothing yet
    assert namespace["nvrtc"] is namespace["_ksearch_nvrtc_lib"]
    model = namespace["ModelNew"](96)  # built as KernelBench builds it: its weights, no kernel compiled yet
    assert model.scale.shape == (96,) and model.kernel is None


async def test_a_candidate_needing_more_of_ksearch_is_refused_with_its_line(ws: Workspace) -> None:
    s = await _search(ws, SCALED_ADD, "inputs")
    a = await _attempt(
        ws, s, "import torch\nfrom ksearch.gpu.inputs import signed\n" + TRITON, "triton", cpu_eval()
    )
    with pytest.raises(StandaloneError) as refused:
        await export_kernel(ws, ExportKernelIn(search="inputs", format="submission", attempt=a))
    said = str(refused.value)
    assert f"attempt #{a} of search 'inputs' cannot be written out: line 2: the candidate imports " in said
    assert "`signed` from `ksearch.gpu.inputs`, which exists only where ksearch is installed" in said
    assert isinstance(refused.value, KsearchError) and isinstance(refused.value, ValueError)


# ---------------------------------------------------------------- gpu/export/standalone.py


def test_every_way_of_importing_a_helper_is_replaced_on_its_own_line() -> None:
    source = (
        '"""doc"""\n'
        "import os, ksearch.gpu.nvrtc as nv\n"
        "from gpu import cpp_ext\n"  # the helpers' name before the package existed
        "from ksearch.gpu.nvrtc import (\n    compile as build,\n    i64,\n)\n"
        "\n"
        "def f():\n"
        "    from ksearch.gpu import nvrtc\n"
        "    return nvrtc.compile, nv.Kernel, cpp_ext.load, build, i64, os\n"
    )
    out = standalone(source, header=["h"])
    assert out.helpers == ["nvrtc", "cpp_ext"] and out.notes == []
    lines = out.text.splitlines()
    assert lines[:2] == ["# h", '"""doc"""']  # the docstring stays the module's
    tail = out.text[out.text.rindex("# ---- end of what ksearch wrote in ----") :].splitlines()[2:]
    assert tail == [
        "import os; nv = _ksearch_nvrtc_lib",
        "cpp_ext = _ksearch_cpp_ext_lib",
        "build = _ksearch_nvrtc_lib.compile; i64 = _ksearch_nvrtc_lib.i64",
        "",
        "def f():",
        "    nvrtc = _ksearch_nvrtc_lib",
        "    return nvrtc.compile, nv.Kernel, cpp_ext.load, build, i64, os",
    ]
    namespace: dict[str, Any] = {}
    exec(compile(out.text, "exported.py", "exec"), namespace)
    got = namespace["f"]()
    assert got[0] is got[3] and got[1].__name__ == "Kernel" and callable(got[2]) and got[4](5).value == 5


def test_future_imports_stay_first_or_are_taken_out() -> None:
    source = "from __future__ import annotations\n\nfrom ksearch.gpu import nvrtc\nX = nvrtc.i32(1)\n"
    kept = standalone(source, header=[])
    assert kept.text.startswith("from __future__ import annotations\n# ---- written in by ksearch")
    dropped = standalone(source, header=["h"], drop_future=True)
    assert "__future__" not in dropped.text and dropped.text.startswith("# h\n# ---- written in by ksearch")
    assert dropped.notes and "line 1: `from __future__ import annotations` taken out" in dropped.notes[0]
    # what KernelBench's loader does with a build directory: lines of its own before the file's
    exec(compile("import os\n" + dropped.text, "kb.py", "exec"), {})


@pytest.mark.parametrize(
    ("source", "said"),
    [
        (
            "import torch\n\nfrom ksearch.gpu.fib_build import build\n",
            "line 3: the candidate imports `build` from `ksearch.gpu.fib_build`",
        ),
        (
            "import ksearch.gpu.nvrtc\n",
            "`ksearch.gpu.nvrtc` without a name of its own (`import ksearch.gpu.nvrtc as nvrtc`)",
        ),
        (
            "from ksearch.gpu.nvrtc import COMPILED\n",
            "imports `COMPILED` from ksearch.gpu.nvrtc, which the "
            "standalone copy written out does not have; it has compile, Kernel, i32",
        ),
        (
            "from ksearch.gpu import nvrtc\n\nn = len(nvrtc.REQUESTED)\n",
            "line 3: the candidate uses `nvrtc.REQUESTED` of ksearch.gpu.nvrtc",
        ),
        ("import ksearch\n", "line 1: the candidate imports `ksearch`"),
        ("def f(:\n", "does not parse as Python: line 1"),
    ],
)
def test_what_cannot_stand_alone_is_refused_with_its_line(source: str, said: str) -> None:
    with pytest.raises(StandaloneError) as refused:
        standalone(source, header=[])
    assert said in str(refused.value)


def _code(text: str) -> str:
    """The launcher's text as KernelBench's static checker reads a file: `#` comments dropped."""
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


@pytest.mark.parametrize("name", sorted(HELPERS))
def test_the_helper_copies_hold_no_construct_kernelbench_refuses(name: str) -> None:
    text = _code(HELPERS[name].text())
    for pattern in (r"\btry\s*:", r"\bexcept\b", r"\bpass\b", r"\bimport\s+(threading|multiprocessing)\b"):
        assert re.search(pattern, text) is None, (name, pattern)
    assert not _imports_ksearch(HELPERS[name].text())


def test_the_nvrtc_copy_has_what_ksearch_gpu_nvrtc_gives_a_candidate() -> None:
    public = {
        n
        for n, obj in vars(nvrtc).items()
        if not n.startswith("_") and getattr(obj, "__module__", None) == nvrtc.__name__
    }
    assert set(HELPERS["nvrtc"].names) == public - {"NvrtcError"}  # a new helper there needs its copy here
    copy = _ksearch_nvrtc()
    assert all(hasattr(copy, n) for n in HELPERS["nvrtc"].names)
    theirs = {n for n in dir(nvrtc.Kernel(name="k", source_hash="h", _raw=None)) if not n.startswith("_")}
    ours = {n for n in dir(copy.Kernel("k", "h", None)) if not n.startswith("_")}
    assert theirs <= ours, theirs - ours


def test_the_nvrtc_copy_turns_arguments_into_c_values_as_ksearch_does() -> None:
    copy = _ksearch_nvrtc()
    for theirs, ours in [
        (3, 3),
        (2.5, 2.5),
        (True, True),
        (None, None),
        (nvrtc.i64(1 << 40), copy.i64(1 << 40)),
        (nvrtc.u32(7), copy.u32(7)),
        (nvrtc.u64(9), copy.u64(9)),
        (nvrtc.f32(0.5), copy.f32(0.5)),
        (nvrtc.f64(1.5), copy.f64(1.5)),
        (nvrtc.i32(-4), copy.i32(-4)),
        (np.int64(11), np.int64(11)),
        (np.float16(1.5), np.float16(1.5)),
        (np.float32(2.25), np.float32(2.25)),
    ]:
        a, b = nvrtc._to_ctype(theirs), copy._to_ctype(ours)
        assert type(a) is type(b) and a.value == b.value, (theirs, a, b)
    assert isinstance(copy._to_ctype(None), ctypes.c_void_p)
    for bad in (torch.zeros(2), "text"):  # a CPU tensor, a string: refused by both
        with pytest.raises(TypeError):
            nvrtc._to_ctype(bad)
        with pytest.raises(TypeError):
            copy._to_ctype(bad)
    # shapes are remembered between launches: asked again, in another order or another form, each is its own
    for _ in range(2):
        for d, want in ((4, (4, 1, 1)), ((2, 3), (2, 3, 1)), ((3, 2), (3, 2, 1)), ([1, 2, 3], (1, 2, 3)),
                        ((np.int64(5),), (5, 1, 1)), ((2.0, 3), (2, 3, 1))):  # fmt: skip
            assert copy._dim3(d) == nvrtc._dim3(d) == want, d
    for bad_dim in ((), (0,), (1, 2, 3, 4), (2, 0), ([1],)):  # refused every time, never remembered
        for _ in range(2):
            with pytest.raises((ValueError, TypeError)):
                copy._dim3(bad_dim)
            with pytest.raises((ValueError, TypeError)):
                nvrtc._dim3(bad_dim)
    with pytest.raises(ValueError, match="grid/block must be 1 to 3 positive ints"):
        nvrtc._dim3((0,))
    with pytest.raises(ValueError, match="non-empty string"):
        copy.compile("  ", "k")


async def test_a_finished_search_with_a_best_points_at_the_export_in_its_owners_format(ws: Workspace) -> None:
    from ksearch.server.cli.words import cli_words
    from ksearch.tools.loop.state import loop_state

    s = await _search(ws, SCALED_ADD, "gm")
    await _attempt(ws, s, TRITON, "triton", gpu_eval(2.0))
    await ws.store.record_final(s.id, [], [])
    await ws.store.set_search_status(s.id, "done")
    state = await loop_state(ws, s.id)
    assert state.phase == "done" and "export_kernel (search='gm', format='submission')" in state.next, (
        state.next
    )
    assert "`ksearch export gm --submission`" in cli_words(state.next)


def test_a_list_of_attempt_ids_says_when_it_shows_only_the_latest() -> None:
    from ksearch.tools.export_kernel import some_ids

    assert some_ids([3, 4, 9]) == "#3, #4, #9"
    ten = list(range(1, 11))
    assert (
        some_ids(ten) == "#3, #4, #5, #6, #7, #8, #9, #10 (the latest 8 of 10)"
    )  # "10 correct" beside 8 ids
    assert some_ids(ten, 3, newest_first=True) == "#10, #9, #8 (the latest 3 of 10)"
