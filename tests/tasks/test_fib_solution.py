"""FlashInfer-Bench Solution JSONs as ksearch candidates: conversion, refusals, and evaluation by the real
sandbox (Triton on the CPU interpreter; CUDA and the torch-extension build on a GPU, C++ on the CPU)."""

from __future__ import annotations

import ast
import importlib.util
import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from ksearch.gpu.cpp_ext import ExtensionBuildError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.solution import (
    ADAPTER_MARK,
    SOLUTION_MARK,
    Solution,
    SolutionError,
    looks_like_solution,
    parse_solution,
    solution_to_candidate,
)
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module
from ksearch.gpu.worker import faults
from ksearch.server.cli import sandbox as cli_sandbox

TRACE = Path(__file__).parent / "fixtures" / "flashinfer_trace"
SOLUTIONS = TRACE / "solutions" / "ksearch-fixtures"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
GEMM = TRACE / "definitions" / "gemm" / "gemm_n64_k32.json"
ROPE = TRACE / "definitions" / "rope" / "rope_cos_sin_d64.json"
ROWS = SOLUTIONS / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"
FORWARD = SOLUTIONS / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_forward.json"
CUDA_TORCH = SOLUTIONS / "gemm" / "gemm_n64_k32" / "gemm_n64_k32_cuda_torch.json"
CUDA_TVM = SOLUTIONS / "gemm" / "gemm_n64_k32" / "gemm_n64_k32_cuda_tvm_ffi.json"
HAS_TVM_FFI = importlib.util.find_spec("tvm_ffi") is not None


def _sol(path: Path, **changes: Any) -> Solution:
    raw = json.loads(path.read_text())
    for key, value in changes.items():
        target = raw["spec"] if key in raw["spec"] or key in ("binding",) else raw
        target[key] = value
    return Solution.model_validate(raw)


# --------------------------------------------------------------------------- conversion


def test_a_run_that_takes_the_definition_s_names_is_the_candidate_itself() -> None:
    task = load_task(str(RMSNORM))
    sol = parse_solution(ROWS.read_text())
    c = solution_to_candidate(sol, task)
    head, _, block = c.source.partition(SOLUTION_MARK)
    assert c.language == "triton" and head == sol.source("main.py") + "\n\n" and "as it is" in c.how
    # after the file, only what export needs to give the Solution back: its name, author and entry path
    assert "'name': 'rmsnorm_h128_triton_rows'" in block and "'author': 'ksearch-fixtures'" in block
    assert "def run" not in block and "DESTINATION_PASSING" not in block


def test_another_entry_point_gets_an_adapter_after_the_file(tmp_path: Path) -> None:
    task = load_task(str(RMSNORM))
    sol = parse_solution(FORWARD.read_text())
    c = solution_to_candidate(sol, task)
    head, _, adapter = c.source.partition(ADAPTER_MARK)
    assert head == sol.source("kernels/rms.py") + "\n\n\n"  # the file's own lines keep their numbers
    assert "DESTINATION_PASSING = False" in adapter and "_ksearch_fib_entry = rmsnorm_forward" in adapter
    # the module runs as the task's runtime calls it: by name, value-returning
    mod = load_candidate_module(c.source, "fib_adapter", tmp_path)
    rt = TaskRuntime(task)
    wl = task.smoke()
    inputs = rt.make_inputs(wl, 1, "cpu")
    got = rt.build_candidate(mod, wl, "cpu")(inputs)
    verdict = rt.check(got, rt.build_reference(wl, "cpu")(inputs), wl)
    assert verdict is not None and verdict.passed


