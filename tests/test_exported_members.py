"""ksearch's public Python surface: `ksearch.__all__` is pinned here, and every name resolves.

A change to the surface is a change to this list: add or remove the name here with it.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import ksearch

ROOT = Path(__file__).resolve().parents[1]

EXPORTED = [
    "__version__",
    "Workspace",
    "CandidateRef",
    "benchmark",
    "BenchmarkIn",
    "benchmark_batch",
    "BenchmarkBatchIn",
    "BatchItem",
    "BatchOut",
    "compile_kernel",
    "CompileKernelIn",
    "CompileOut",
    "create_search",
    "CreateSearchIn",
    "edit_tree",
    "EditTreeIn",
    "final_evaluation",
    "FinalEvalIn",
    "FinalOut",
    "FinalRow",
    "set_budgets",
    "SetBudgetsIn",
    "SetBudgetsOut",
    "finish_intent",
    "FinishIntentIn",
    "FinishOut",
    "get_tree",
    "GetTreeIn",
    "TreeOut",
    "list_searches",
    "SearchRow",
    "loop_state",
    "LoopState",
    "profile_ncu",
    "ProfileIn",
    "ProfileOut",
    "propose_intents",
    "ProposeIntentsIn",
    "run_correctness",
    "RunCorrectnessIn",
    "EvaluationOut",
    "run_search",
    "RunSearchIn",
    "RunSearchOut",
    "select_action",
    "SelectActionIn",
    "SelectionOut",
    "evaluate_file",
    "EvaluateFileIn",
    "EvaluateFileOut",
    "compile_file",
    "CompileFileIn",
    "CompileFileOut",
    "read_search",
    "SearchSnapshot",
    "export_solution",
    "SolutionOut",
    "export_kernel",
    "ExportKernelIn",
    "ExportedKernel",
    "profile_model",
    "ProfileModelIn",
    "ModelProfileOut",
    "plug_back",
    "PlugBackIn",
    "PlugBackOut",
    "list_tasks",
    "TaskSummary",
    "show_task",
    "ShowTaskIn",
    "TaskOut",
    "check_task",
    "CheckTaskIn",
    "TaskCheck",
    "load_task",
    "builtin_names",
    "Task",
    "Workload",
    "Attempt",
    "Candidate",
    "Edit",
    "EditSpec",
    "EvalSettings",
    "Evaluation",
    "IntentSpec",
    "Node",
    "NodeStatus",
    "Search",
    "SearchConfig",
    "KsearchError",
    "Conflict",
    "EditRejected",
    "InvalidTransition",
    "NotFound",
    "SchemaError",
    "StoreBusy",
    "SandboxError",
    "TaskError",
    "ToolFailure",
]


def test_all_is_pinned() -> None:
    assert ksearch.__all__ == EXPORTED


def test_every_name_resolves_to_its_definition() -> None:
    for name in ksearch.__all__:
        value = getattr(ksearch, name)
        assert value is not None, name
        if name != "__version__":
            # the object itself, defined in one of the rooms (not a copy made here)
            assert value.__module__.startswith("ksearch."), (name, value.__module__)
            assert value.__name__ == name
    assert set(ksearch.__all__) <= set(dir(ksearch))


def test_star_import_gives_exactly_all() -> None:
    ns: dict[str, object] = {}
    exec("from ksearch import *", ns)
    assert sorted(k for k in ns if k != "__builtins__") == sorted(EXPORTED)


def test_the_errors_derive_from_the_base() -> None:
    errors = EXPORTED[EXPORTED.index("KsearchError") :]
    assert all(issubclass(getattr(ksearch, name), ksearch.KsearchError) for name in errors), errors


def test_one_version_from_the_project_metadata() -> None:
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    assert ksearch.__version__ == declared
    from ksearch.about import __version__

    assert __version__ is ksearch.__version__


def test_importing_ksearch_is_light() -> None:
    # names resolve on first use: the bare import loads neither torch nor the store nor a room
    code = (
        "import sys, ksearch\n"
        "heavy = [m for m in ('torch', 'aiosqlite', 'ksearch.gpu', 'ksearch.tools', 'ksearch.worldmodel')"
        " if m in sys.modules]\n"
        "print(heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr
