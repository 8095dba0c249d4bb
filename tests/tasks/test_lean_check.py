"""Checking outputs lean on memory, `task show --check` judged on one reference run, its exit code, and the
trivial-answer probe on KernelBench-shaped files (inputs from torch.rand)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
import typer
from typer.testing import CliRunner

from ksearch.gpu.checks import outputs as checking
from ksearch.gpu.task import Tolerance
from ksearch.gpu.tasks.check import run_check
from ksearch.gpu.tasks.rt.runtime import TaskRuntime
from ksearch.server.cli import tasks as cli_tasks

KB = Path(__file__).parent / "fixtures" / "kernelbench"
ROOT = Path(__file__).resolve().parents[2]
TOL = Tolerance()


def _app() -> typer.Typer:
    app = typer.Typer()
    cli_tasks.register(app)
    return app


def _fields(r: checking.OutputCheck) -> dict[str, Any]:
    d = {k: v for k, v in vars(r).items() if k != "nan_positions"}
    d["nan_positions"] = None if r.nan_positions is None else r.nan_positions.tolist()
    return d


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.arange(23.0),
        lambda: torch.arange(7 * 11 * 3.0).reshape(7, 11, 3).transpose(0, 2),  # not contiguous
        lambda: torch.tensor(5.0).expand(6, 9),  # expanded: one element in memory
        lambda: torch.randn(3, 40, dtype=torch.complex64).view(torch.float32).view(3, 40, 2),
        lambda: torch.tensor(3.0),  # 0-d
    ],
)
def test_pieces_cover_a_tensor_in_order_and_within_the_limit(make) -> None:
    t = make()
    parts = list(checking.pieces(t, 5))
    assert all(p.dim() == 1 and p.numel() <= max(5, 1) for p in parts)
    assert torch.equal(torch.cat(parts), t.reshape(-1))


def _cases() -> list[tuple[str, torch.Tensor, torch.Tensor, Tolerance]]:
    g = torch.Generator().manual_seed(3)
    exp = torch.randn(13, 17, generator=g)
    wrong = exp.clone()
    wrong[4, 5] += 1.0
    wrong[9, 1] -= 2.0
    nan = exp.clone()
    nan[6, 2] = float("nan")
    nan[12, 16] = float("inf")
    ref_nan = exp.clone()
    ref_nan[1, 1] = float("nan")
    cplx = torch.randn(9, 8, dtype=torch.complex64, generator=g)
    cplx_wrong = cplx.clone()
    cplx_wrong[7, 3] += 1j
    ints = torch.randint(0, 9, (10, 10), generator=g)
    ints_wrong = ints.clone()
    ints_wrong[8, 8] += 1
    few = exp.clone()
    few[0, 0] += 5
    return [
        ("equal", exp + 1e-9, exp, TOL),
        ("wrong", wrong, exp, TOL),
        ("nan", nan, exp, TOL),
        ("ref nan matched", ref_nan.clone(), ref_nan, TOL),
        ("ref nan missed", exp, ref_nan, TOL),
        ("complex", cplx_wrong, cplx, TOL),
        ("ints", ints_wrong, ints, TOL),
        ("transposed", exp.t().contiguous().t(), exp, TOL),
        ("mismatch ratio", few, exp, Tolerance(mismatch_ratio=0.01)),
    ]


@pytest.mark.parametrize("case", _cases(), ids=lambda c: c[0])
def test_comparing_in_pieces_gives_the_whole_tensor_answer(case, monkeypatch: pytest.MonkeyPatch) -> None:
    _, got, exp, tol = case
    whole = checking.compare_tensor(got, exp, tol)
    monkeypatch.setattr(checking, "COMPARE_CHUNK", 7)  # many pieces, cut across rows
    assert repr(_fields(checking.compare_tensor(got, exp, tol))) == repr(_fields(whole))  # NaN == NaN


def test_where_the_first_bad_element_is_and_what_it_holds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(checking, "COMPARE_CHUNK", 7)
    _, got, exp, tol = _cases()[1]
    r = checking.compare_tensor(got, exp, tol)
    assert not r.passed and r.kind == "wrong_values" and r.mismatches == 2 and r.numel == 13 * 17
    assert r.first_mismatch_index == [4, 5] and r.got_at_first == pytest.approx(float(got[4, 5]))
    _, got, exp, tol = _cases()[2]
    r = checking.compare_tensor(got, exp, tol)
    assert r.kind == "nan_inf" and r.mismatches == 2 and r.first_mismatch_index == [6, 2]
    assert r.nan_positions is not None and r.nan_positions.shape == exp.shape
    assert r.nan_positions.nonzero().tolist() == [[6, 2], [12, 16]]


@pytest.mark.slow
def test_checking_a_large_output_takes_a_fraction_of_its_size() -> None:
    """A 64 MB float32 output: comparing whole tensors took over 20x that (float64 copies and masks)."""
    code = textwrap.dedent(
        """
        import resource, torch
        from ksearch.gpu.checks import outputs as checking
        from ksearch.gpu.task import Tolerance
        exp = torch.randn(16 * 1024 * 1024)
        got = exp.clone()
        got[-1] += 1
        before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        r = checking.compare_tensor(got, exp, Tolerance())
        same = checking.inputs_equal([got], [exp])[0]
        weak = checking.degenerate_answers(exp, [got], Tolerance())
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        print(r.kind, r.mismatches, same, len(weak), (after - before) // 1024)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=str(ROOT), timeout=300, check=True
    )
    kind, mismatches, same, weak, grew_mb = out.stdout.split()
    assert (kind, mismatches, same, weak) == ("wrong_values", "1", "False", "0")
    assert int(grew_mb) < 64, f"peak RSS grew by {grew_mb} MB"


