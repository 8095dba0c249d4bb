"""The native (KernelBench-style) format: plain files, extras, computed extras, malformed files."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.rt.runtime import CandidateError, TaskRuntime, load_candidate_module

FIX = Path(__file__).parent / "fixtures" / "native"


def write(tmp_path: Path, text: str, name: str = "task_file.py") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(text))
    return p


GOOD = textwrap.dedent("""
    import torch
    class Model(torch.nn.Module):
        def forward(self, x):
            return x + 1
    def get_inputs(n=4):
        return [torch.randn(n)]
    def get_init_inputs():
        return []
""")


def test_plain_kernelbench_file_gets_default_and_derived_smoke() -> None:
    task = load_task(str(FIX / "plain_gelu_scale.py"))
    assert task.name == "plain_gelu_scale"
    assert [(w.name, w.split) for w in task.workloads] == [("default", "search"), ("smoke", "smoke")]
    assert task.smoke_derived and not task.has_cost
    assert task.candidate_entry == "ModelNew" and task.style == "kernelbench"


def test_plain_file_runs_with_its_init_inputs(tmp_path: Path) -> None:
    task = load_task(str(FIX / "plain_gelu_scale.py"))
    rt = TaskRuntime(task)
    wl = task.smoke()
    (x,) = rt.make_inputs(wl, 3, "cpu")
    out = rt.build_reference(wl, "cpu")([x])
    torch.testing.assert_close(out, torch.nn.functional.gelu(x) * 1.5)
    assert rt.cost(wl) is None


def test_extras_are_read_without_running_the_file() -> None:
    task = load_task(str(FIX / "linear_relu.py"))
    assert task.op == "linear_relu" and task.dtype == "float32" and task.bound == "compute"
    assert [(w.name, w.split) for w in task.workloads] == [
        ("big", "search"),
        ("odd", "heldout"),
        ("tiny", "smoke"),
    ]
    assert task.workload("big").params == {"M": 4096, "K": 1024, "N": 1024}  # HIDDEN * 32 folded
    assert not task.smoke_derived and task.has_cost
    # a bare number applies to every float dtype; a mapping overrides per dtype, the rest keep defaults
    assert task.tolerance.for_dtype("float32") == (1e-5, 1e-5)
    assert task.tolerance.for_dtype("bfloat16") == (1e-5, 2e-2)


def test_loading_does_not_import_torch() -> None:
    code = (
        "import sys; from ksearch.gpu.tasks import load_task, builtin_tasks; "
        f"load_task({str(FIX / 'linear_relu.py')!r}); builtin_tasks(); "
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'torch imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=Path(__file__).parents[2])


@pytest.mark.slow
def test_computed_workloads_are_probed_in_a_subprocess() -> None:
    task = load_task(str(FIX / "computed_workloads.py"))
    assert [(w.name, w.split) for w in task.workloads] == [
        ("n16", "search"), ("n32", "search"), ("n64", "heldout"), ("smoke", "smoke"),
    ]  # fmt: skip
    assert task.smoke().params == {"n": 16} and task.smoke_derived


def test_weights_of_model_and_modelnew_match(tmp_path: Path) -> None:
    task = load_task(str(FIX / "linear_relu.py"))
    rt = TaskRuntime(task)
    wl = task.smoke()
    cand = load_candidate_module(
        textwrap.dedent("""
            import torch
            class ModelNew(torch.nn.Module):
                def __init__(self, K, N):
                    super().__init__()
                    self.fc = torch.nn.Linear(K, N)
                def forward(self, x):
                    return torch.clamp_min(x @ self.fc.weight.t() + self.fc.bias, 0.0)
        """),
        "cand_linear",
        tmp_path,
    )
    inputs = rt.make_inputs(wl, 0, "cpu")
    ref = rt.build_reference(wl, "cpu")(inputs)
    got = rt.build_candidate(cand, wl, "cpu")(inputs)
    assert ref.shape == (5, 16)
    torch.testing.assert_close(got, ref)
    cost = rt.cost(task.workload("big"))
    assert cost is not None and cost.flops == 2 * 4096 * 1024 * 1024 and cost.dtype == "float32"


def test_candidate_without_modelnew_is_a_clear_error(tmp_path: Path) -> None:
    task = load_task(str(FIX / "linear_relu.py"))
    rt = TaskRuntime(task)
    mod = load_candidate_module("class Model: pass\n", "no_modelnew", tmp_path)
    with pytest.raises(CandidateError, match="defines no `ModelNew`"):
        rt.build_candidate(mod, task.smoke(), "cpu")


def test_inputs_follow_the_seed() -> None:
    task = load_task(str(FIX / "linear_relu.py"))
    rt = TaskRuntime(task)
    wl = task.smoke()
    a, b, c = (rt.make_inputs(wl, s, "cpu")[0] for s in (7, 7, 8))
    assert torch.equal(a, b) and not torch.equal(a, c)


@pytest.mark.parametrize(
    ("body", "field", "says"),
    [
        ("def get_inputs():\n    return []\n", "Model", "no `Model` defined"),
        ("class Model: pass\n", "get_inputs", "no `get_inputs()`"),
        (
            GOOD + "WORKLOADS = [{'name': 'a', 'params': {'n': 2}, 'split': 'test'}]\n",
            "WORKLOADS[0].split",
            "search",
        ),
        (
            GOOD + "WORKLOADS = [{'name': 'a', 'params': {'m': 2}}]\n",
            "WORKLOADS[0].params.m",
            "neither get_inputs",
        ),
        (GOOD + "WORKLOADS = [{'name': 'a', 'shape': [2]}]\n", "WORKLOADS[0].shape", "accepted keys"),
        (GOOD + "WORKLOADS = [{'name': 'a'}, {'name': 'a'}]\n", "WORKLOADS", "unique"),
        (
            GOOD + "WORKLOADS = [{'name': 'a', 'split': 'heldout'}]\n",
            "WORKLOADS",
            "at least one workload with split 'search'",
        ),
        (GOOD + "WORKLOADS = []\n", "WORKLOADS", "non-empty list"),
        (GOOD + "META = {'dtype': 'float13'}\n", "META.dtype", "unknown dtype"),
        (GOOD + "META = {'bound': 'io'}\n", "META.bound", "memory"),
        (GOOD + "TOLERANCE = {'atool': 1e-3}\n", "TOLERANCE.atool", "accepted: atol, rtol, mismatch_ratio"),
        (GOOD + "TOLERANCE = {'atol': {'fp12': 1e-3}}\n", "TOLERANCE.atol.fp12", "unknown dtype"),
        (GOOD + "TOLERANCE = {'mismatch_ratio': 0.5}\n", "TOLERANCE.mismatch_ratio", "less than or equal"),
        ("class Model(:\n", "line 1", "syntax error"),
    ],
)
def test_malformed_files_name_the_file_and_field(tmp_path: Path, body: str, field: str, says: str) -> None:
    path = write(tmp_path, body)
    with pytest.raises(TaskError) as info:
        load_task(str(path))
    msg = str(info.value)
    assert str(path) in msg and field in msg and says in msg, msg


def test_unknown_task_names_list_the_builtins() -> None:
    with pytest.raises(TaskError, match=r"not a built-in .*softmax"):
        load_task("no_such_task")
    with pytest.raises(TaskError, match="no such task file"):
        load_task("missing/dir/task.py")


@pytest.mark.slow
def test_the_probe_of_a_task_file_gets_no_keys(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Computed extras run the file: it gets the sandbox's scrubbed environment, not the caller's."""
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-task-probe")
    path = write(
        tmp_path,
        """
        import os
        import torch
        class Model(torch.nn.Module):
            def forward(self, x):
                return x + 1
        def get_inputs():
            return [torch.randn(8)]
        def get_init_inputs():
            return []
        META = {"title": "key=" + str(os.environ.get("ANTHROPIC_API_KEY"))}
        """,
    )
    assert load_task(str(path)).title == "key=None"


