"""A search is timed by its task's owner's protocol unless the user chooses another the task supports; the
protocol is fixed once set, refusals write nothing, and every face names it."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest
from toolkit import Snapshot

from ksearch.gpu.timing.compare import compare
from ksearch.tools.common import summarize
from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.loop.protocols import default_protocol
from ksearch.tools.loop.state import loop_state
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import Evaluation, WorkloadTiming

pytestmark = pytest.mark.anyio

FIX = Path(__file__).resolve().parents[1] / "tasks" / "fixtures"
KB_FILE = FIX / "kernelbench" / "l1_relu_rand.py"  # a plain KernelBench problem: Model, get_inputs only
NATIVE_FILE = FIX / "native" / "linear_relu.py"  # declares ksearch's own extras
GPUMODE = FIX / "gpumode" / "scalar_sum"
FIB_DEF = FIX / "flashinfer" / "rowscale_h64.json"


@pytest.mark.parametrize(
    ("task", "protocol"),
    [
        ("row_sum", "ksearch"),
        (str(KB_FILE), "kernelbench"),
        (str(NATIVE_FILE), "ksearch"),
        (str(GPUMODE), "gpumode"),
        (str(FIB_DEF), "flashinfer"),
    ],
)
@pytest.mark.slow
async def test_a_new_search_takes_its_owners_protocol(bare_ws: Workspace, task: str, protocol: str) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task=task))
    assert s.config.timing_protocol == protocol
    assert (await bare_ws.store.get_search(s.id)).config.timing_protocol == protocol
    state = await loop_state(bare_ws, s.id)
    assert state.timing_protocol == protocol


async def test_another_supported_protocol_may_be_chosen(bare_ws: Workspace) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task=str(GPUMODE), timing_protocol="ksearch"))
    assert s.config.timing_protocol == "ksearch"
    s = await create_search(bare_ws, CreateSearchIn(task="row_sum", timing_protocol="kernelbench"))
    assert s.config.timing_protocol == "kernelbench"


async def test_an_unknown_or_unsupported_protocol_is_refused_and_nothing_is_written(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    before = await snapshot()
    with pytest.raises(
        ToolFailure,
        match=r"unknown timing protocol 'gpu-mode'; accepted: ksearch, gpumode, kernelbench, flashinfer",
    ):
        await create_search(bare_ws, CreateSearchIn(task="row_sum", timing_protocol="gpu-mode"))
    with pytest.raises(
        ToolFailure,
        match=r"'gpumode' cannot time task 'row_sum'.*accepted for this task: ksearch, kernelbench \(default: ksearch\)",
    ):
        await create_search(bare_ws, CreateSearchIn(task="row_sum", timing_protocol="gpumode"))
    with pytest.raises(ToolFailure, match=r"'flashinfer' cannot time task .*FlashInfer-Bench definitions"):
        await create_search(bare_ws, CreateSearchIn(task=str(GPUMODE), timing_protocol="flashinfer"))
    assert await snapshot() == before


async def test_a_cuda_graph_evaluator_cannot_be_reproduced(
    bare_ws: Workspace, tmp_path: Path, snapshot: Snapshot
) -> None:
    folder = tmp_path / "graphs"
    shutil.copytree(GPUMODE, folder)
    shutil.copy(FIX / "gpumode" / "common_utils.py", tmp_path / "common_utils.py")
    (folder / "eval.py").write_text(
        "import torch\n\n\ndef benchmark_cudagraph(fn, data):\n    g = torch.cuda.CUDAGraph()\n    return g\n"
    )
    yml = (
        (folder / "task.yml")
        .read_text()
        .replace(
            '  - {"name": "reference.py", "source": "reference.py"}',
            '  - {"name": "reference.py", "source": "reference.py"}\n  - {"name": "eval.py", "source": "eval.py"}',
        )
    )
    (folder / "task.yml").write_text(yml)
    task = bare_ws.task(str(folder))
    assert task.extras["evaluator"]["timer"] == "cudagraph"
    assert default_protocol(task) == "ksearch"  # the owner's way cannot be reproduced: ksearch's, said so
    before = await snapshot()
    with pytest.raises(ToolFailure, match="times CUDA-graph replays"):
        await create_search(bare_ws, CreateSearchIn(task=str(folder), timing_protocol="gpumode"))
    assert await snapshot() == before


def _timing(protocol: str, stat: str, median: float, mean: float) -> WorkloadTiming:
    return WorkloadTiming(
        workload="w", device="NVIDIA H200", median_us=median, mean_us=mean, protocol=protocol,  # type: ignore[arg-type]
        statistic=stat, iqr_us=1.0, ci_low_us=mean * 0.99 if stat == "mean" else median * 0.99,  # type: ignore[arg-type]
        ci_high_us=mean * 1.01 if stat == "mean" else median * 1.01, n=50,
    )  # fmt: skip


def test_a_mean_protocol_ranks_by_its_mean_and_names_itself() -> None:
    # median says A is faster; the owner's mean (what its user is judged by) says B is
    a = Evaluation(status="ok", timings=[_timing("gpumode", "mean", median=200.0, mean=420.0)])
    b = Evaluation(status="ok", timings=[_timing("gpumode", "mean", median=260.0, mean=300.0)])
    assert a.timings[0].time_us == 420.0
    assert compare(b, a).faster and not compare(a, b).faster
    text = summarize(a)
    assert "timed: gpumode (as GPU MODE's eval.py times" in text
    assert "w on NVIDIA H200: mean 420.0 us (95% CI 415.8-424.2, median 200.0, n=50)" in text
    assert a.timing_protocol == "gpumode"


def test_an_interpreter_timing_states_no_speedup() -> None:
    t = _timing("ksearch", "median", median=33000.0, mean=33000.0).model_copy(
        update={"device": "cpu-interpreter", "eager_us": 36.0, "speedup_vs_eager": 36.0 / 33000.0}
    )
    text = summarize(Evaluation(status="ok", timings=[t], speedup_vs_eager=36.0 / 33000.0))
    assert (
        "w on cpu-interpreter: median 33000.0 us" in text and "speed not measured (CPU interpreter)" in text
    )
    assert "x vs eager" not in text and "geomean" not in text  # a 0.001x would read as a speed
    gpu = summarize(
        Evaluation(status="ok", timings=[_timing("ksearch", "median", 10.0, 10.0)], speedup_vs_eager=2.0)
    )
    assert "geomean speedup vs eager: 2.000x" in gpu


def test_timings_of_two_protocols_are_never_compared() -> None:
    a = Evaluation(status="ok", timings=[_timing("gpumode", "mean", median=200.0, mean=210.0)])
    b = Evaluation(status="ok", timings=[_timing("ksearch", "median", median=400.0, mean=410.0)])
    v = compare(a, b)
    assert not v.faster and "different protocols (gpumode, ksearch)" in v.reason


async def test_the_cli_status_and_the_page_name_the_protocol(bare_ws: Workspace, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from ksearch.server.cli import loop as cli_loop
    from ksearch.server.web.search_html import summary
    from ksearch.server.web.snapshot import load_view

    s = await create_search(bare_ws, CreateSearchIn(task=str(GPUMODE), name="gm"))
    page = str(summary(await load_view(bare_ws, s.id)))
    assert "timed" in page and "gpumode (as GPU MODE&#x27;s eval.py times" in page, page
    app = typer.Typer()
    cli_loop.register(app)
    db = bare_ws.store.path
    got = await asyncio.to_thread(CliRunner().invoke, app, ["status", "gm", "--db", str(db)])  # its own loop
    assert got.exit_code == 0, got.output
    assert "timed: gpumode (as GPU MODE's eval.py times" in got.output
