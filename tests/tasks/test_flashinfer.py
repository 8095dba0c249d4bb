"""FlashInfer-Bench importer: definition + workloads JSONL, both candidate styles, malformed inputs."""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch

from ksearch.gpu.inputs import accepted_by
from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.loader import SMOKE_AXIS_CAP
from ksearch.gpu.tasks.rt.runtime import CandidateError, TaskRuntime, load_candidate_module

FIX = Path(__file__).parent / "fixtures" / "flashinfer"
DEF = FIX / "rowscale_h64.json"

VALUE_RETURNING = """
import torch

def run(x, weight, eps):
    inv = torch.rsqrt((x * x).mean(dim=1, keepdim=True) + eps)
    return {"rms": 1.0 / inv[:, 0], "y": x * inv * weight}
"""

DESTINATION_PASSING = """
import torch

def run(x, weight, eps, y, rms):
    ms = (x * x).sum(dim=1) / x.shape[1]
    rms.copy_(torch.sqrt(ms + eps))
    y.copy_(x / rms[:, None] * weight)
"""

FORGETS_A_ROW = """
def run(x, weight, eps, y, rms):
    r = (x.pow(2).mean(dim=1) + eps).sqrt()
    rms.copy_(r)
    y[1:].copy_((x / r[:, None] * weight)[1:])   # row 0 left unwritten
"""


def test_definition_and_workloads_import() -> None:
    task = load_task(str(DEF))
    assert task.style == "flashinfer" and task.name == "rowscale_h64" and task.op == "rmsnorm"
    assert task.candidate_entry == "run" and task.dtype == "float32" and task.has_cost
    names = [(w.name, w.split) for w in task.workloads]
    # the other definition's line is skipped; every third workload is held out; a smoke is derived
    assert names == [
        ("a0000001", "search"), ("a0000002", "search"), ("a0000003", "heldout"), ("a0000004", "search"),
        ("smoke", "smoke"),
    ]  # fmt: skip
    w = task.workload("a0000002")
    assert w.params["axes"] == {"tokens": 300}
    assert w.params["inputs"]["x"] == {"type": "random"}  # an input without a descriptor is random
    assert w.params["inputs"]["eps"] == {"type": "scalar", "value": 1e-5}
    smoke = task.smoke()
    assert smoke.params["axes"]["tokens"] == min(7, SMOKE_AXIS_CAP) and task.smoke_derived


def _run(task: Any, source: str, tmp_path: Path, name: str, seed: int = 0) -> tuple[Any, Any, Any]:
    rt = TaskRuntime(task)
    wl = task.workload("a0000002")
    inputs = rt.make_inputs(wl, seed, "cpu")
    expected = rt.build_reference(wl, "cpu")(inputs)
    mod = load_candidate_module(textwrap.dedent(source), name, tmp_path)
    got = rt.build_candidate(mod, wl, "cpu")(inputs)
    return rt, expected, got


@pytest.mark.parametrize("source", [VALUE_RETURNING, DESTINATION_PASSING], ids=["value", "destination"])
def test_both_candidate_styles_match_the_reference(tmp_path: Path, source: str) -> None:
    task = load_task(str(DEF))
    rt, expected, got = _run(task, source, tmp_path, "fib_cand")
    assert isinstance(expected, tuple) and len(expected) == 2
    assert expected[0].shape == (300, 64) and expected[1].shape == (300,)
    for g, e in zip(got, expected, strict=True):
        assert accepted_by(g, e, rt.tolerance())


def test_style_detection_and_unwritten_outputs_stay_nan(tmp_path: Path) -> None:
    task = load_task(str(DEF))
    rt, expected, got = _run(task, FORGETS_A_ROW, tmp_path, "fib_bad")
    y, _rms = got
    assert torch.isnan(y[0]).all() and not torch.isnan(y[1:]).any()
    assert not accepted_by(y, expected[0], rt.tolerance())
    mod = load_candidate_module(VALUE_RETURNING, "fib_vr", tmp_path)
    assert rt._impl.destination_passing(mod) is False
    explicit = load_candidate_module(
        "DESTINATION_PASSING = True\ndef run(**kw):\n    pass\n", "fib_ex", tmp_path
    )
    assert rt._impl.destination_passing(explicit) is True


def test_candidate_returning_the_wrong_number_of_outputs(tmp_path: Path) -> None:
    task = load_task(str(DEF))
    with pytest.raises(CandidateError, match="returned 1 output"):
        _run(task, "def run(x, weight, eps):\n    return x\n", tmp_path, "fib_one")
    rt = TaskRuntime(task)
    with pytest.raises(CandidateError, match="defines no `run`"):
        rt.build_candidate(load_candidate_module("x = 1\n", "fib_none", tmp_path), task.smoke(), "cpu")


def test_inputs_are_seeded_and_cost_counts_bytes() -> None:
    task = load_task(str(DEF))
    rt = TaskRuntime(task)
    wl = task.workload("a0000001")
    a, b, c = (rt.make_inputs(wl, s, "cpu") for s in (1, 1, 2))
    assert torch.equal(a[0], b[0]) and not torch.equal(a[0], c[0])
    assert a[2] == 1e-6 and a[0].shape == (7, 64) and a[1].shape == (64,)
    cost = rt.cost(wl)
    assert cost is not None and cost.bytes == 4 * (7 * 64 + 64 + 7 * 64 + 7)


def test_safetensors_inputs(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    folder = tmp_path / "defs"
    shutil.copytree(FIX, folder)
    x = torch.arange(5 * 64, dtype=torch.float32).reshape(5, 64) / 100
    (folder / "data").mkdir()
    save_file({"x_rows": x}, str(folder / "data" / "x5.safetensors"))
    line = {"uuid": "file-input", "axes": {"tokens": 5},
            "inputs": {"x": {"type": "safetensors", "path": "data/x5.safetensors", "tensor_key": "x_rows"},
                       "eps": {"type": "scalar", "value": 1e-6}}}  # fmt: skip
    (folder / "rowscale_h64.jsonl").write_text(json.dumps(line) + "\n")
    task = load_task(str(folder / "rowscale_h64.json"))
    assert "file inputs" in task.extras["smoke_note"]
    inputs = TaskRuntime(task).make_inputs(task.workload("file-inp"), 0, "cpu")
    assert torch.equal(inputs[0], x)


def _broken(tmp_path: Path, edit: Any, lines: list[dict[str, Any]] | None = None) -> str:
    definition = json.loads(DEF.read_text())
    edit(definition)
    (tmp_path / "d.json").write_text(json.dumps(definition))
    rows = lines or [
        {"uuid": "u1", "axes": {"tokens": 4}, "inputs": {"eps": {"type": "scalar", "value": 0.1}}}
    ]
    (tmp_path / "d.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    with pytest.raises(TaskError) as info:
        load_task(str(tmp_path / "d.json"))
    return str(info.value)


def _set(path: list[str], value: Any) -> Any:
    def edit(d: dict[str, Any]) -> None:
        for key in path[:-1]:
            d = d[key]
        if value is KeyError:
            del d[path[-1]]
        else:
            d[path[-1]] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "expect"),
    [
        (
            _set(["inputs", "x", "dtype"], "float3_e1m1"),
            "d.json: inputs.x.dtype: unknown dtype 'float3_e1m1'",
        ),
        (_set(["inputs", "x", "shape"], ["tokens", "width"]), "inputs.x.shape: axis 'width' is not declared"),
        (_set(["axes", "hidden", "type"], "fixed"), "axes.hidden.type: 'fixed' is not one of const, var"),
        (_set(["axes", "hidden", "value"], KeyError), "axes.hidden.value: a const axis needs an integer"),
        (
            _set(["reference"], "def main(x):\n    return x\n"),
            "reference: defines no top-level function `run`",
        ),
        (
            _set(["reference"], "def run(x, eps):\n    return x\n"),
            "run(x, eps) cannot take the 3 input(s) positionally, in the definition's order (x, weight, eps)",
        ),
        (_set(["reference"], "def run(**kw):\n    return kw\n"), "it needs 3 positional parameter(s)"),
        (_set(["reference"], "def run(x, w, *, eps):\n    return x\n"), "run(x, w, eps) cannot take"),
        (_set(["name"], KeyError), "d.json: name: missing"),
        (_set(["constraints"], ["tokens % 8 == 0"]), "constraint 'tokens % 8 == 0' does not hold"),
    ],
)
def test_malformed_definitions(tmp_path: Path, edit: Any, expect: str, minimal_fib: None) -> None:
    assert expect in _broken(tmp_path, edit)


@pytest.mark.parametrize(
    ("line", "expect"),
    [
        ({"uuid": "u", "axes": {}, "inputs": {"eps": {"type": "scalar", "value": 1}}},
         "d.jsonl line 1: axes.tokens: var axis 'tokens' has no value"),
        ({"uuid": "u", "axes": {"tokens": 2, "depth": 3}}, "axes.depth: not an axis"),
        ({"uuid": "u", "axes": {"tokens": 2, "hidden": 32}}, "axes.hidden: const axis is 64"),
        ({"uuid": "u", "axes": {"tokens": 2}, "inputs": {"eps": {"type": "safetensors", "path": "e.st",
          "tensor_key": "eps"}}}, "inputs.eps: a scalar input cannot come from a safetensors file"),
        ({"uuid": "u", "axes": {"tokens": 2}, "inputs": {"x": {"type": "zeros"}}}, "inputs.x.type: 'zeros' is not one"),
        ({"uuid": "u", "axes": {"tokens": 2}, "inputs": {"x": {"type": "safetensors", "path": "nope.st",
          "tensor_key": "x"}, "eps": {"type": "scalar", "value": 1}}}, "inputs.x.path: safetensors file not found"),
        ({"uuid": "u", "axes": {"tokens": 2}, "inputs": {"w": {"type": "random"}}}, "inputs.w: not an input"),
    ],
)  # fmt: skip
def test_malformed_workloads(tmp_path: Path, line: dict[str, Any], expect: str, minimal_fib: None) -> None:
    assert expect in _broken(tmp_path, lambda d: None, [line])


def test_missing_workloads_file_says_where_it_looked(tmp_path: Path) -> None:
    shutil.copy(DEF, tmp_path / "alone.json")
    with pytest.raises(TaskError, match=r"no workloads JSONL found .*alone\.jsonl"):
        load_task(str(tmp_path / "alone.json"))


def test_trace_layout_and_explicit_workloads(tmp_path: Path) -> None:
    (tmp_path / "definitions" / "rmsnorm").mkdir(parents=True)
    (tmp_path / "workloads" / "rmsnorm").mkdir(parents=True)
    shutil.copy(DEF, tmp_path / "definitions" / "rmsnorm" / "rowscale_h64.json")
    shutil.copy(FIX / "rowscale_h64.jsonl", tmp_path / "workloads" / "rmsnorm" / "rowscale_h64.jsonl")
    task = load_task(str(tmp_path / "definitions" / "rmsnorm" / "rowscale_h64.json"))
    assert len(task.by_split("search")) == 3
    one = tmp_path / "one.jsonl"
    one.write_text(
        json.dumps({"uuid": "solo", "axes": {"tokens": 3}, "inputs": {"eps": {"type": "scalar", "value": 1}}})
    )
    task = load_task(str(tmp_path / "definitions" / "rmsnorm" / "rowscale_h64.json"), workloads=str(one))
    assert [w.name for w in task.workloads] == ["solo", "smoke"]
