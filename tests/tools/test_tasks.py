"""The task operations (tools/tasks.py) on the real built-in tasks and fixture files: listing, describing, and
the smoke check that runs the reference in a subprocess."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from pydantic import ValidationError

from ksearch.gpu.tasks import BUILTIN_DIR, builtin_names, load_task
from ksearch.gpu.tasks.check import CheckReport
from ksearch.tools import tasks as task_tools
from ksearch.tools.tasks import CheckTaskIn, ShowTaskIn, TaskCheck, check_task, list_tasks, show_task
from ksearch.worldmodel.errors import KsearchError

FIX = Path(__file__).parents[1] / "tasks" / "fixtures"
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(300)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def facts_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """For tests of what show_task says besides the facts: it then runs no reference (seconds per task)."""
    monkeypatch.setenv("KSEARCH_TASK_FACTS", "off")


async def test_list_tasks_names_every_builtin_with_its_splits() -> None:
    rows = await list_tasks()
    assert [r.name for r in rows] == builtin_names()
    gemm = next(r for r in rows if r.name == "gemm_bf16")
    assert gemm.bound == "compute" and gemm.dtype == "bfloat16" and gemm.style == "kernelbench"
    for r in rows:  # every built-in has all three splits, named as the task names them
        task = load_task(r.name)
        assert r.workloads == {s: [w.name for w in task.by_split(s)] for s in ("search", "heldout", "smoke")}
        assert r.workloads["search"] and r.workloads["heldout"] and r.workloads["smoke"]


@pytest.mark.usefixtures("facts_off")
async def test_show_a_builtin_describes_workloads_rule_and_seed_tunables() -> None:
    out = await show_task(ShowTaskIn(task="softmax"))
    assert out.name == "softmax" and out.builtin and out.style == "kernelbench"
    assert Path(out.source_path) == BUILTIN_DIR / "softmax" / "task.py"
    assert out.candidate_entry == "ModelNew" and out.has_cost and out.warnings == []
    assert [w.split for w in out.workloads].count("heldout") == 1
    smoke = next(w for w in out.workloads if w.split == "smoke")
    assert smoke.params == load_task("softmax").smoke().params
    # the rule for the task's own dtype (float32), not the whole table
    assert not out.rule.own_check and (out.rule.atol, out.rule.rtol) == (1e-7, 1e-4)
    assert out.rule.mismatch_ratio == 0.0 and out.rule.ranking_by is None
    assert [s.language for s in out.seeds] == ["cuda", "triton"]
    triton = next(s for s in out.seeds if s.language == "triton")
    assert triton.tunables_error is None and triton.source is None
    block = triton.tunables["BLOCK_N"]
    assert block.current in block.values
    line = load_task("softmax").seeds["triton"].splitlines()[block.line - 1]
    assert line.startswith(f"BLOCK_N = {block.current}")
    # the whole task as data, without the seeds' sources unless asked
    assert out.definition["name"] == "softmax" and "seeds" not in out.definition
    assert out.definition["tolerance"]["atol"]["float32"] == 1e-7


@pytest.mark.usefixtures("facts_off")
async def test_show_with_sources_returns_the_seeds_sources() -> None:
    out = await show_task(ShowTaskIn(task="softmax", sources=True))
    task = load_task("softmax")
    assert {s.language: s.source for s in out.seeds} == task.seeds
    assert out.definition["seeds"] == task.seeds


@pytest.mark.usefixtures("facts_off")
async def test_show_a_file_with_no_seeds_says_what_it_lacks() -> None:
    out = await show_task(ShowTaskIn(task=str(FIX / "native" / "plain_gelu_scale.py")))
    assert not out.builtin and out.seeds == []
    assert any("no smoke workload was given" in w and "may be slow on the CPU" in w for w in out.warnings)
    assert any("no cost model" in w for w in out.warnings)


@pytest.mark.slow
async def test_show_warns_of_a_reference_whose_own_rounding_fails_its_tolerance() -> None:
    out = await show_task(ShowTaskIn(task=str(FIX / "kernelbench" / "l1_cusum_long_rows.py")))
    r = out.reference_rounding
    assert r is not None and r.verdict == "fails" and r.over > 0 and r.max_abs > r.atol
    said = [
        w for w in out.warnings if w.startswith("the reference's own fp32 result differs from its float64")
    ]
    assert len(said) == 1 and f"up to {r.max_abs:.2g} (max abs)" in said[0]
    quiet = await show_task(ShowTaskIn(task=str(FIX / "kernelbench" / "l1_softmax_rows.py")))
    assert quiet.reference_rounding is not None and quiet.reference_rounding.verdict == "ok"
    assert not any("float64 run" in w for w in quiet.warnings)


@pytest.mark.usefixtures("facts_off")
async def test_show_a_gpumode_folder_is_judged_by_its_own_check() -> None:
    out = await show_task(ShowTaskIn(task=str(FIX / "gpumode" / "scaled_add")))
    assert out.style == "gpumode" and out.candidate_entry == "custom_kernel"
    assert out.rule.own_check and out.rule.ranking_by == "geom" and out.rule.ranking_declared
    default = await show_task(ShowTaskIn(task=str(FIX / "gpumode" / "scalar_sum")))
    assert default.rule.ranking_by == "last" and not default.rule.ranking_declared
    pinned = await show_task(ShowTaskIn(task=str(FIX / "gpumode" / "cuda_pinned")))
    assert any(w.startswith("needs a GPU: ") and "cuda" in w for w in pinned.warnings)


@pytest.mark.slow
async def test_what_a_gpumode_folder_leaves_undeclared_is_shown_as_its_reference_ran() -> None:
    """A GPU MODE folder declares no op, dtype or bound: they come from running its reference, never `?`."""
    out = await show_task(ShowTaskIn(task=str(FIX / "gpumode" / "pairmix")))
    assert out.op.startswith("mm + ") and out.dtype == "float32" and out.bound != "unknown", out


@pytest.mark.usefixtures("facts_off")
async def test_show_a_flashinfer_definition_with_its_workloads() -> None:
    out = await show_task(ShowTaskIn(task=str(FIX / "flashinfer" / "rowscale_h64.json")))
    assert out.style == "flashinfer" and out.candidate_entry == "run"
    assert out.workloads and all("axes" in w.params and "inputs" in w.params for w in out.workloads)


@pytest.mark.usefixtures("facts_off")
async def test_a_seed_with_malformed_tunables_is_shown_with_the_reason(tmp_path: Path) -> None:
    folder = tmp_path / "mysoftmax"
    folder.mkdir()
    shutil.copy(BUILTIN_DIR / "softmax" / "task.py", folder / "task.py")
    good = (BUILTIN_DIR / "softmax" / "seed_triton.py").read_text()
    (folder / "seed_triton.py").write_text(good)
    (folder / "seed_cuda.py").write_text('TUNABLES = {"THREADS": []}\nTHREADS = 256\n')
    out = await show_task(ShowTaskIn(task=str(folder / "task.py")))
    seeds = {s.language: s for s in out.seeds}
    assert seeds["cuda"].tunables == {} and seeds["cuda"].tunables_error is not None
    assert "TUNABLES['THREADS'] must be a non-empty list" in seeds["cuda"].tunables_error
    assert seeds["triton"].tunables_error is None and "BLOCK_N" in seeds["triton"].tunables


async def test_an_unknown_task_names_the_builtins() -> None:
    with pytest.raises(KsearchError) as info:
        await show_task(ShowTaskIn(task="softmaxx"))
    assert "unknown task 'softmaxx'" in str(info.value)
    assert all(name in str(info.value) for name in builtin_names())
    with pytest.raises(KsearchError, match="unknown task 'softmaxx'"):  # refused before anything runs
        await check_task(CheckTaskIn(task="softmaxx"))


async def test_what_is_not_a_task_is_refused_with_what_is_accepted(tmp_path: Path) -> None:
    with pytest.raises(KsearchError, match="no such task file or folder"):
        await show_task(ShowTaskIn(task=str(tmp_path / "missing.py")))
    (tmp_path / "notes.txt").write_text("hello\n")
    with pytest.raises(KsearchError, match="accepted: a built-in name"):
        await show_task(ShowTaskIn(task=str(tmp_path / "notes.txt")))
    with pytest.raises(KsearchError, match="task folder holds"):
        await show_task(ShowTaskIn(task=str(tmp_path)))
    with pytest.raises(KsearchError, match=r"a workloads file \(w\.jsonl\) is FlashInfer-Bench's: it goes with a "
                       r"definition \.json; 'softmax' is a kernelbench task"):  # fmt: skip
        await show_task(ShowTaskIn(task="softmax", workloads="w.jsonl"))


def test_inputs_refuse_unknown_arguments() -> None:
    with pytest.raises(ValidationError, match="source"):
        ShowTaskIn.model_validate({"task": "softmax", "source": True})
    with pytest.raises(ValidationError, match="task"):
        CheckTaskIn.model_validate({"workloads": None})


def test_the_check_answer_carries_every_field_of_the_subprocess_report() -> None:
    assert list(TaskCheck.model_fields) == list(CheckReport.model_fields)


@pytest.mark.slow
async def test_check_a_sound_builtin() -> None:
    check = await check_task(CheckTaskIn(task="rmsnorm"))
    smoke = load_task("rmsnorm").smoke()
    assert check.ok and check.error is None and check.task == "rmsnorm" and check.workload == smoke.name
    assert check.device == "cpu" and check.seconds > 0 and check.warnings == []
    assert [(o.shape, o.dtype) for o in check.outputs] == [
        ([smoke.params["M"], smoke.params["N"]], "bfloat16")
    ]


@pytest.mark.slow
async def test_check_flags_a_degenerate_rule_and_a_reference_that_fails() -> None:
    loose = await check_task(CheckTaskIn(task=str(FIX / "native" / "loose_tolerance.py")))
    assert loose.ok and any("all zeros passes" in w for w in loose.warnings)
    cuda_only = await check_task(CheckTaskIn(task=str(FIX / "kernelbench" / "l1_cuda_only.py")))
    assert not cuda_only.ok and cuda_only.error is not None and "CUDA" in cuda_only.error


async def test_a_check_past_its_time_is_a_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(task_tools, "CHECK_TIMEOUT_S", 0.05)  # the subprocess cannot even import torch
    check = await check_task(CheckTaskIn(task="rmsnorm"))
    assert not check.ok and check.task == "rmsnorm"
    assert check.error == "the reference took over 0.05 s on the smoke workload"


async def test_show_task_and_the_prompt_state_one_tolerance_for_an_undeclared_bf16_task(
    tmp_path: Path,
) -> None:
    """A KernelBench-format file that declares no dtype, with bf16 inputs: `ksearch task show` read the float32 rule
    (atol 1e-4) beside the derived dtype, while the prompt stated bfloat16's. Both state the rule the evaluator
    applies, for the dtype derived from the reference."""
    from ksearch.gpu.tasks import load_task
    from ksearch.tools.prompting.contexts import tolerance_text

    path = tmp_path / "bf16_scale.py"
    path.write_text(
        "import torch\n\n\nclass Model(torch.nn.Module):\n    def forward(self, x):\n        return x * 2.0\n\n\n"
        "def get_inputs():\n    return [torch.randn(64, 128, dtype=torch.bfloat16)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    out = await show_task(ShowTaskIn(task=str(path)))
    assert out.dtype == "bfloat16"
    atol, rtol = load_task(str(path)).tolerance.for_dtype("bfloat16")
    assert (out.rule.atol, out.rule.rtol) == (atol, rtol)
    assert f"bfloat16: atol {atol:g}, rtol {rtol:g}" in tolerance_text(load_task(str(path)), out.dtype)
