"""GPU MODE importer: task.yml + reference.py, custom_kernel candidates, the task's own check."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.rt.runtime import CandidateError, TaskRuntime, load_candidate_module

FIX = Path(__file__).parent / "fixtures" / "gpumode"
FOLDER = FIX / "scaled_add"

GOOD = """
from task import input_t, output_t   # candidates import the folder's helper modules

def custom_kernel(data: input_t) -> output_t:
    a, b, scale, out = data
    torch_out = a.mul(scale).add_(b)
    out.copy_(torch_out)
    return out
"""

WRONG = """
def custom_kernel(data):
    a, b, scale, out = data
    return a * scale - b
"""

LAZY = """
def custom_kernel(data):
    return data[3]   # returns the output buffer without computing anything
"""


def test_folder_imports_with_splits() -> None:
    task = load_task(str(FOLDER))
    assert task.style == "gpumode" and task.name == "scaled_add" and task.candidate_entry == "custom_kernel"
    assert [(w.name, w.split) for w in task.workloads] == [
        ("bench0", "search"), ("bench1", "search"),
        ("test0", "heldout"), ("test1", "heldout"), ("test2", "heldout"),
        ("smoke", "smoke"),
    ]  # fmt: skip
    assert task.smoke().params == {"size": 17, "seed": 12}  # the smallest test
    assert task.extras["ranking_by"] == "geom"
    assert task.extras["modules"]["utils"] == str((FIX / "common_utils.py").resolve())
    assert task.title.startswith("Scaled add")
    assert load_task(str(FOLDER / "task.yml")).name == "scaled_add"


def _runtime(tmp_path: Path, source: str, name: str):
    task = load_task(str(FOLDER))
    rt = TaskRuntime(task)
    wl = task.workload("test0")
    inputs = rt.make_inputs(wl, 5, "cpu")
    # generate_input's output buffer is torch.empty: in a process that computed this very answer
    # before (another test, same seed) it may hold it. Known contents keep this test from depending
    # on the allocator.
    inputs[0][3].zero_()
    expected = rt.build_reference(wl, "cpu")(inputs)
    mod = load_candidate_module(textwrap.dedent(source), name, tmp_path)
    got = rt.build_candidate(mod, wl, "cpu")(inputs)
    return rt, wl, inputs, expected, got


def test_correct_candidate_passes_the_tasks_own_check(tmp_path: Path) -> None:
    rt, wl, inputs, expected, got = _runtime(tmp_path, GOOD, "gm_good")
    a, b, scale, _ = inputs[0]
    torch.testing.assert_close(expected, a * scale + b)
    result = rt.check(got, expected, wl, inputs=inputs)
    assert result is not None and result.passed and result.kind == "ok" and result.max_abs_err == 0.0


@pytest.mark.parametrize("source", [WRONG, LAZY], ids=["wrong", "lazy"])
def test_wrong_candidates_fail_the_check(tmp_path: Path, source: str) -> None:
    rt, wl, inputs, expected, got = _runtime(tmp_path, source, f"gm_{len(source)}")
    result = rt.check(got, expected, wl)  # without inputs: the last ones made for this workload
    assert result is not None and not result.passed and result.kind == "wrong_values"
    assert "mismatches" in result.message
    # reference and candidate each ran on their own copy: the answer was never written into the
    # original output buffer, where a lazy candidate could have picked it up
    assert expected.data_ptr() != inputs[0][3].data_ptr() != got.data_ptr()


def test_an_output_buffer_left_uninitialised_by_the_generator_is_poisoned() -> None:
    """generate_input's torch.empty output could otherwise hold an earlier evaluation's answer."""
    task = load_task(str(FOLDER))
    rt = TaskRuntime(task)
    empty = torch.empty
    out = rt.make_inputs(task.workload("test0"), 5, "cpu")[0][3]
    assert torch.isnan(out).all()
    assert torch.empty is empty  # the poisoning lasts only while the generator runs


def test_seed_parameter_is_the_trial_seed() -> None:
    task = load_task(str(FOLDER))
    rt = TaskRuntime(task)
    wl = task.workload("bench0")
    a1, a2, b = (rt.make_inputs(wl, s, "cpu")[0][0] for s in (3, 3, 4))
    assert torch.equal(a1, a2) and not torch.equal(a1, b) and a1.shape == (65536,)
    assert rt.cost(wl) is None


def test_candidate_without_custom_kernel(tmp_path: Path) -> None:
    task = load_task(str(FOLDER))
    rt = TaskRuntime(task)
    with pytest.raises(CandidateError, match="custom_kernel"):
        rt.build_candidate(
            load_candidate_module("def kernel(d):\n    return d\n", "gm_none", tmp_path), task.smoke(), "cpu"
        )


def _copy(tmp_path: Path) -> Path:
    shutil.copytree(FIX, tmp_path / "gm")
    return tmp_path / "gm" / "scaled_add"


@pytest.mark.parametrize(
    ("old", "new", "expect"),
    [
        ("benchmarks:", "bench_marks:", "task.yml: benchmarks: missing or empty"),
        ('ranking_by: "geom"', 'ranking_by: "median"', "task.yml: ranking_by: 'median' is not one of"),
        ('{"size": 17, "seed": 12}', '{"sz": 17, "seed": 12}', "task.yml: tests[1].sz: not a parameter of reference.py"),
        ("../common_utils.py", "../missing_utils.py", "task.yml: files[2].source: '../missing_utils.py' not found"),
        ('  - {"size": 65536, "seed": 21}', "  - 65536", "task.yml: benchmarks[0]: must be a mapping"),
        ("lang:", "lang: [", "task.yml: not valid YAML"),
    ],
)  # fmt: skip
def test_malformed_task_yml(tmp_path: Path, old: str, new: str, expect: str) -> None:
    folder = _copy(tmp_path)
    yml = folder / "task.yml"
    assert old in yml.read_text()
    yml.write_text(yml.read_text().replace(old, new, 1))
    with pytest.raises(TaskError) as info:
        load_task(str(folder))
    assert expect in str(info.value) and str(folder) in str(info.value)


def test_reference_without_check_implementation(tmp_path: Path) -> None:
    folder = _copy(tmp_path)
    ref = folder / "reference.py"
    ref.write_text(ref.read_text().replace("def check_implementation", "def check_impl"))
    with pytest.raises(TaskError, match=r"reference\.py: check_implementation: not defined"):
        load_task(str(folder))
    (folder / "task.yml").unlink()
    with pytest.raises(TaskError, match=r"has reference\.py but no task\.yml"):
        load_task(str(folder))


# ---------------------------------------------------------------- judged as GPU MODE's evaluator judges

PAIRMIX = FIX / "pairmix"

MASKLESS = """
import torch

