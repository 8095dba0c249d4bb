"""ksearch: LLM-driven GPU kernel search with a co-evolving world model of optimization intents.

The public Python surface is `__all__`: a `Workspace` (the store and the sandbox every operation runs
over), the operations with their input and output models, the task loader, the world model's records and
the errors. Everything else lives in the rooms `ksearch.worldmodel`, `ksearch.gpu`, `ksearch.tools` and
`ksearch.server` (docs/architecture.md).

    import asyncio
    from pathlib import Path

    import ksearch

    async def main() -> None:
        async with await ksearch.Workspace.open(Path("k.db")) as ws:
            s = await ksearch.create_search(ws, ksearch.CreateSearchIn(task="softmax"))
            ev = await ksearch.benchmark(ws, ksearch.BenchmarkIn(search=s.id, candidate={"seed": True}))
            print(ev.summary)

    asyncio.run(main())

Names are imported on first use: `import ksearch` stays cheap (no torch, no store, no sandbox).
"""

from __future__ import annotations

import importlib
from typing import Any

from ksearch.about import ROOMS_BESIDE, SOURCE_ROOT, __version__

if ROOMS_BESIDE and SOURCE_ROOT is not None:
    # A source checkout keeps the rooms at the repository's top level (gpu/, server/, tools/,
    # worldmodel/); ksearch/ links to them, but a checkout made without symbolic links has plain files
    # there. Searching the repository root as well then makes `ksearch.gpu` that top-level gpu/
    # package, so tests, workers and `python -m ksearch....` still run with only PYTHONPATH set.
    # Installed, or with the links, the rooms are found inside this directory and this is skipped.
    __path__.append(str(SOURCE_ROOT))