def test_a_compiled_solution_keeps_its_files_verbatim() -> None:
    task = load_task(str(GEMM))
    sol = parse_solution(CUDA_TORCH.read_text())
    c = solution_to_candidate(sol, task)
    assert c.language == "cpp_ext" and "from ksearch.gpu import fib_build" in c.source
    tree = ast.parse(c.source)
    values = {
        t.id: ast.literal_eval(s.value)
        for s in tree.body
        if isinstance(s, ast.Assign)
        for t in s.targets
        if isinstance(t, ast.Name) and t.id in ("SOURCES", "_ARGS", "DESTINATION_PASSING")
    }
    assert values["SOURCES"] == {s.path: s.content for s in sol.sources}
    assert values["_ARGS"] == ("A", "B", "C") and values["DESTINATION_PASSING"] is True
    # the CUDA text is in the module as written, so the kernel audit finds its __global__ function
    assert "__global__ void gemm_nt_rows(" in c.source


def test_looks_like_solution() -> None:
    assert looks_like_solution(ROWS.read_text())
    assert not looks_like_solution("import torch\n\ndef run(x):\n    return x\n")
    assert not looks_like_solution('{"name": "a definition", "axes": {}}')


@pytest.mark.parametrize(
    ("change", "expect"),
    [
        (lambda d: d.update(definition="gemm_n64_k32"), "is for the definition 'gemm_n64_k32', not for this task's"),
        (lambda d: d["spec"].update(language="tilelang"), "written in tilelang; ksearch runs python, triton"),
        (lambda d: d["spec"].update(entry_point="main.py::forward"), "main.py defines no top-level 'forward'"),
        (lambda d: d["spec"].update(entry_point="main.py"), "spec.entry_point: must be '<file path>::<function name>'"),
        (lambda d: d["spec"].update(entry_point="kernel.py::run"), "the file 'kernel.py' is not among the sources"),
        (lambda d: (d["sources"].append({"path": "util.py", "content": "X = 1\n"}),
                    d["spec"].update(entry_point="main.py::forward")), "main.py defines no top-level 'forward'"),
        (lambda d: d["sources"].append({"path": "../escape.h", "content": "x"}), "without '..'"),
        (lambda d: d["sources"][0].update(content="def run(:\n"), "main.py: line 1: does not parse as Python"),
        (lambda d: d.pop("author"), "author: Field required"),
    ],
)  # fmt: skip
def test_refusals_name_what_is_wrong(change: Any, expect: str, minimal_fib: None) -> None:
    raw = json.loads(ROWS.read_text())
    change(raw)
    with pytest.raises(SolutionError) as info:
        solution_to_candidate(parse_solution(json.dumps(raw), "sol.json"), load_task(str(RMSNORM)))
    assert expect in str(info.value)


def test_not_valid_json_and_a_task_of_another_format() -> None:
    with pytest.raises(SolutionError, match=r"sol\.json: not valid JSON \(line 1"):
        parse_solution("{nope", "sol.json")
    with pytest.raises(SolutionError, match="'softmax' is a kernelbench task"):
        solution_to_candidate(parse_solution(ROWS.read_text()), load_task("softmax"))


@pytest.mark.skipif(HAS_TVM_FFI, reason="apache-tvm-ffi is installed here")
def test_the_tvm_ffi_binding_needs_its_package() -> None:
    with pytest.raises(SolutionError, match=r"tvm-ffi binding .*\(pip install apache-tvm-ffi\)"):
        solution_to_candidate(parse_solution(CUDA_TVM.read_text()), load_task(str(GEMM)))
    # the text alone (for export) does not need it
    c = solution_to_candidate(parse_solution(CUDA_TVM.read_text()), load_task(str(GEMM)), check_env=False)
    assert "TVM_FFI_DLL_EXPORT_TYPED_FUNC(gemm, gemm);" in c.source


# --------------------------------------------------------------------------- evaluation (real sandbox)


def _eval(task: Path, file: Path, *extra: str) -> Any:
    app = typer.Typer()
    cli_sandbox.register(app)
    app.command("unused")(lambda: None)  # two commands: the eval command keeps its name
    return CliRunner().invoke(app, ["eval", str(task), str(file), *extra])


