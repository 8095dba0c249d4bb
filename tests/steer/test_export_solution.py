"""`ksearch export SEARCH --solution`: a search's best kernel as a FlashInfer-Bench Solution JSON, and back.

Searches are written through the real store with hand-made GPU evaluations (no GPU here); `ksearch submit`
of an exported file runs the real sandbox (Triton interpreter)."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result
from uihelp import arun, with_store

from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.flashinfer.export import EXPORT_MARK
from ksearch.gpu.tasks.flashinfer.solution import (
    ADAPTER_MARK,
    Solution,
    parse_solution,
    solution_to_candidate,
)
from ksearch.gpu.tasks.rt.runtime import TaskRuntime, load_candidate_module
from ksearch.worldmodel.models import (
    Evaluation,
    SearchConfig,
)
from ksearch.worldmodel.store import Store
from tests.fixtures import evals

Ks = Callable[..., Result]
TRACE = Path(__file__).resolve().parents[1] / "tasks" / "fixtures" / "flashinfer_trace"
RMSNORM = TRACE / "definitions" / "rmsnorm" / "rmsnorm_h128.json"
GEMM = TRACE / "definitions" / "gemm" / "gemm_n64_k32.json"
SOLUTIONS = TRACE / "solutions" / "ksearch-fixtures"
FORWARD = SOLUTIONS / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_forward.json"
CUDA_TORCH = SOLUTIONS / "gemm" / "gemm_n64_k32" / "gemm_n64_k32_cuda_torch.json"


@functools.cache
def native() -> str:
    """A kernel as a language model writes one for this definition: run takes the definition's names. Read when a
    test asks, not at import: parsing a Solution starts FlashInfer-Bench's child (torch's imports), which a test
    worker that collects this module but runs none of its tests would pay for."""
    sol = parse_solution(
        (SOLUTIONS / "rmsnorm" / "rmsnorm_h128" / "rmsnorm_h128_triton_rows.json").read_text()
    )
    return sol.source("main.py").replace(
        "    row = tl.program_id(0)\n", "    row = tl.program_id(0)  # one program per row\n"
    )


def gpu_eval(speedup: float) -> Evaluation:
    return evals.gpu_eval(speedup, workload="1d7e8f1f", max_abs_err=0.008)


def make_search(db: Path, task: Path, name: str, candidates: list[tuple[str, str, str]]) -> dict[str, Any]:
    """A search on `task` with one attempt per (source, language, author), each faster than the one before."""

    async def opened() -> dict[str, Any]:
        store = await Store.open(db)
        try:
            s = await store.create_search(name, str(task), SearchConfig())
            root = await store.root(s.id)
            ids = []
            for i, (src, lang, author) in enumerate(candidates):
                cand = await store.put_candidate(src, lang)  # type: ignore[arg-type]
                a = await store.record_attempt(s.id, root.id, cand.id, gpu_eval(1.5 + i), author=author)
                ids.append((a.id, cand.id))
            return {"search": s.id, "attempts": ids}
        finally:
            await store.close()

    return arun(opened())


@pytest.mark.slow
def test_the_best_native_kernel_exports_and_loads_back_as_the_same_candidate(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "fib.db"
    ids = make_search(db, RMSNORM, "rms", [(native(), "triton", "llm:claude-test")])
    out = tmp_path / "best.json"
    r = ks("export", "rms", "--solution", "-o", out, "--db", db)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    sol = parse_solution(out.read_text())
    attempt, cand_id = ids["attempts"][0]
    assert sol.name == f"rmsnorm_h128_ksearch_rms_a{attempt}" and sol.definition == "rmsnorm_h128"
    assert sol.author == "ksearch-llm-claude-test" and "1.500x vs eager PyTorch on NVIDIA H200" in (
        sol.description or ""
    )
    assert sol.spec.language == "triton" and sol.spec.entry_point == "main.py::run"
    assert sol.spec.destination_passing_style is True and sol.spec.target_hardware == ["NVIDIA_H200"]
    assert [s.path for s in sol.sources] == ["main.py"] and sol.source("main.py") == native()
    # loaded back as a candidate: the very same source
    assert solution_to_candidate(sol, load_task(str(RMSNORM))).source == native()
    # to stdout as well, the same document
    assert parse_solution(ks("export", "rms", "--solution", "--db", db).stdout) == sol

    # `ksearch submit` of the exported file evaluates it (real sandbox) as the same candidate
    r = ks("submit", "rms", out, "--db", db)
    assert r.exit_code == 0, (r.stdout, r.stderr)
    atts = with_store(db, lambda s: s.list_attempts(ids["search"]))
    assert atts[-1].author == "human" and atts[-1].candidate_id == cand_id
    assert atts[-1].evaluation is not None and atts[-1].evaluation.status == "ok"


@pytest.mark.slow
def test_a_submitted_solution_exports_as_itself(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "fib.db"
    task = load_task(str(RMSNORM))
    original = parse_solution(FORWARD.read_text())
    converted = solution_to_candidate(original, task).source
    edited = converted.replace("* w\n", "* w  # weight applied last\n", 1)
    make_search(db, RMSNORM, "rms", [(converted, "triton", "human")])
    out = tmp_path / "same.json"
    assert ks("export", "rms", "--solution", "-o", out, "--db", db).exit_code == 0
    back = parse_solution(out.read_text())
    # unchanged: its own name, author, spec and files (the README too, the entry file byte for byte)
    assert back == original
    assert back.source("kernels/rms.py") == original.source("kernels/rms.py") and not back.source(
        "kernels/rms.py"
    ).endswith("\n")
    assert solution_to_candidate(back, task).source == converted

    # edited since (by a model, say): the files are ksearch's now, under ksearch's name
    db2 = tmp_path / "fib2.db"
    make_search(db2, RMSNORM, "rms2", [(converted, "triton", "human"), (edited, "triton", "llm:m")])
    out2 = tmp_path / "edited.json"
    assert ks("export", "rms2", "--solution", "-o", out2, "--db", db2).exit_code == 0
    changed = parse_solution(out2.read_text())
    assert changed.name.startswith("rmsnorm_h128_ksearch_rms2_a") and changed.author == "ksearch-llm-m"
    assert changed.spec.entry_point == original.spec.entry_point and changed.source("README.md")
    assert "# weight applied last" in changed.source("kernels/rms.py")
    # loaded back: the same code; only the adapter's record of the name and author is new
    reloaded = solution_to_candidate(changed, task).source
    assert reloaded.partition(ADAPTER_MARK)[0] == edited.partition(ADAPTER_MARK)[0]


def test_a_cuda_solution_exports_its_files(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "fib.db"
    original = parse_solution(CUDA_TORCH.read_text())
    c = solution_to_candidate(original, load_task(str(GEMM)))
    make_search(db, GEMM, "gemm", [(c.source, c.language, "human")])
    out = tmp_path / "gemm.json"
    assert ks("export", "gemm", "--solution", "-o", out, "--db", db).exit_code == 0
    assert parse_solution(out.read_text()) == original
    assert json.loads(out.read_text())["spec"]["binding"] == "torch"


def test_a_run_taking_its_names_in_another_order_gets_an_entry_point(ks: Ks, tmp_path: Path) -> None:
    """FlashInfer-Bench calls positionally: the export adds a `run` with the definition's order."""
    swapped = native().replace(
        "def run(hidden_states, weight, output):", "def run(weight, output, hidden_states):"
    )
    db = tmp_path / "fib.db"
    make_search(db, RMSNORM, "rms", [(swapped, "triton", "human")])
    out = tmp_path / "swapped.json"
    assert ks("export", "rms", "--solution", "-o", out, "--db", db).exit_code == 0
    sol = parse_solution(out.read_text())
    main = sol.source("main.py")
    assert main.startswith(swapped) and EXPORT_MARK in main
    assert "def run(hidden_states, weight, output):" in main.split(EXPORT_MARK)[1]
    # loaded back, it runs correctly when called by name (ksearch) and positionally (FlashInfer-Bench)
    task = load_task(str(RMSNORM))
    c = solution_to_candidate(sol, task)
    assert c.source == main
    mod = load_candidate_module(c.source, "fib_swapped", tmp_path)
    rt = TaskRuntime(task)
    wl = task.smoke()
    inputs = rt.make_inputs(wl, 2, "cpu")
    expected = rt.build_reference(wl, "cpu")(inputs)
    verdict = rt.check(rt.build_candidate(mod, wl, "cpu")(inputs), expected, wl)
    assert verdict is not None and verdict.passed
    import torch

    out_t = torch.full_like(expected, float("nan"))
    mod.run(*inputs, out_t)
    assert torch.equal(out_t, rt.build_candidate(mod, wl, "cpu")(inputs))


