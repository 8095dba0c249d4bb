"""create_search, called as a function: a search with its root and its configuration, or a refusal that names
what is accepted and writes nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError
from toolkit import Snapshot

from ksearch.gpu.task import TaskError
from ksearch.tools.create_search import CreateSearchIn, DriverSettings, create_search
from ksearch.tools.errors import ToolFailure
from ksearch.tools.workspace import Workspace

pytestmark = pytest.mark.anyio


async def test_a_search_is_stored_with_its_root_and_configuration(bare_ws: Workspace) -> None:
    s = await create_search(
        bare_ws, CreateSearchIn(task="row_sum", rounds=4, stagnation=2, seed=11, compile_mode="max-autotune")
    )
    assert (s.name, s.task, s.status, s.round, s.best_attempt_id) == ("row_sum-1", "row_sum", "new", 0, None)
    c = s.config
    assert (c.language, c.policy, c.seed, c.stagnation, c.budgets.rounds, c.compile_mode) == (
        "triton",
        "tuner",
        11,
        2,
        4,
        "max-autotune",
    )
    assert await bare_ws.store.get_search("row_sum-1") == s
    [root] = await bare_ws.store.list_nodes(s.id)
    assert (root.kind, root.title, root.status.value, root.parent_id) == ("root", "root", "open", None)
    [edit] = await bare_ws.store.list_edits(s.id)
    assert (edit.op, edit.node_id, edit.reason) == ("insert", root.id, "search created")
    # the default name counts up; a secret random input seed when none is given
    again = await create_search(bare_ws, CreateSearchIn(task="row_sum", language="cuda"))
    assert again.name == "row_sum-2" and again.config.language == "cuda"
    assert 0 <= again.config.seed < 2**31


async def test_a_task_file_is_recorded_by_its_resolved_path(bare_ws: Workspace, tiny_task: str) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task=tiny_task, name="tiny", language="cpp_ext"))
    # a seedless task takes any language: there is no seed to match
    assert s.task == str(Path(tiny_task).resolve()) and s.config.language == "cpp_ext"
    assert bare_ws.task(s.task).name == "tiny_rows"


async def test_an_unknown_task_is_a_task_error_listing_the_built_ins(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    await create_search(bare_ws, CreateSearchIn(task="row_sum", name="kept"))
    before = await snapshot()
    with pytest.raises(TaskError, match=r"unknown task 'row_summ': not a built-in \(bmm, .*row_sum"):
        await create_search(bare_ws, CreateSearchIn(task="row_summ"))
    with pytest.raises(TaskError, match="no such task file or folder"):
        await create_search(bare_ws, CreateSearchIn(task="./no/such/task.py"))
    assert await snapshot() == before


async def test_a_language_without_a_seed_is_refused_naming_the_seeds(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    before = await snapshot()
    with pytest.raises(ToolFailure) as e:
        await create_search(bare_ws, CreateSearchIn(task="row_sum", language="cpp_ext"))
    assert str(e.value) == "task 'row_sum' has no cpp_ext seed candidate; it has: cuda, triton"
    assert await snapshot() == before


async def test_a_taken_name_is_refused_and_the_first_search_is_kept(
    bare_ws: Workspace, snapshot: Snapshot
) -> None:
    first = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="mine", seed=1))
    before = await snapshot()
    with pytest.raises(ToolFailure, match="a search named 'mine' already exists; pick another name"):
        await create_search(bare_ws, CreateSearchIn(task="row_sum", name="mine", seed=2))
    assert await snapshot() == before
    assert (await bare_ws.search("mine")).config.seed == first.config.seed == 1


def test_malformed_arguments_are_refused_by_the_input_model() -> None:
    for bad, field in (
        ({"task": "row_sum", "name": "-starts-with-a-dash"}, "name"),
        ({"task": "row_sum", "rounds": 0}, "rounds"),
        ({"task": "row_sum", "language": "cobol"}, "language"),
        ({"task": "row_sum", "seed": -1}, "seed"),
        ({"task": ""}, "task"),
        ({"task": "row_sum", "budget": 3}, "budget"),  # unknown arguments are refused, never ignored
    ):
        with pytest.raises(ValidationError) as e:
            CreateSearchIn.model_validate(bad)
        assert [err["loc"][0] for err in e.value.errors()] == [field], bad


async def test_the_drivers_settings_are_set_in_the_same_write(bare_ws: Workspace, snapshot: Snapshot) -> None:
    plain = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="plain", seed=3))
    c = plain.config
    assert (c.max_attempts_per_intent, c.branching, c.base_url) == (8, 1, None)  # without: the defaults
    driven = await create_search(
        bare_ws,
        CreateSearchIn(task="row_sum", name="driven", seed=3, policy="openai", model="local"),
        DriverSettings(max_attempts_per_intent=3, branching=2, base_url="http://localhost:8000/v1"),
    )
    hosted = await create_search(bare_ws, CreateSearchIn(task="row_sum", name="hosted", max_attempts_per_intent=3))
    assert hosted.config.max_attempts_per_intent == 3  # a host sets the cap it is held to
    c = driven.config
    assert (c.max_attempts_per_intent, c.branching, c.base_url, c.policy, c.model) == (
        3,
        2,
        "http://localhost:8000/v1",
        "openai",
        "local",
    )
    # nothing else of the configuration moves
    same = {"max_attempts_per_intent", "branching", "base_url", "policy", "model"}
    assert driven.config.model_dump(exclude=same) == plain.config.model_dump(exclude=same)
    assert (await bare_ws.search("driven")).config == driven.config  # stored as returned
    # a refusal writes no search, whatever the settings
    before = await snapshot()
    with pytest.raises(ToolFailure, match="a search named 'driven' already exists"):
        await create_search(
            bare_ws, CreateSearchIn(task="row_sum", name="driven"), DriverSettings(branching=4)
        )
    assert await snapshot() == before


def test_malformed_driver_settings_are_refused_by_their_model() -> None:
    for bad, field in (
        ({"max_attempts_per_intent": 0}, "max_attempts_per_intent"),
        ({"branching": 0}, "branching"),
        ({"lanes": 2}, "lanes"),  # unknown settings are refused, never ignored
    ):
        with pytest.raises(ValidationError) as e:
            DriverSettings.model_validate(bad)
        assert [err["loc"][0] for err in e.value.errors()] == [field], bad


KB_FILE = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "kernelbench" / "l1_row_scale.py"


async def test_kernelbench_s_precision_is_kept_and_the_search_s_task_runs_at_it(
    bare_ws: Workspace, snapshot: Snapshot, tiny_task: str
) -> None:
    s = await create_search(bare_ws, CreateSearchIn(task=str(KB_FILE), name="half", precision="fp16"))
    assert s.config.precision == "fp16"
    task = bare_ws.search_task(s)
    # KernelBench's fp16 tolerance, 1e-2 as its allclose applies it (within its own roundoff), whatever the
    # output's dtype; the runtime casts inputs and weights (gpu/tasks/rt/native.py)
    assert task.extras["precision"] == "fp16"
    for dtype in ("float16", "float32", "bfloat16"):
        atol, rtol = task.tolerance.for_dtype(dtype)
        assert atol == rtol and 1e-2 < atol < 1.03e-2, (dtype, atol)
    plain = await create_search(bare_ws, CreateSearchIn(task=str(KB_FILE), name="drawn"))
    assert plain.config.precision is None and bare_ws.search_task(plain) is bare_ws.task(plain.task)
    assert bare_ws.search_task(plain).tolerance.for_dtype("float32")[0] < 1.001e-4
    before = await snapshot()
    for task_ref, why in (
        ("row_sum", "'row_sum' is a built-in task"),
        (tiny_task, "'tiny_rows' is a task file with ksearch's own extras (META, TOLERANCE, WORKLOADS)"),
    ):
        with pytest.raises(ToolFailure) as e:
            await create_search(bare_ws, CreateSearchIn(task=task_ref, precision="bf16"))
        assert "precision bf16 is KernelBench's setting, for a KernelBench problem file" in str(e.value)
        assert why in str(e.value)
    with pytest.raises(ValidationError, match="'fp32', 'fp16' or 'bf16'"):
        CreateSearchIn(task=str(KB_FILE), precision="fp8")
    assert await snapshot() == before
