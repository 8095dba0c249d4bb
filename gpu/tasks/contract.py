"""What a task asks of a candidate, in words: the entry point it must define and the reference it must match.

Each task kind has its own entry point: a KernelBench or native task's candidate defines `class ModelNew`, a
GPU MODE one `custom_kernel(data)`, a FlashInfer-Bench one `run(...)` over the definition's inputs. Every
face that tells a model or a person what to write (prompts, tool errors, compile diagnostics, the CLI) reads
it from here, so no face names `ModelNew` to a GPU MODE task.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ksearch.gpu.task import Task
from ksearch.gpu.tasks.kernelbench_rules import KERNELBENCH_TOLERANCE, PRECISION_DTYPE

# A KernelBench or native task's entry point (also what a context built before tasks had kinds defaults to)
MODELNEW_SIGNATURE = "class ModelNew(torch.nn.Module)"
MODELNEW_CALL_SITE = "`ModelNew.forward`"
MODELNEW_KEEP = "Keep `ModelNew`'s constructor signature and the construction order of its parameters."
MODELNEW_RULES = "\n".join(
    [
        "- A Python module defining `class ModelNew(torch.nn.Module)` whose constructor takes exactly the "
        "arguments of the reference `Model`, and whose `forward` takes the same inputs and returns the same "
        "outputs (shapes, dtypes, values within the task's tolerance).",
        "- If the reference owns parameters or buffers (`nn.Linear`, `nn.Conv2d`, `nn.Parameter`, …), "
        "create the same ones, with the same shapes, through the same calls, in the same order, so that "
        "seeded initialisation gives identical weights. Never re-initialise or re-order them. You may change "
        "their layout only in a cached copy that is derived from them.",
    ]
)


def entry_signature(task: Task) -> str:
    """The entry point as code: what a candidate module must define."""
    if task.style == "gpumode":
        return "custom_kernel(data)"
    if task.style == "flashinfer":
        return f"run({', '.join(_names(task, 'inputs'))})"
    return MODELNEW_SIGNATURE


def entry_line(task: Task) -> str:
    """One sentence for an error message: what a candidate of this task must define."""
    if task.style == "gpumode":
        return (
            "a Python module defining `custom_kernel(data)`, which receives what the task's `generate_input` "
            "returns (as `ref_kernel(data)` does) and returns the same output"
        )
    if task.style == "flashinfer":
        ins, outs = _names(task, "inputs"), _names(task, "outputs")
        return (
            f"a Python module defining `run({', '.join(ins)})` returning {_outputs_phrase(outs)}, or "
            f"`run({', '.join([*ins, *outs])})` writing into preallocated outputs"
        )
    return (
        "a Python module defining `class ModelNew(torch.nn.Module)` whose constructor takes the reference "
        "`Model`'s arguments and whose `forward` takes the same inputs"
    )


def entry_rules(task: Task) -> str:
    """The rules on the entry point, as prompt bullets (markdown, one `- ` item each)."""
    if task.style == "gpumode":
        return "\n".join(
            [
                "- A Python module defining `custom_kernel(data)` (GPU MODE): `data` is exactly what the task's "
                "`generate_input(...)` returns for a workload (the object `ref_kernel(data)` receives: its "
                "tensors, weights and config), and `custom_kernel` returns the output `ref_kernel` returns "
                "(same structure, shapes, dtypes; values as the task's `check_implementation` accepts). No "
                "class is constructed: any weights arrive inside `data` on every call.",
                "- Do not modify the tensors in `data` in place unless the reference does.",
            ]
        )
    if task.style == "flashinfer":
        ins, outs = _names(task, "inputs"), _names(task, "outputs")
        return "\n".join(
            [
                f"- A Python module defining `run({', '.join(ins)})` (FlashInfer-Bench): it is called with the "
                "definition's inputs by name and returns "
                f"{_outputs_phrase(outs)} with the definition's shapes and dtypes. Alternatively, in "
                f"destination-passing style, `run({', '.join([*ins, *outs])})` writes into outputs allocated "
                "for it (set `DESTINATION_PASSING = True` at module level) and returns nothing.",
                "- The inputs' shapes follow the definition's axes: `var` axes change between workloads, "
                "`const` axes never do.",
            ]
        )
    precision = task.extras.get("precision")
    if precision:  # KernelBench's precision setting (gpu/tasks/kernelbench_rules.py)
        t = KERNELBENCH_TOLERANCE[precision]
        return (
            f"{MODELNEW_RULES.rstrip()}\n- KernelBench precision {precision}: every tensor input (integer ones too) "
            f"arrives as torch.{PRECISION_DTYPE[precision]} and the model is moved with `.to(dtype=torch."
            f"{PRECISION_DTYPE[precision]})` after construction, as KernelBench's evaluation does; outputs are "
            f"judged at atol = rtol = {t:g}.\n"
        )
    return MODELNEW_RULES


def entry_call_site(task: Task) -> str:
    """Where a candidate's kernels are launched from, for the language rules."""
    if task.style == "gpumode":
        return "`custom_kernel(data)`"
    if task.style == "flashinfer":
        return "`run(...)`"
    return MODELNEW_CALL_SITE


def keep_rule(task: Task) -> str:
    """What a new attempt must keep of its base's interface."""
    if task.style == "gpumode":
        return "Keep `custom_kernel(data)`'s signature and its output's structure."
    if task.style == "flashinfer":
        return "Keep `run`'s parameters named as the definition's inputs (and outputs, in destination-passing style)."
    return MODELNEW_KEEP


def reference_text(task: Task) -> str:
    """The reference a candidate must match, as Python text for a prompt.

    A KernelBench or native task is its file. A GPU MODE task is a folder: its `reference.py` (generate_input,
    ref_kernel, check_implementation) and `task.py` (the input and output types). A FlashInfer-Bench task is a
    definition JSON: its axes, inputs and outputs as comments, then the reference `run`."""
    path = task.source_path
    if task.style == "gpumode":
        modules: dict[str, str] = task.extras.get("modules") or {}
        parts = []
        for name in ("task", "reference"):
            file = modules.get(name)
            if file and Path(file).is_file():
                parts.append(f"# ---- {name}.py ----\n{Path(file).read_text().rstrip()}")
        return "\n\n".join(parts)
    if task.style == "flashinfer":
        lines = [f"# FlashInfer-Bench definition {task.name!r}"]
        axes: dict[str, Any] = task.extras.get("axes") or {}
        for name, ax in axes.items():
            value = ax.get("value") if isinstance(ax, dict) else None
            kind = ax.get("type", "var") if isinstance(ax, dict) else "var"
            lines.append(f"# axis {name}: {kind}" + (f" = {value}" if value is not None else ""))
        for side in ("inputs", "outputs"):
            specs: dict[str, Any] = task.extras.get(side) or {}
            for name, spec in specs.items():
                shape = spec.get("shape")
                dims = "scalar" if shape is None else f"[{', '.join(str(d) for d in shape)}]"
                lines.append(f"# {side[:-1]} {name}: {dims} {spec.get('dtype', '')}".rstrip())
        ref = str(task.extras.get("reference") or "")
        return "\n".join(lines) + "\n\n" + ref.rstrip()
    return path.read_text() if path.is_file() else ""


def _names(task: Task, side: str) -> list[str]:
    specs = task.extras.get(side)
    return list(specs) if isinstance(specs, dict) else []


def _outputs_phrase(outs: list[str]) -> str:
    if not outs:
        return "the outputs"
    if len(outs) == 1:
        return f"the output `{outs[0]}`"
    return f"the outputs as a tuple in the definition's order ({', '.join(outs)})"