@pytest.mark.slow
def test_check_runs_the_reference_once_unless_a_trivial_answer_needs_the_probe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []
    original = TaskRuntime.build_reference

    def counted(self: TaskRuntime, wl: Any, device: str) -> Any:
        fn = original(self, wl, device)
        calls.append("build")

        def call(inputs: list[Any]) -> Any:
            calls.append("run")
            return fn(inputs)

        return call

    monkeypatch.setattr(TaskRuntime, "build_reference", counted)
    sound = run_check(str(KB / "l3_mlp.py"))
    assert sound.ok and sound.warnings == [] and sound.probed == []
    assert calls == ["build", "run"]
    calls.clear()
    relu = run_check(str(KB / "l1_relu_rand.py"))
    assert relu.ok and relu.warnings == [], relu
    assert calls == ["build", "run", "run"]  # the second run is the probe, on signed inputs
    (probed,) = relu.probed
    assert "input 0 itself passes the rule on the task's own inputs" in probed and "rejected" in probed


@pytest.mark.slow
def test_check_says_which_trivial_answers_the_probe_rejects() -> None:
    r = run_check(str(KB / "l2_sub_relu_rand.py"))
    assert r.ok and r.warnings == [], r
    assert any("all zeros" in p for p in r.probed) and any("a constant" in p for p in r.probed)


def test_a_rule_weak_on_any_input_is_still_a_warning(tmp_path: Path) -> None:
    """Sigmoid of x/1e6 is 0.5 on every input: the probe cannot reject a constant, so the rule stays weak."""
    f = tmp_path / "flat.py"
    f.write_text(
        textwrap.dedent(
            """
            import torch
            import torch.nn as nn

            class Model(nn.Module):
                def forward(self, x):
                    return torch.sigmoid(x * 1e-6)

            def get_inputs():
                return [torch.rand(64, 64)]

            def get_init_inputs():
                return []
            """
        )
    )
    r = run_check(str(f))
    assert r.ok and r.probed == []
    assert any("a constant" in w and "also on inputs with signed values" in w for w in r.warnings)


RAISES = """import torch


class Model(torch.nn.Module):
    def forward(self, x):
        raise ValueError("this reference cannot run")


def get_inputs():
    return [torch.rand(4, 8)]


def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_task_show_check_exits_non_zero_when_the_check_fails(tmp_path: Path) -> None:
    runner = CliRunner()
    bad = tmp_path / "raises.py"
    bad.write_text(RAISES)
    text = runner.invoke(_app(), ["task", "show", str(bad), "--check"])
    assert text.exit_code == 1, text.output
    assert "check failed" in text.output and "ValueError: this reference cannot run" in text.output
    as_json = runner.invoke(_app(), ["task", "show", str(bad), "--check", "--json"])
    assert as_json.exit_code == 1
    check = json.loads(as_json.stdout)["check"]
    assert not check["ok"] and "this reference cannot run" in check["error"]
    # a KernelBench file that puts its tensors on CUDA is said to need a GPU, not torch's assertion
    cuda = runner.invoke(_app(), ["task", "show", str(KB / "l1_cuda_only.py"), "--check"])
    assert cuda.exit_code == 1, cuda.output
    said = " ".join(cuda.output.split())
    assert (
        "check not run: this task needs a GPU (l1_cuda_only.py line 8 puts tensors on CUDA: .cuda())" in said
    )
    assert "not compiled with CUDA" not in said
    good = runner.invoke(_app(), ["task", "show", str(KB / "l1_relu_rand.py"), "--check"])
    assert good.exit_code == 0, good.output
    assert "rejected by the correctness rule (with the probe on signed inputs)" in " ".join(
        good.stdout.split()
    )


def test_a_mismatch_in_one_of_several_outputs_names_it() -> None:
    """A model reading "12 of 96 elements differ" of a two-output task could not tell which output was wrong."""
    tol = Tolerance()
    exp = (torch.ones(4, 8), torch.zeros(3))
    wrong_first = checking.compare_outputs((torch.full((4, 8), 2.0), torch.zeros(3)), exp, tol)
    assert not wrong_first.passed and wrong_first.message.startswith("output 0: "), wrong_first.message
    wrong_shape = checking.compare_outputs((torch.ones(4, 8), torch.zeros(4)), exp, tol)
    assert wrong_shape.message.startswith("output 1: "), wrong_shape.message
    single = checking.compare_outputs(torch.full((4, 8), 2.0), torch.ones(4, 8), tol)
    assert not single.message.startswith("output"), single.message  # one output: nothing to tell apart