def test_kernelbench_precision_casts_inputs_and_weights_as_kernelbench_does(tmp_path: Path) -> None:
    from ksearch.gpu.tasks.contract import entry_rules
    from ksearch.gpu.tasks.facts import facts_key
    from ksearch.gpu.tasks.kernelbench_rules import with_precision

    path = write(
        tmp_path,
        """
        import torch
        class Model(torch.nn.Module):
            def __init__(self, n):
                super().__init__()
                self.w = torch.nn.Parameter(torch.randn(n))
                self.register_buffer("steps", torch.arange(n))
            def forward(self, x, idx):
                return x * self.w + idx
        def get_inputs():
            return [torch.randn(2, 4), torch.arange(4), 3]
        def get_init_inputs():
            return [4]
        """,
        name="kb_plain.py",
    )
    task = load_task(str(path))
    bf16 = with_precision(task, "bf16")
    assert task.extras.get("precision") is None and bf16.extras["precision"] == "bf16"
    assert facts_key(bf16) != facts_key(task)  # other dtypes, other facts
    assert "KernelBench precision bf16" in entry_rules(bf16) and "precision" not in entry_rules(task)
    rt = TaskRuntime(bf16)
    wl = bf16.workloads[0]
    x, idx, three = rt.make_inputs(wl, 0, "cpu")
    # every tensor, the integer one too (KernelBench's _process_input_tensor); plain values as they are
    assert (x.dtype, idx.dtype, three) == (torch.bfloat16, torch.bfloat16, 3)
    ref = rt._impl.reference_model(wl, "cpu")
    assert (
        ref.w.dtype == torch.bfloat16 and ref.steps.dtype == torch.int64
    )  # .to(dtype): floating tensors only
    plain = TaskRuntime(task).make_inputs(wl, 0, "cpu")
    assert (plain[0].dtype, plain[1].dtype) == (torch.float32, torch.int64)
    assert torch.equal(plain[0].to(torch.bfloat16), x)  # the same draw, cast
