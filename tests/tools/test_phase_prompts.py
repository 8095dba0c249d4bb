"""The phase prompts state facts, not defaults: what a model reads about a task it has never seen, and
about the intent it is working on, is derived from the records and from running the reference."""

from __future__ import annotations

from pathlib import Path

import pytest

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.prompting.phases import analyse_kernel, implement_intent, reflect_and_edit
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.select_action import SelectActionIn, select_action
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import IntentSpec

BF16_MATMUL = Path(__file__).parents[1] / "tasks" / "fixtures" / "kernelbench" / "l1_matmul_bf16.py"
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.slow
async def test_a_bf16_kernelbench_file_is_described_as_what_it_is(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task=str(BF16_MATMUL), name="mm"))
        text = await analyse_kernel(ws, s.id)
        assert "dtype: bfloat16" in text and "expected bound: compute" in text, text[:1500]
        assert "unspecified" not in text and "float32" not in text.split("## Reference")[0]
        assert "GFLOP" in text and "MB moved" in text  # bytes and FLOPs from running the reference
        assert "No seed candidate" in text and "bfloat16: atol" in text  # seedless; the rule it is judged by
        # a prompt argument error is a plain message
        with pytest.raises(ToolFailure, match="no intent is being refined"):
            await implement_intent(ws, s.id)
        with pytest.raises(ToolFailure, match="finished in this search yet"):
            await reflect_and_edit(ws, s.id)


@pytest.mark.slow
async def test_the_analyse_prompt_says_when_the_references_own_rounding_fails_its_tolerance(
    tmp_path: Path,
) -> None:
    cusum = BF16_MATMUL.parent / "l1_cusum_long_rows.py"
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task=str(cusum), name="cusum"))
        text = await analyse_kernel(ws, s.id)
        assert "the reference's own fp32 result differs from its float64 run by up to" in text, text[:3000]
        assert "only a kernel reproducing the reference's rounding" in text


@pytest.mark.slow
async def test_implement_prompt_states_the_intents_true_status_and_base(tmp_path: Path) -> None:
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task=str(BF16_MATMUL), name="mm"))
        await propose_intents(
            ws, ProposeIntentsIn(search=s.id, intents=[IntentSpec(title="tile 128x128 with tl.dot")])
        )
        sel = await select_action(ws, SelectActionIn(search=s.id))
        assert sel.claimed and sel.round == 1 and sel.base_attempt_id is None
        text = await implement_intent(ws, s.id)  # no node_id: the intent being refined
        assert "Implement intent #2: tile 128x128 with tl.dot" in text
        assert "No base code" in text and "attempt 1 of at most 8" in text
        tree = text.split("## The tree")[1]
        assert "[active]" in tree and "[closed]" not in tree  # the tree shows it as being refined


GPUMODE = Path(__file__).parents[1] / "tasks" / "fixtures" / "gpumode" / "pairmix"
FIB = Path(__file__).parents[1] / "tasks" / "fixtures" / "flashinfer" / "rowscale_h64.json"


@pytest.mark.slow
@pytest.mark.parametrize(
    ("task", "entry", "keep", "reference", "timing"),
    [
        (
            GPUMODE,
            "custom_kernel(data)",
            "Keep `custom_kernel(data)`'s signature",
            "def ref_kernel(",
            "by the search's timing protocol, gpumode (as GPU MODE's eval.py times",
        ),
        (
            FIB,
            "run(x, weight, eps)",
            "Keep `run`'s parameters named as the definition's inputs",
            "def run(x, weight, eps)",
            "by the search's timing protocol, flashinfer (as FlashInfer-Bench's benchmark runner times",
        ),
    ],
    ids=["gpumode", "flashinfer"],
)
async def test_every_prompt_names_what_this_tasks_candidate_must_define(
    tmp_path: Path, task: Path, entry: str, keep: str, reference: str, timing: str
) -> None:
    """A GPU MODE or FlashInfer-Bench task's prompts never ask for a `ModelNew`: they name its own entry point,
    show its reference code, and say how its searches are timed."""
    async with await Workspace.open(tmp_path / "k.db") as ws:
        s = await create_search(ws, CreateSearchIn(task=str(task), name="t"))
        analyse = await analyse_kernel(ws, s.id)
        assert "ModelNew" not in analyse, analyse[:3000]
        assert f"A Python module defining `{entry}`" in analyse
        assert (
            reference in analyse.split("## Reference (the task file)")[1]
        )  # the code to match, not an empty block
        assert timing in analyse
        await propose_intents(ws, ProposeIntentsIn(search=s.id, intents=[IntentSpec(title="one pass")]))
        await select_action(ws, SelectActionIn(search=s.id))
        write = await implement_intent(ws, s.id)
        assert "ModelNew" not in write, write[:3000]
        assert f"write a complete module defining `{entry}` from scratch" in write
        assert keep in write
