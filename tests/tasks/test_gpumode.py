"""GPU MODE importer: task.yml + reference.py, custom_kernel candidates, the task's own check."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from gpu.runtime import CandidateError, TaskRuntime, load_candidate_module
from gpu.task import TaskError
from gpu.tasks import load_task

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
