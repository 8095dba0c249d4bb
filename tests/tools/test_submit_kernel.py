"""submit_kernel, called as a function on the real sandbox (the Triton interpreter without a GPU): a person's
kernel on an open intent (the seed measured first, the intent claimed), on the root (never claimed), on the
search alone, and every refusal before anything is recorded."""

from __future__ import annotations

import pytest
from pydantic import ValidationError
from toolkit import NO_MODELNEW, ROW_SUM_SEED, Snapshot

from ksearch.tools.create_search import CreateSearchIn, create_search
from ksearch.tools.edit_tree import EditTreeIn, edit_tree
from ksearch.tools.errors import ToolFailure
from ksearch.tools.propose_intents import ProposeIntentsIn, propose_intents
from ksearch.tools.submit_kernel import MAX_SOURCE_BYTES, SubmitKernelIn, check_submission, submit_kernel
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.models import EditSpec, IntentSpec
from tests.fixtures import ROW_SUM

pytestmark = [pytest.mark.anyio, pytest.mark.cpu, pytest.mark.timeout(300)]

SMALLER = ROW_SUM_SEED.replace("BLOCK_N = 1024", "BLOCK_N = 512")


@pytest.mark.slow
async def test_an_open_intent_is_claimed_after_the_seed_and_the_kernel_recorded(ws: Workspace) -> None:
    # the built-in row_sum with a 9-row smoke workload (tests.fixtures.ROW_SUM): its evaluations take a second
    s = await create_search(ws, CreateSearchIn(task=ROW_SUM, name="rs", rounds=1))
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search="rs", intents=[IntentSpec(title="smaller blocks")])
    )
    notes: list[str] = []
    steps: list[tuple[str, float]] = []

    async def note(text: str) -> None:
        notes.append(text)

    async def progress(message: str, fraction: float) -> None:
        steps.append((message, fraction))

    out = await submit_kernel(
        ws, SubmitKernelIn(search="rs", source=SMALLER, node_id=intent.id, trials=1), progress, note
    )
    seed, mine = await ws.store.list_attempts(s.id)
    assert (seed.author, seed.id) == ("seed", out.seed_attempt_id)
    assert (mine.id, mine.author, mine.node_id, mine.evaluation and mine.evaluation.status) == (
        out.attempt_id,
        "human",
        intent.id,
        "ok",
    )
    assert (await ws.store.get_candidate(mine.candidate_id)).source == SMALLER
    # claimed whatever the round budget (1 round, none started): a person's kernel is never refused for it
    assert out.claimed_round == 1 and (await ws.store.get_node(intent.id)).status.value == "active"
    assert notes[0].startswith("measuring the task's seed") and notes[-1].startswith(
        f"claimed intent #{intent.id}"
    )
    assert steps[0] == ("compiling", 0.0) and steps[-1][1] == 1.0
    # no base named, none known before the seed: the refine phase's closest correct code, the seed, is assumed
    assert out.base_attempt_id == seed.id and out.base_why.startswith("assumed")
    assert mine.base_attempt_id == out.base_attempt_id
    assert out.language == "triton" and not out.is_best  # CPU timings rank nothing
    assert "recorded as attempt 1 of at most" in out.next


@pytest.mark.slow
async def test_the_root_takes_a_kernel_without_a_claim_and_auto_detects_the_language(
    ws: Workspace, tiny_task: str
) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    root = await ws.store.root(s.id)
    [intent] = await propose_intents(
        ws, ProposeIntentsIn(search="tiny", intents=[IntentSpec(title="two rows")])
    )
    out = await submit_kernel(
        ws, SubmitKernelIn(search="tiny", source=ROW_SUM_SEED, node_id=root.id, language="auto", trials=1)
    )
    assert (out.node_id, out.claimed_round, out.seed_attempt_id, out.language) == (
        root.id,
        None,
        None,
        "triton",
    )
    assert (await ws.search(s.id)).round == 0  # no round started
    assert (await ws.store.get_node(intent.id)).status.value == "open"
    [a] = await ws.store.list_attempts(s.id, root.id)
    assert (a.id, a.author) == (out.attempt_id, "human")


async def test_refusals_record_nothing(ws: Workspace, tiny_task: str, snapshot: Snapshot) -> None:
    s = await create_search(ws, CreateSearchIn(task=tiny_task, name="tiny"))
    other = await create_search(ws, CreateSearchIn(task=tiny_task, name="other"))
    pruned, vetoed = await propose_intents(
        ws,
        ProposeIntentsIn(
            search="tiny", intents=[IntentSpec(title="gone idea"), IntentSpec(title="not this")]
        ),
    )
    await edit_tree(
        ws,
        EditTreeIn(
            search="tiny",
            edits=[EditSpec(op="prune", node_id=pruned.id), EditSpec(op="veto", node_id=vetoed.id)],
        ),
    )
    other_root = await ws.store.root(other.id)
    before = await snapshot()
    cases: list[tuple[dict[str, object], str]] = [
        ({"source": "try two rows per program\n"}, "the submitted source is no candidate for task"),
        ({"source": NO_MODELNEW, "name": "old.py"}, "old.py is no candidate for task"),
        ({"source": ROW_SUM_SEED, "node_id": 999}, "no node #999 in search 'tiny'"),
        ({"source": ROW_SUM_SEED, "node_id": other_root.id}, "belongs to another search, 'other'"),
        ({"source": ROW_SUM_SEED, "node_id": pruned.id}, f"intent #{pruned.id} is pruned"),
        ({"source": ROW_SUM_SEED, "node_id": vetoed.id}, f"intent #{vetoed.id} is vetoed"),
        ({"source": ROW_SUM_SEED, "base_attempt_id": 999}, "no attempt #999"),
        ({"source": "import torch\nclass ModelNew(:\n"}, "does not parse"),  # no node: nothing to claim
    ]
    for fields, needle in cases:
        with pytest.raises(ToolFailure) as e:
            await submit_kernel(ws, SubmitKernelIn(search="tiny", **fields))  # type: ignore[arg-type]
        assert needle in str(e.value), (fields, str(e.value))
    assert "Nothing was recorded." in str(await _refusal(ws, SubmitKernelIn(search="tiny", source="notes\n")))
    assert await snapshot() == before
    assert s.id != other.id


async def _refusal(ws: Workspace, inp: SubmitKernelIn) -> ToolFailure:
    try:
        await check_submission(ws, inp)
    except ToolFailure as e:
        return e
    raise AssertionError("not refused")


@pytest.mark.parametrize(
    ("fields", "needle"),
    [
        ({"source": "x" * (MAX_SOURCE_BYTES + 1)}, f"a candidate may be at most {MAX_SOURCE_BYTES} bytes"),
        ({"source": "é" * (MAX_SOURCE_BYTES // 2 + 1)}, "bytes"),  # counted in UTF-8 bytes, not characters
        ({"source": "  \n"}, "the source is empty"),
        (
            {"source": "class ModelNew: ...", "language": "fortran"},
            "unknown language 'fortran'; accepted: auto",
        ),
        ({"source": "class ModelNew: ...", "trials": 0}, "trials"),
    ],
)
def test_bad_input_is_named(fields: dict[str, object], needle: str) -> None:
    with pytest.raises(ValidationError) as e:
        SubmitKernelIn(search="s", **fields)  # type: ignore[arg-type]
    assert needle in str(e.value)


def test_the_cli_keeps_the_tools_limit() -> None:
    from ksearch.server.cli.steer import MAX_FILE_BYTES

    assert MAX_FILE_BYTES == MAX_SOURCE_BYTES