@pytest.mark.cpu
@pytest.mark.timeout(300)
@pytest.mark.parametrize("solution", [ROWS, FORWARD], ids=["as-is", "adapter"])
@pytest.mark.slow
def test_a_triton_solution_evaluates_in_the_interpreter(solution: Path) -> None:
    r = _eval(RMSNORM, solution, "--trials", "2")
    assert r.exit_code == 0, r.output
    assert "status: ok" in r.stdout and "correct on smoke (2 trials" in r.stdout
    assert "PURE PYTORCH" not in r.stdout  # its Triton kernel ran: it is the candidate's own
    assert parse_solution(solution.read_text()).name in r.stderr


@pytest.mark.cpu
@pytest.mark.timeout(300)
@pytest.mark.slow
def test_a_wrong_solution_is_incorrect(tmp_path: Path) -> None:
    raw = json.loads(FORWARD.read_text())
    src = raw["sources"][1]
    src["content"] = src["content"].replace(
        "y = x * (1.0 / tl.sqrt(ms + 1e-6)) * w", "y = x * (1.0 / tl.sqrt(ms + 1e-6)) * w * 1.05"
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    r = _eval(RMSNORM, bad, "--trials", "1", "--no-timing")
    assert r.exit_code == 1, r.output
    assert (
        "INCORRECT on smoke: wrong_values" in r.stdout and "FlashInfer-Bench needs every element" in r.stdout
    )


def test_eval_refuses_a_solution_for_another_definition() -> None:
    r = _eval(GEMM, ROWS)
    assert (
        r.exit_code == 2
        and "is for the definition 'rmsnorm_h128', not for this task's 'gemm_n64_k32'" in r.output
    )


ROPE_CPP = textwrap.dedent(
    """\
    #include <torch/extension.h>
    #include <cmath>

    // Destination passing, on the CPU: the tables for every position.
    void rope_tables(torch::Tensor positions, torch::Tensor cos_out, torch::Tensor sin_out) {
      auto pos = positions.contiguous();
      const int64_t n = pos.size(0), half = cos_out.size(1);
      const int32_t* p = pos.data_ptr<int32_t>();
      float* c = cos_out.data_ptr<float>();
      float* s = sin_out.data_ptr<float>();
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t j = 0; j < half; ++j) {
          const float inv = 1.0f / std::pow(10000.0f, static_cast<float>(2 * j) / static_cast<float>(2 * half));
          const float f = static_cast<float>(p[i]) * inv;
          c[i * half + j] = std::cos(f);
          s[i * half + j] = std::sin(f);
        }
      }
    }

    PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def("rope_tables", &rope_tables); }
    """
)


def _rope_solution(content: str) -> Solution:
    return Solution.model_validate(
        {
            "name": "rope_cos_sin_d64_cpp",
            "definition": "rope_cos_sin_d64",
            "author": "ksearch-tests",
            "spec": {"language": "cpp", "target_hardware": ["cpu"], "entry_point": "rope.cpp::rope_tables",
                     "binding": "torch"},
            "sources": [{"path": "rope.cpp", "content": content}],
        }
    )  # fmt: skip


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_cpp_solution_builds_as_a_torch_extension(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """ksearch.gpu.fib_build for real: the files written, built by torch's extension loader, the entry called."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "ext"))
    task = load_task(str(ROPE))
    c = solution_to_candidate(_rope_solution(ROPE_CPP), task)
    mod = load_candidate_module(c.source, "fib_cpp", tmp_path)
    rt = TaskRuntime(task)
    wl = task.workload("e7a05c3b")
    inputs = rt.make_inputs(wl, 4, "cpu")
    got = rt.build_candidate(mod, wl, "cpu")(inputs)
    verdict = rt.check(got, rt.build_reference(wl, "cpu")(inputs), wl)
    assert verdict is not None and verdict.passed, verdict
    assert (
        tmp_path / next(p.name for p in tmp_path.glob("fib_rope_cos_sin_d64_cpp_*")) / "rope.cpp"
    ).is_file()

    # a missing header is fatal at once (a compile error in the body would parse torch's headers first)
    broken = solution_to_candidate(_rope_solution('#include "rope_tables.h"\n' + ROPE_CPP), task)
    with pytest.raises(ExtensionBuildError) as info:
        load_candidate_module(broken.source, "fib_cpp_broken", tmp_path)
    fault = faults.describe(info.value, broken.source, set())
    assert fault.kind == "compile" and "rope_tables.h" in fault.message


# --------------------------------------------------------------------------- on a GPU


def _eval_json(task: Path, file: Path, *extra: str) -> dict[str, Any]:
    r = _eval(task, file, "--json", *extra)
    assert r.exit_code in (0, 1), r.output
    return json.loads(r.stdout)


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_a_cuda_solution_evaluates_on_the_gpu() -> None:
    task = load_task(str(GEMM))
    ev = _eval_json(
        GEMM, CUDA_TORCH, *[a for w in task.workloads if w.split != "smoke" for a in ("-w", w.name)]
    )
    assert ev["status"] == "ok", ev.get("error")
    assert len(ev["correctness"]) == 4 and all(c["passed"] for c in ev["correctness"])
    assert not ev["pure_pytorch"]  # its own __global__ kernel ran
    assert ev["timings"] and all(t["speedup_vs_eager"] for t in ev["timings"])


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_a_cuda_solution_that_does_not_compile_is_a_compile_error(tmp_path: Path) -> None:
    raw = json.loads(CUDA_TORCH.read_text())
    raw["sources"][1]["content"] = raw["sources"][1]["content"].replace(
        "float acc = 0.0f;", "float acc = 0.0f"
    )
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(raw))
    ev = _eval_json(GEMM, bad, "--no-timing")
    assert ev["status"] == "compile_error" and "torch extension build failed" in (ev["error"] or "")


@pytest.mark.gpu
@pytest.mark.timeout(600)
@pytest.mark.skipif(not HAS_TVM_FFI, reason="needs apache-tvm-ffi")
def test_a_tvm_ffi_solution_evaluates_on_the_gpu() -> None:
    ev = _eval_json(GEMM, CUDA_TVM)
    assert ev["status"] == "ok", ev.get("error")
    assert all(c["passed"] for c in ev["correctness"]) and not ev["pure_pytorch"]


@pytest.mark.gpu
@pytest.mark.timeout(600)
def test_a_triton_solution_evaluates_on_the_gpu_with_the_dataset_s_inputs() -> None:
    task = load_task(str(RMSNORM))
    names = [w.name for w in task.workloads if w.split != "smoke"]  # the safetensors workload included
    ev = _eval_json(RMSNORM, FORWARD, *[a for n in names for a in ("-w", n)])
    assert ev["status"] == "ok", ev.get("error")
    assert [c["workload"] for c in ev["correctness"]] == names and all(c["passed"] for c in ev["correctness"])
    assert not ev["pure_pytorch"]


def test_candidate_ref_takes_a_solution_json_as_one_of_its_forms(minimal_fib: None) -> None:
    from pydantic import ValidationError

    from ksearch.tools.common import CandidateRef, solution_candidate
    from ksearch.tools.errors import ToolFailure

    ref = CandidateRef(solution_json=FORWARD.read_text())
    source, language = solution_candidate(ref.solution_json or "", load_task(str(RMSNORM)))
    assert language == "triton" and ADAPTER_MARK in source
    with pytest.raises(
        ValidationError, match="exactly one of `source`, `candidate_id`, `seed: true` or `solution_json`"
    ):
        CandidateRef(source="x = 1\n", solution_json=FORWARD.read_text())
    with pytest.raises(ToolFailure, match="`solution_json` needs a task"):
        solution_candidate(FORWARD.read_text(), None)
    with pytest.raises(SolutionError, match=r"solution_json: spec\.entry_point"):
        solution_candidate(
            FORWARD.read_text().replace("kernels/rms.py::", "kernels/rms.py:"), load_task(str(RMSNORM))
        )