def custom_kernel(data):
    x, mask, w, cfg = data   # reads no mask at all, like a kernel that trusts `nomask` in a config
    left = (x @ w["proj"]) * torch.sigmoid(x @ w["gate"])
    out = torch.einsum("bikd,bjkd->bijd", left, left) / x.shape[1]
    return torch.nn.functional.layer_norm(out, (cfg["dim"],))
"""


def test_ranking_defaults_to_gpumode_last_and_the_evaluator_is_read() -> None:
    pinned = load_task(str(FIX / "cuda_pinned"))
    assert pinned.extras["ranking_by"] == "last" and pinned.extras["ranking_declared"] is False
    assert pinned.extras["evaluator"] == {
        "path": str((FIX / "eval_host_l2.py").resolve()), "timer": "host", "clears_l2": True, "rel_err_stop": 0.01,
    }  # fmt: skip
    pair = load_task(str(PAIRMIX))
    assert pair.extras["ranking_by"] == "geom" and pair.extras["ranking_declared"] is True
    ev = pair.extras["evaluator"]
    assert (ev["timer"], ev["clears_l2"], ev["rel_err_stop"]) == ("events", False, 0.001)
    assert load_task(str(FIX / "scalar_sum")).extras["evaluator"]["timer"] == "unknown"  # no eval.py mapped


def test_a_reference_pinned_to_cuda_is_noted_at_load() -> None:
    task = load_task(str(FIX / "cuda_pinned"))
    # line 13 is the generator; the `"cuda" if torch.cuda.is_available() else "cpu"` fallback above is no pin
    assert task.extras["needs_gpu"] == "reference.py line 13 puts tensors on CUDA: device='cuda'"
    assert load_task(str(PAIRMIX)).extras["needs_gpu"] is None
    with pytest.raises(TaskError, match=r"needs a GPU: reference\.py line 13"):
        TaskRuntime(task).make_inputs(task.smoke(), 1, "cpu")


@pytest.mark.cpu
def test_check_says_a_cuda_task_needs_a_gpu_instead_of_failing_in_torch() -> None:
    from ksearch.gpu.tasks.check import run_check

    report = run_check(str(FIX / "cuda_pinned"))
    assert not report.ok and report.needs_gpu and report.outputs == []
    assert report.error is not None and "needs a GPU (reference.py line 13" in report.error
    assert "Error" not in report.error  # no torch exception text


def test_a_generate_input_needing_the_rank_is_refused() -> None:
    with pytest.raises(TaskError) as info:
        load_task(str(FIX / "ranked_pair"))
    msg = str(info.value)
    assert "task.yml: benchmarks[0]: generate_input needs rank, which the workload does not give" in msg
    assert "once per rank" in msg


def test_booleans_reach_generate_input_as_the_evaluator_passes_them() -> None:
    """GPU MODE writes `nomask: False` into its test spec and reads back the text 'False', which is true."""
    task = load_task(str(PAIRMIX))
    wl = task.workload("test1")
    assert wl.params["nomask"] == "False" and wl.params["distribution"] == "cauchy"
    assert any(n.startswith("nomask:") and "'False'" in n for n in task.extras["notes"])
    _x, mask, _w, _cfg = TaskRuntime(task).make_inputs(wl, 3, "cpu")[0]
    assert bool((mask == 1).all())  # as on GPU MODE: every TriMul-style mask is all ones
    from ksearch.gpu.tasks.gpumode import spec_value

    assert [spec_value(v) for v in (True, 7, "normal", [96, 128], 0.5)] == [
        "True",
        7,
        "normal",
        (96, 128),
        0.5,
    ]


def test_a_kernel_that_ignores_the_mask_passes_as_it_does_on_gpumode(tmp_path: Path) -> None:
    task = load_task(str(PAIRMIX))
    rt = TaskRuntime(task)
    wl = task.workload("test2")  # `nomask: False` in task.yml
    inputs = rt.make_inputs(wl, 11, "cpu")
    cand = rt.build_candidate(load_candidate_module(MASKLESS, "gm_maskless", tmp_path), wl, "cpu")
    result = rt.check(cand(inputs), rt.build_reference(wl, "cpu")(inputs), wl, inputs=inputs)
    assert result is not None and result.passed
    # with a real boolean the mask applies, and the same kernel is wrong: the mask is what tells them apart
    params = {**wl.params, "nomask": False, "seed": 11}
    real = [rt.reference_module.generate_input(**params)]
    assert not bool((real[0][1] == 1).all())
    wrong = rt.check(cand(real), rt.build_reference(wl, "cpu")(real), wl, inputs=real)
    assert wrong is not None and not wrong.passed


def test_seeds_combine_with_the_trial_seed_and_the_tasks_own_seed_is_kept() -> None:
    from ksearch.gpu.tasks.rt.common import seed_everything
    from ksearch.gpu.tasks.rt.gpumode import combine_seeds

    task = load_task(str(PAIRMIX))
    rt = TaskRuntime(task)
    b0, b1 = task.workload("bench0"), task.workload("bench1")  # same shape, seeds 41 and 42
    x0 = rt.make_inputs(b0, 5, "cpu")[0]
    params = {**b0.params, "seed": combine_seeds(41, 5)}
    seed_everything(params["seed"])  # the global generators follow the same seed (weights come from them)
    again = rt.reference_module.generate_input(**params)
    assert torch.equal(x0[0], again[0]) and torch.equal(x0[2]["proj"], again[2]["proj"])
    assert not torch.equal(x0[0], rt.make_inputs(b0, 6, "cpu")[0][0])
    assert not torch.equal(x0[0], rt.make_inputs(b1, 5, "cpu")[0][0])
    own = rt.task_inputs(b0, "cpu")[0]  # what GPU MODE's evaluator benchmarks: the workload's seed itself
    seed_everything(41)
    assert torch.equal(own[0], rt.reference_module.generate_input(**b0.params)[0])
    assert combine_seeds(41, 2**31 - 1) < 2**63 and combine_seeds(2**62, 2**62) < 2**63


def test_generate_input_runs_outside_any_device_context() -> None:
    """As in GPU MODE's evaluator: a tensor made without a device is made on the CPU, then moved."""
    task = load_task(str(PAIRMIX))
    x, _m, _w, cfg = TaskRuntime(task).make_inputs(task.workload("test0"), 1, "meta")[0]
    assert cfg["drawn_on"] == "cpu" and x.device.type == "meta"


def test_a_zero_dim_output_is_not_a_degenerate_rule() -> None:
    """vectorsum returns a 0-d sum: its mean is itself, so "a constant" is no fake answer there."""
    from ksearch.gpu.inputs import degenerate_outputs

    assert degenerate_outputs(load_task(str(FIX / "scalar_sum"))) == []
