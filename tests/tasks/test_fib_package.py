"""FlashInfer-Bench data read by ksearch's minimal reader and by FlashInfer-Bench's own package (the `fib`
extra), on the same fixtures: the loose definition (`fixtures/flashinfer`), the dataset ksearch's tests built
(`fixtures/flashinfer_trace`) and the dataset FlashInfer-Bench's own `save_json_file` and `TraceSet` wrote
(`fixtures/flashinfer_fib_saved`, its make.py says how). Tests of the package skip, saying so, without it.

What FlashInfer-Bench accepts loads either way: definitions whose unset fields were left out, a reference whose
parameters are named otherwise than its inputs (called positionally), `float4_e2m1`, a Triton solution of
several files; and a Solution keeps its name, author and entry path through `export --solution`.
"""

from __future__ import annotations

import json
import shutil
import textwrap
from pathlib import Path
from typing import Any

import pytest
import torch
import typer
from typer.testing import CliRunner

from ksearch.gpu import fib_build
from ksearch.gpu.checks.outputs import decoded
from ksearch.gpu.task import Task, TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer import pkg as fib_pkg
from ksearch.gpu.tasks.flashinfer.export import Identity, solution_from_candidate, solution_json
from ksearch.gpu.tasks.flashinfer.loader import FIB_INT_RANGES
from ksearch.gpu.tasks.flashinfer.solution import (
    SOLUTION_MARK,
    SolutionError,
    parse_solution,
    solution_to_candidate,
)
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module
from ksearch.server.cli import sandbox as cli_sandbox

FIX = Path(__file__).parent / "fixtures"
TRACE = FIX / "flashinfer_trace"
SAVED = FIX / "flashinfer_fib_saved"
GEMM = SAVED / "definitions" / "gemm" / "gemm_n256_k64_saved.json"
FP4 = SAVED / "definitions" / "quantization" / "fp4_dequant_k16_saved.json"
PACKAGE = (
    SAVED
    / "solutions"
    / "fib-fixtures"
    / "gemm"
    / "gemm_n256_k64_saved"
    / "gemm_n256_k64_saved_triton_package.json"
)
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
ROWS = TRACE / "solutions" / "ksearch-fixtures" / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json"
DEFINITIONS = sorted(
    [*FIX.glob("flashinfer/*.json"), *TRACE.glob("definitions/*/*.json"), *SAVED.glob("definitions/*/*.json")]
)
WHO = Identity(name="unused_name", author="unused-author", target_hardware=["cpu"])
needs_fib = pytest.mark.skipif(
    not fib_pkg.installed(), reason="FlashInfer-Bench's package (the `fib` extra) is not installed"
)


def _load(path: Path, reader: str, monkeypatch: pytest.MonkeyPatch) -> Task:
    monkeypatch.setenv(fib_pkg.ENV, "minimal" if reader == "minimal" else "auto")
    return load_task(str(path))


def _same_task(task: Task) -> dict[str, Any]:
    """What either reader must agree on (FlashInfer-Bench's settings are compared apart)."""
    keep = ("axes", "inputs", "outputs", "reference", "constraints", "dataset_root", "tags", "smoke_note")
    return {
        "workloads": [w.model_dump() for w in task.workloads],
        "extras": {k: task.extras[k] for k in keep},
        "head": (task.name, task.op, task.dtype, task.description),
    }


# --------------------------------------------------------------------------- both readers, one answer


@needs_fib
@pytest.mark.slow
@pytest.mark.parametrize("path", DEFINITIONS, ids=lambda p: p.stem)
def test_every_fixture_definition_reads_the_same_through_both_readers(
    path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    minimal, package = _load(path, "minimal", monkeypatch), _load(path, "package", monkeypatch)
    assert _same_task(minimal) == _same_task(package)
    assert minimal.extras["fib"]["reader"] == "minimal"
    assert package.extras["fib"]["reader"] == f"flashinfer-bench {fib_pkg.version()}"
    from flashinfer_bench.bench.config import BenchmarkConfig
    from flashinfer_bench.bench.evaluators import resolve_evaluator
    from flashinfer_bench.data import Definition, load_json_file

    # the package's settings are its own: its configuration, the evaluator it picks for this definition
    cfg, fib = BenchmarkConfig(), package.extras["fib"]
    assert (fib["atol"], fib["rtol"]) == (cfg.atol, cfg.rtol)
    evaluator = resolve_evaluator(load_json_file(Definition, path)).__name__
    assert fib["evaluator"] == evaluator
    assert package.extras["matched_ratio"] == (0.95 if evaluator == "LowBitEvaluator" else 1.0)
    assert package.extras["evaluator"]["iterations"] == cfg.iterations
    # the integer ranges its input generator draws are the ones ksearch records for the minimal reader
    assert {k: tuple(v) for k, v in fib["int_ranges"].items()} == FIB_INT_RANGES


@needs_fib
@pytest.mark.slow
@pytest.mark.parametrize("root", [TRACE, SAVED], ids=["flashinfer_trace", "flashinfer_fib_saved"])
def test_a_dataset_fib_s_own_loader_accepts_loads_definition_by_definition(
    root: Path, fib_reader: str
) -> None:
    from flashinfer_bench.data import TraceSet

    ts = TraceSet.from_path(
        str(root)
    )  # FlashInfer-Bench's own loader: definitions, solutions, workloads, traces
    files = {json.loads(p.read_text())["name"]: p for p in root.glob("definitions/*/*.json")}
    assert ts.definitions and set(ts.definitions) == set(files)
    for name in ts.definitions:
        task = load_task(str(files[name]))
        uuids = [t.workload.uuid[:8] for t in ts.workloads[name]]
        assert [w.name for w in task.workloads if w.split != "smoke"] == uuids


def test_a_definition_written_without_its_defaults_loads(fib_reader: str) -> None:
    raw = json.loads(GEMM.read_text())
    assert raw["axes"] == {"M": {}, "N": {"value": 256}, "K": {"value": 64}} and "tags" not in raw
    task = load_task(str(GEMM))
    assert task.extras["axes"] == {"M": {"type": "var"}, "N": {"type": "const", "value": 256},
                                   "K": {"type": "const", "value": 64}}  # fmt: skip
    assert [(w.params["axes"], w.split) for w in task.workloads] == [
        ({"M": 1}, "search"), ({"M": 40}, "search"), ({"M": 3}, "heldout"), ({"M": 1}, "smoke"),
    ]  # fmt: skip


def test_input_descriptors_written_without_their_type(tmp_path: Path, fib_reader: str) -> None:
    shutil.copy(FIX / "flashinfer" / "rowscale_h64.json", tmp_path / "d.json")
    line = {"uuid": "u-bare", "axes": {"tokens": 3}, "inputs": {"x": {}, "eps": {"value": 0.5}}}
    (tmp_path / "d.jsonl").write_text(json.dumps(line) + "\n")
    inputs = load_task(str(tmp_path / "d.json")).workload("u-bare").params["inputs"]
    assert inputs == {
        "x": {"type": "random"},
        "weight": {"type": "random"},
        "eps": {"type": "scalar", "value": 0.5},
    }


def test_the_reference_is_called_positionally(fib_reader: str) -> None:
    task = load_task(str(GEMM))
    assert "def run(a, b):" in task.extras["reference"] and list(task.extras["inputs"]) == ["A", "B"]
    rt = TaskRuntime(task)
    wl = task.workload("e41a7b35")  # its A and B come from the dataset's blob
    a, b = rt.make_inputs(wl, 0, "cpu")
    from safetensors.torch import load_file

    stored = load_file(next(SAVED.glob("blob/**/*.safetensors")))
    assert torch.equal(a, stored["A"]) and torch.equal(b, stored["B"])
    assert torch.allclose(rt.build_reference(wl, "cpu")([a, b]), a @ b.T)


# --------------------------------------------------------------------------- float4_e2m1


def test_float4_e2m1_inputs_are_drawn_packed_and_judged_by_value(tmp_path: Path, fib_reader: str) -> None:
    task = load_task(str(FP4))
    assert task.extras["inputs"]["x"]["dtype"] == "float4_e2m1fn_x2"
    rt = TaskRuntime(task)
    wl = task.workload("a3f6b0c7")
    x, scale = rt.make_inputs(wl, 3, "cpu")
    assert x.dtype == torch.float4_e2m1fn_x2 and tuple(x.shape) == (33, 8)
    again = rt.make_inputs(wl, 3, "cpu")[0]
    assert torch.equal(x.view(torch.uint8), again.view(torch.uint8))
    assert len(set(x.view(torch.uint8).flatten().tolist())) > 100  # the bytes vary: both nibbles, both signs
    expected = rt.build_reference(wl, "cpu")([x, scale])
    assert torch.equal(expected, decoded(x) * scale[:, None])
    right = "import torch\nfrom ksearch.gpu.checks.outputs import decoded\n\ndef run(x, scale):\n    return decoded(x) * scale[:, None]\n"
    wrong = right.replace("* scale[:, None]", "* scale[:, None].abs()")
    for source, passes in ((right, True), (wrong, False)):
        mod = load_candidate_module(source, f"fp4_{passes}", tmp_path)
        verdict = rt.check(rt.build_candidate(mod, wl, "cpu")([x, scale]), expected, wl)
        assert verdict.passed is passes


def test_packed_outputs_are_compared_by_their_values(fib_reader: str) -> None:
    rt = TaskRuntime(load_task(str(FP4)))
    wl = rt.task.smoke()
    a = torch.tensor([[0x21, 0x08]], dtype=torch.uint8)  # (0.5, 1.0), (-0.0, 0.0)
    same = torch.tensor([[0x21, 0x80]], dtype=torch.uint8)  # (0.5, 1.0), (0.0, -0.0): the same values
    off = torch.tensor([[0x71, 0x08]], dtype=torch.uint8)  # 6.0 where 1.0 was
    as_fp4 = torch.float4_e2m1fn_x2
    ok = rt.check(same.view(as_fp4), a.view(as_fp4), wl)
    bad = rt.check(off.view(as_fp4), a.view(as_fp4), wl)
    assert ok.passed and not bad.passed and bad.kind == "wrong_values"
    assert bad.first_mismatch_index == [0, 1] and bad.got_at_first == 6.0 and bad.expected_at_first == 1.0


# --------------------------------------------------------------------------- Solutions


@pytest.mark.slow
def test_a_solution_of_several_python_files_runs_as_a_package(
    tmp_path: Path, fib_reader: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    task = load_task(str(GEMM))
    sol = parse_solution(PACKAGE.read_text())
    assert [s.path for s in sol.sources] == ["pkg/main.py", "pkg/kernels.py"]
    c = solution_to_candidate(sol, task)
    assert c.language == "triton" and "imported as a package" in c.how
    monkeypatch.chdir(tmp_path)  # the worker's scratch: where ksearch writes the package
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib-cache"))  # where FlashInfer-Bench's builder does
    mod = load_candidate_module(c.source, f"fib_package_{fib_reader}", tmp_path)
    package = fib_build.own_package(mod)
    # through FlashInfer-Bench's own builder with its package (its Triton builder's name), else ksearch's import
    assert package is not None and package.startswith("fib_triton_gemm_n256_k64_saved_triton_package_")
    rt = TaskRuntime(task)
    for wl in task.workloads:
        inputs = rt.make_inputs(wl, 1, "cpu")
        verdict = rt.check(
            rt.build_candidate(mod, wl, "cpu")(inputs), rt.build_reference(wl, "cpu")(inputs), wl
        )
        assert verdict.passed, (wl.name, verdict.message)
    # back out: the same Solution, its name, author and entry path
    assert solution_from_candidate(c.source, c.language, task, WHO) == sol


@pytest.mark.slow
@pytest.mark.cpu
@pytest.mark.timeout(300)
def test_a_solution_of_several_files_is_evaluated_by_the_sandbox(fib_reader: str) -> None:
    app = typer.Typer()
    cli_sandbox.register(app)
    app.command("unused")(lambda: None)  # two commands: the eval command keeps its name
    r = CliRunner().invoke(app, ["eval", str(GEMM), str(PACKAGE), "--json", "--no-timing"])
    assert r.exit_code == 0, r.output
    ev = json.loads(r.stdout)
    assert ev["status"] == "ok" and all(c["passed"] for c in ev["correctness"])
    # its kernel, in the package's other file, is the candidate's own: seen statically, and launched
    assert not ev["pure_pytorch"]
    assert any("Triton kernels: gemm_rows" in d["message"] for d in ev["compile"]["diagnostics"])


def test_an_unchanged_solution_keeps_its_name_author_and_entry_path(fib_reader: str) -> None:
    raw = json.loads(ROWS.read_text())
    raw["sources"][0]["path"] = "impl/rows.py"
    raw["spec"]["entry_point"] = "impl/rows.py::run"
    original = parse_solution(json.dumps(raw))
    task = load_task(str(RMSNORM))
    c = solution_to_candidate(original, task)
    assert SOLUTION_MARK in c.source  # the file as it is (its run takes the names in order), then its record
    back = solution_from_candidate(c.source, c.language, task, WHO)
    assert back == original and back.spec.entry_point == "impl/rows.py::run"
    assert parse_solution(solution_json(back)) == original
    # edited since: ksearch's name and author, the entry path kept
    edited = solution_from_candidate(
        c.source.replace("tl.program_id(0)", "tl.program_id(axis=0)"), "triton", task, WHO
    )
    assert (edited.name, edited.author, edited.spec.entry_point) == (
        "unused_name",
        "unused-author",
        "impl/rows.py::run",
    )


# --------------------------------------------------------------------------- FlashInfer-Bench's own word


@needs_fib
def test_a_definition_fib_refuses_is_refused_with_its_message(tmp_path: Path, fib_reader: str) -> None:
    raw = json.loads(GEMM.read_text())
    raw["inputs"]["A"]["shape"] = ["M", "width"]
    (tmp_path / "d.json").write_text(json.dumps(raw))
    shutil.copy(SAVED / "workloads" / "gemm" / "gemm_n256_k64_saved.jsonl", tmp_path / "d.jsonl")
    with pytest.raises(TaskError) as info:
        load_task(str(tmp_path / "d.json"))
    if fib_reader == "package":
        assert str(info.value) == (
            f"{tmp_path / 'd.json'}: FlashInfer-Bench's Definition model refuses it: "
            'Input "A" references undefined axis "width"'
        )
    else:
        assert "inputs.A.shape: axis 'width' is not declared in axes (M, N, K)" in str(info.value)


@needs_fib
def test_a_solution_fib_refuses_is_refused_with_its_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fib_pkg.ENV, "auto")
    bad = ROWS.read_text().replace('"main.py::run"', '"main.py:run"')
    with pytest.raises(SolutionError) as info:
        parse_solution(bad, "rows.json")
    assert str(info.value).startswith(
        "rows.json: FlashInfer-Bench's Solution model refuses it: spec: Invalid entry point format: main.py:run."
    )
    assert "(a Solution has name, definition, author" in str(info.value)


@needs_fib
@pytest.mark.slow
@pytest.mark.parametrize("kind", ["native", "adapter", "package"])
def test_an_exported_solution_passes_fib_s_loader_and_runs_under_its_builders(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ksearch writes is a Solution FlashInfer-Bench reads into a TraceSet, builds with its own builders
    and runs, positionally, to its reference's outputs (Triton under the interpreter here)."""
    monkeypatch.setenv(fib_pkg.ENV, "auto")
    monkeypatch.setenv("FIB_CACHE_PATH", str(tmp_path / "fib-cache"))
    from flashinfer_bench.bench.utils import gen_inputs
    from flashinfer_bench.compile import BuilderRegistry
    from flashinfer_bench.data import Solution, TraceSet

    if kind == "package":
        root, definition = SAVED, GEMM
        source = solution_to_candidate(parse_solution(PACKAGE.read_text()), load_task(str(GEMM))).source
    else:
        root, definition = TRACE, RMSNORM
        rows = parse_solution(ROWS.read_text()).source("main.py")
        # a kernel written for the task, or one whose run takes the names in another order (an adapter)
        source = (
            rows
            if kind == "native"
            else rows.replace(
                "def run(hidden_states, weight, output):", "def run(weight, output, hidden_states):"
            )
        )
    task = load_task(str(definition))
    who = Identity(name=f"{task.name}_ksearch_{kind}", author="ksearch-test", target_hardware=["cpu"])
    text = solution_json(solution_from_candidate(source, "triton", task, who))
    sol = Solution.model_validate_json(text)
    copy = tmp_path / "dataset"
    shutil.copytree(
        root, copy, ignore=shutil.ignore_patterns("*.py", "*.md", "solutions")
    )  # names are unique
    (copy / "solutions" / "ksearch-test" / f"{sol.name}.json").parent.mkdir(parents=True)
    (copy / "solutions" / "ksearch-test" / f"{sol.name}.json").write_text(text)
    ts = TraceSet.from_path(str(copy))
    assert ts.get_solution(sol.name) == sol
    d = ts.definitions[task.name]
    registry = BuilderRegistry.get_instance()
    runnable, reference = registry.build(d, sol), registry.build_reference(d)
    torch.manual_seed(0)
    for trace in ts.workloads[task.name]:
        if any(i.type == "safetensors" for i in trace.workload.inputs.values()):
            continue
        inputs = gen_inputs(d, trace.workload, "cpu")
        expected = reference(*inputs)
        got = runnable.call_value_returning(*inputs)
        assert torch.allclose(got.float(), expected.float(), atol=1e-2, rtol=1e-2)


def test_the_setting_that_picks_the_reader_is_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(fib_pkg.ENV, "package-please")
    with pytest.raises(
        TaskError, match=r"KSEARCH_FIB='package-please': accepted: auto \(FlashInfer-Bench's own"
    ):
        load_task(str(GEMM))
    monkeypatch.setenv(fib_pkg.ENV, "minimal")
    assert load_task(str(GEMM)).extras["fib"]["reader"] == "minimal"


def test_a_reference_fib_cannot_call_positionally_is_refused(tmp_path: Path, fib_reader: str) -> None:
    raw = json.loads(GEMM.read_text())
    raw["reference"] = textwrap.dedent(
        """
        def run(a, b, *, alpha):
            return a @ b.T * alpha
        """
    )
    (tmp_path / "d.json").write_text(json.dumps(raw))
    shutil.copy(SAVED / "workloads" / "gemm" / "gemm_n256_k64_saved.jsonl", tmp_path / "d.jsonl")
    with pytest.raises(
        TaskError, match=r"reference: run\(a, b, alpha\) cannot take the 2 input\(s\) positionally"
    ):
        load_task(str(tmp_path / "d.json"))


@pytest.mark.slow
@pytest.mark.anyio
async def test_flashinfer_bench_builds_land_in_the_shared_compiler_caches(tmp_path: Path) -> None:
    """Not in a worker's scratch (its HOME, removed with it): a solution built once is found by the next worker."""
    if not fib_pkg.in_use():
        pytest.skip("needs FlashInfer-Bench's package (the fib extra)")
    from ksearch.gpu.sandbox.local import LocalSandbox
    from ksearch.worldmodel.models import Candidate, EvalSettings

    task = load_task(str(GEMM))
    converted = solution_to_candidate(parse_solution(PACKAGE.read_text()), task)
    c = Candidate.of(converted.source, converted.language)
    sb = LocalSandbox(scratch_dir=tmp_path / "sb", call_timeout_s=120.0)
    try:
        ev = await sb.correctness(c, task, EvalSettings(seed=1, workloads=[task.smoke().name]))
    finally:
        await sb.close()
    assert ev.status == "ok", ev.error
    built = list((sb.shared / "flashinfer_bench").rglob("kernels.py"))
    assert built, sorted(p.name for p in sb.shared.iterdir())
