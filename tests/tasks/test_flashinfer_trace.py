"""A FlashInfer-Trace dataset (TraceSet layout), read as FlashInfer-Bench reads it.

The fixture tree `fixtures/flashinfer_trace` is shaped like the real dataset: definitions/<op_type>/,
workloads/<op_type>/ (trace lines without solution), blob/workloads/... safetensors named in the
workloads by paths relative to the dataset root, solutions/<author>/<op_type>/<definition>/ and traces/.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
import typer
from typer.testing import CliRunner

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.loader import FIB_INT_RANGES, dataset_root
from ksearch.gpu.tasks.rt.runtime import TaskRuntime
from ksearch.server.cli import tasks as cli_tasks

TRACE = Path(__file__).parent / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
MOE = TRACE / "definitions" / "moe" / "moe_router_softmax_e8.json"
ROPE = TRACE / "definitions" / "rope" / "rope_cos_sin_d64.json"
GEMM = TRACE / "definitions" / "gemm" / "gemm_n64_k32.json"
BLOB_WORKLOAD = "5b1e0a6c"


def test_every_definition_of_the_dataset_loads_with_its_workloads() -> None:
    defs = sorted(TRACE.glob("definitions/*/*.json"))
    assert len(defs) == 4
    for d in defs:
        task = load_task(str(d))
        assert task.style == "flashinfer" and task.candidate_entry == "run"
        assert Path(task.extras["workloads_path"]).is_relative_to(TRACE / "workloads")
        assert task.extras["dataset_root"] == str(TRACE.resolve())
        assert task.by_split("search") and task.smoke()
    task = load_task(str(RMSNORM))
    assert task.op == "rmsnorm" and task.dtype == "bfloat16"
    assert [(w.name, w.split) for w in task.workloads] == [
        ("0c6f7d0e", "search"), ("1d7e8f1f", "search"), (BLOB_WORKLOAD, "heldout"), ("2e8f9a20", "search"),
        ("smoke", "smoke"),
    ]  # fmt: skip


def test_safetensors_paths_are_relative_to_the_dataset_root() -> None:
    task = load_task(str(RMSNORM))
    desc = task.workload(BLOB_WORKLOAD).params["inputs"]["hidden_states"]
    blob = TRACE / "blob" / "workloads" / "rmsnorm" / "rmsnorm_h128"
    assert Path(desc["path"]) == next(blob.glob("*.safetensors")).resolve()
    from safetensors.torch import load_file

    stored = load_file(desc["path"])
    inputs = TaskRuntime(task).make_inputs(task.workload(BLOB_WORKLOAD), 5, "cpu")
    assert torch.equal(inputs[0], stored["hidden_states"]) and torch.equal(inputs[1], stored["weight"])


def test_a_path_relative_to_the_jsonl_is_not_the_dataset_s(tmp_path: Path) -> None:
    # FlashInfer-Bench resolves against the root only: a file beside the JSONL is not found, and the
    # message says where paths are resolved from.
    root = tmp_path / "trace"
    shutil.copytree(TRACE, root)
    jsonl = root / "workloads" / "rmsnorm" / "rmsnorm_h128.jsonl"
    blob = next((root / "blob").rglob("*.safetensors"))
    shutil.copy(blob, jsonl.parent / "local.safetensors")
    line = {"definition": "rmsnorm_h128", "workload": {"uuid": "u-local", "axes": {"batch_size": 4}, "inputs": {
        "hidden_states": {"type": "safetensors", "path": "local.safetensors", "tensor_key": "hidden_states"}}}}  # fmt: skip
    jsonl.write_text(json.dumps(line) + "\n")
    with pytest.raises(TaskError) as info:
        load_task(str(root / "definitions" / "rmsnorm" / "rmsnorm_h128.json"))
    msg = str(info.value)
    assert "inputs.hidden_states.path: safetensors file not found" in msg
    assert f"paths are relative to the dataset root {root.resolve()}" in msg


def test_workloads_found_under_any_op_type_folder(tmp_path: Path, minimal_fib: None) -> None:
    root = tmp_path / "trace"
    shutil.copytree(TRACE, root)
    (root / "workloads" / "norms").mkdir()
    shutil.move(root / "workloads" / "rmsnorm" / "rmsnorm_h128.jsonl", root / "workloads" / "norms")
    task = load_task(str(root / "definitions" / "rmsnorm" / "rmsnorm_h128.json"))
    assert task.extras["workloads_path"] == str(
        (root / "workloads" / "norms" / "rmsnorm_h128.jsonl").resolve()
    )
    (root / "workloads" / "norms" / "rmsnorm_h128.jsonl").unlink()
    with pytest.raises(TaskError, match=r"no workloads JSONL found .*workloads/\*\*/rmsnorm_h128\.jsonl"):
        load_task(str(root / "definitions" / "rmsnorm" / "rmsnorm_h128.json"))


def test_the_dataset_root_is_not_a_task_and_says_how_to_name_one() -> None:
    with pytest.raises(TaskError) as info:
        load_task(str(TRACE))
    msg = str(info.value)
    assert "a FlashInfer-Trace dataset (4 definitions)" in msg and "definitions/gemm/gemm_n64_k32.json" in msg
    assert dataset_root(RMSNORM) == TRACE.resolve() and dataset_root(Path("/tmp/x.json")) is None


def test_a_scalar_input_no_workload_describes_is_random_per_seed() -> None:
    task = load_task(str(MOE))
    w = task.workload("8d2f6a1e")
    assert w.params["inputs"]["routed_scaling_factor"] == {"type": "random"}
    rt = TaskRuntime(task)
    draws = [rt.make_inputs(w, seed, "cpu")[1] for seed in (1, 1, 2, 3)]
    assert all(isinstance(d, float) for d in draws)
    assert draws[0] == draws[1] and len({draws[1], draws[2], draws[3]}) == 3
    # a workload that gives the scalar keeps its value
    assert rt.make_inputs(task.workload("c41e9b07"), 1, "cpu")[1] == 2.5
    ref = rt.build_reference(w, "cpu")(rt.make_inputs(w, 1, "cpu"))
    assert ref.shape == (5, 8) and torch.allclose(ref.sum(dim=-1), torch.full((5,), draws[0]), atol=1e-5)


def test_random_integers_use_flashinfer_bench_s_ranges() -> None:
    task = load_task(str(ROPE))
    wl = task.workload("39b6d8f4")  # 4096 positions; the workload says nothing about them
    positions = TaskRuntime(task).make_inputs(wl, 0, "cpu")[0]
    low, high = FIB_INT_RANGES["int32"]
    assert positions.dtype == torch.int32 and positions.shape == (4096,)
    assert int(positions.min()) >= low and int(positions.max()) < high
    assert int(positions.min()) < -900 and int(positions.max()) > 900  # the whole range, negatives included


def test_default_tolerances_and_matched_ratio(minimal_fib: None) -> None:
    rms, moe = load_task(str(RMSNORM)), load_task(str(MOE))
    assert rms.tolerance.for_dtype("bfloat16") == (1e-2, 1e-2) and rms.tolerance.for_dtype("float32") == (
        1e-2,
        1e-2,
    )
    assert rms.tolerance.mismatch_ratio == 0 and rms.extras["matched_ratio"] == 1.0
    assert moe.tolerance.mismatch_ratio == pytest.approx(0.05) and moe.extras["matched_ratio"] == 0.95


def _judge(task_path: Path, got: torch.Tensor, exp: torch.Tensor):  # type: ignore[no-untyped-def]
    task = load_task(str(task_path))
    return TaskRuntime(task).check(got, exp, task.smoke())


def test_the_check_is_flashinfer_bench_s_rule() -> None:
    exp = torch.tensor([[100.0, 0.001, -3.0, 0.0]])
    # off by more than atol but within rtol of a large value, or within atol of a tiny one: both pass
    ok = _judge(ROPE, torch.tensor([[100.9, 0.0105, -3.0, 0.0]]), exp)
    assert ok is not None and ok.passed and ok.max_abs_err == pytest.approx(0.9, rel=1e-4)
    # off by 0.015 from 1.0: beyond atol and beyond rtol, so it fails, where ksearch's own rule
    # (|d| <= atol + rtol * |ref| = 0.02) would have let it pass
    exp = torch.tensor([[100.0, 0.001, 1.0, 0.0]])
    bad = _judge(ROPE, torch.tensor([[100.0, 0.001, 1.015, 0.0]]), exp)
    assert bad is not None and not bad.passed and bad.kind == "wrong_values"
    assert (
        bad.mismatches == 1
        and bad.first_mismatch_index == [0, 2]
        and bad.got_at_first == pytest.approx(1.015)
    )
    assert "FlashInfer-Bench needs every element within" in bad.message
    nan = _judge(ROPE, torch.tensor([[100.0, float("nan"), -3.0, 0.0]]), exp)
    assert nan is not None and nan.kind == "nan_inf" and nan.first_mismatch_index == [0, 1]
    dtype = _judge(ROPE, exp.double(), exp)
    assert dtype is not None and dtype.kind == "wrong_dtype" and "float64" in dtype.message
    shape = _judge(ROPE, exp[:, :3], exp)
    assert shape is not None and shape.kind == "wrong_shape"


def test_moe_needs_95_percent_of_the_elements(minimal_fib: None) -> None:
    exp = torch.zeros(10, 10)
    four = exp.clone()
    four.view(-1)[:4] = 1.0
    six = exp.clone()
    six.view(-1)[:6] = 1.0
    passed = _judge(MOE, four, exp)
    assert passed is not None and passed.passed and passed.mismatches == 4
    failed = _judge(MOE, six, exp)
    assert failed is not None and not failed.passed and "95% of the elements" in failed.message
    strict = _judge(ROPE, four, exp)  # any other op type: every element
    assert strict is not None and not strict.passed


@pytest.mark.slow
def test_task_show_check_on_the_dataset() -> None:
    app = typer.Typer()
    cli_tasks.register(app)
    result = CliRunner().invoke(app, ["task", "show", str(GEMM), "--check"])
    assert result.exit_code == 0, result.output
    assert "atol 0.01, rtol 0.01" in result.stdout and "float16[1, 64]" in result.stdout