# public name -> the module that defines it
_EXPORTS: dict[str, str] = {
    # the state every operation runs over
    "Workspace": "ksearch.tools.workspace",
    # the operations and their models
    "CandidateRef": "ksearch.tools.common",
    "benchmark": "ksearch.tools.benchmark",
    "BenchmarkIn": "ksearch.tools.benchmark",
    "benchmark_batch": "ksearch.tools.benchmark_batch",
    "BenchmarkBatchIn": "ksearch.tools.benchmark_batch",
    "BatchItem": "ksearch.tools.benchmark_batch",
    "BatchOut": "ksearch.tools.benchmark_batch",
    "compile_kernel": "ksearch.tools.compile_kernel",
    "CompileKernelIn": "ksearch.tools.compile_kernel",
    "CompileOut": "ksearch.tools.compile_kernel",
    "create_search": "ksearch.tools.create_search",
    "CreateSearchIn": "ksearch.tools.create_search",
    "edit_tree": "ksearch.tools.edit_tree",
    "EditTreeIn": "ksearch.tools.edit_tree",
    "final_evaluation": "ksearch.tools.final_eval",
    "FinalEvalIn": "ksearch.tools.final_eval",
    "FinalOut": "ksearch.tools.final_eval",
    "FinalRow": "ksearch.tools.final_eval",
    "set_budgets": "ksearch.tools.budgets",
    "SetBudgetsIn": "ksearch.tools.budgets",
    "SetBudgetsOut": "ksearch.tools.budgets",
    "finish_intent": "ksearch.tools.finish_intent",
    "FinishIntentIn": "ksearch.tools.finish_intent",
    "FinishOut": "ksearch.tools.finish_intent",
    "get_tree": "ksearch.tools.get_tree",
    "GetTreeIn": "ksearch.tools.get_tree",
    "TreeOut": "ksearch.tools.get_tree",
    "list_searches": "ksearch.tools.list_searches",
    "SearchRow": "ksearch.tools.list_searches",
    "loop_state": "ksearch.tools.loop.state",
    "LoopState": "ksearch.tools.loop.state",
    "profile_ncu": "ksearch.tools.profile_ncu",
    "ProfileIn": "ksearch.tools.profile_ncu",
    "ProfileOut": "ksearch.tools.profile_ncu",
    "propose_intents": "ksearch.tools.propose_intents",
    "ProposeIntentsIn": "ksearch.tools.propose_intents",
    "run_correctness": "ksearch.tools.run_correctness",
    "RunCorrectnessIn": "ksearch.tools.run_correctness",
    "EvaluationOut": "ksearch.tools.run_correctness",
    "run_search": "ksearch.tools.run_search",
    "RunSearchIn": "ksearch.tools.run_search",
    "RunSearchOut": "ksearch.tools.run_search",
    "select_action": "ksearch.tools.select_action",
    "SelectActionIn": "ksearch.tools.select_action",
    "SelectionOut": "ksearch.tools.select_action",
    # a candidate file outside any search (no database)
    "evaluate_file": "ksearch.tools.files.evaluate",
    "EvaluateFileIn": "ksearch.tools.files.evaluate",
    "EvaluateFileOut": "ksearch.tools.files.evaluate",
    "compile_file": "ksearch.tools.files.compile",
    "CompileFileIn": "ksearch.tools.files.compile",
    "CompileFileOut": "ksearch.tools.files.compile",
    # reading a whole search, and its kernel in its task owner's format (FlashInfer-Bench, GPU MODE, KernelBench)
    "read_search": "ksearch.tools.read_search",
    "SearchSnapshot": "ksearch.tools.read_search",
    "export_solution": "ksearch.tools.files.solutions",
    "SolutionOut": "ksearch.tools.files.solutions",
    "export_kernel": "ksearch.tools.export_kernel",
    "ExportKernelIn": "ksearch.tools.export_kernel",
    "ExportedKernel": "ksearch.tools.export_kernel",
    # a whole model: its hot operators as tasks, the winning kernels plugged back
    "profile_model": "ksearch.tools.model",
    "ProfileModelIn": "ksearch.tools.model",
    "ModelProfileOut": "ksearch.tools.model",
    "plug_back": "ksearch.tools.model",
    "PlugBackIn": "ksearch.tools.model",
    "PlugBackOut": "ksearch.tools.model",
    # tasks
    "list_tasks": "ksearch.tools.tasks",
    "TaskSummary": "ksearch.tools.tasks",
    "show_task": "ksearch.tools.tasks",
    "ShowTaskIn": "ksearch.tools.tasks",
    "TaskOut": "ksearch.tools.tasks",
    "check_task": "ksearch.tools.tasks",
    "CheckTaskIn": "ksearch.tools.tasks",
    "TaskCheck": "ksearch.tools.tasks",
    "load_task": "ksearch.gpu.tasks",
    "builtin_names": "ksearch.gpu.tasks",
    "Task": "ksearch.gpu.task",
    "Workload": "ksearch.gpu.task",
    # the world model's records
    "Attempt": "ksearch.worldmodel.models",
    "Candidate": "ksearch.worldmodel.models",
    "Edit": "ksearch.worldmodel.models",
    "EditSpec": "ksearch.worldmodel.models",
    "EvalSettings": "ksearch.worldmodel.models",
    "Evaluation": "ksearch.worldmodel.models",
    "IntentSpec": "ksearch.worldmodel.models",
    "Node": "ksearch.worldmodel.models",
    "NodeStatus": "ksearch.worldmodel.models",
    "Search": "ksearch.worldmodel.models",
    "SearchConfig": "ksearch.worldmodel.models",
    # errors: KsearchError is the base of every one (ksearch.worldmodel.errors draws the tree)
    "KsearchError": "ksearch.worldmodel.errors",
    "Conflict": "ksearch.worldmodel.errors",
    "EditRejected": "ksearch.worldmodel.errors",
    "InvalidTransition": "ksearch.worldmodel.errors",
    "NotFound": "ksearch.worldmodel.errors",
    "SchemaError": "ksearch.worldmodel.errors",
    "StoreBusy": "ksearch.worldmodel.errors",
    "SandboxError": "ksearch.gpu.sandbox.api",
    "TaskError": "ksearch.gpu.task",
    "ToolFailure": "ksearch.tools.errors",
}

__all__ = ["__version__", *_EXPORTS]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'ksearch' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