@pytest.mark.parametrize(
    ("setup", "args", "expect", "code"),
    [
        ("nvrtc", ["--solution"], "imports ksearch's own `ksearch.gpu.nvrtc`", 1),
        ("empty", ["--solution"], "has no best kernel to export yet: no timed correct attempt yet", 1),
        (
            "native",
            ["--solution", "--html"],
            "give one of --json, --html, --solution, --submission or --kernelbench",
            2,
        ),
    ],
)
def test_refusals(ks: Ks, tmp_path: Path, setup: str, args: list[str], expect: str, code: int) -> None:
    db = tmp_path / "fib.db"
    sources = {
        "nvrtc": [
            (
                "from ksearch.gpu import nvrtc\n\ndef run(hidden_states, weight):\n    return hidden_states\n",
                "cuda",
                "h",
            )
        ],
        "empty": [],
        "native": [(native(), "triton", "h")],
    }[setup]
    make_search(db, RMSNORM, "rms", sources)
    r = ks("export", "rms", *args, "--db", db)
    assert r.exit_code == code, (r.stdout, r.stderr)
    assert expect in " ".join(r.stderr.split())


def test_a_search_on_another_kind_of_task_is_refused(ks: Ks, demo: tuple[Path, dict[str, int]]) -> None:
    db, _ = demo
    r = ks("export", "softmax-demo", "--solution", "--db", db)
    assert r.exit_code == 1
    said = " ".join(r.stderr.split())
    assert (
        "is on 'softmax', a kernelbench task: a Solution JSON exists only for a FlashInfer-Bench definition"
        in said
    )


def test_submit_refuses_a_solution_for_another_definition(ks: Ks, tmp_path: Path) -> None:
    db = tmp_path / "fib.db"
    make_search(db, GEMM, "gemm", [])
    r = ks("submit", "gemm", FORWARD, "--db", db)
    assert r.exit_code == 2, (r.stdout, r.stderr)
    assert "is for the definition 'rmsnorm_h128', not for this task's 'gemm_n64_k32'" in " ".join(
        r.stderr.split()
    )
    assert with_store(db, lambda s: s.list_attempts(1)) == []


def test_solution_model_round_trips_through_json() -> None:
    sol = parse_solution(FORWARD.read_text())
    assert Solution.model_validate_json(sol.to_json()) == sol
