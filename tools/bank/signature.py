"""A task's signature for the kernel bank, derived from its reference: op patterns, dtype, bound, size, ecosystem.

The op names come from two places, both read from the reference: the ops its run recorded (the task facts'
`op` and the ops the FLOP counter had no formula for) and the torch calls its source makes (`torch.softmax(`,
`F.layer_norm(`, `x.cumsum(`, `a @ b`). Each name maps to patterns by its words: `native_layer_norm` is a norm
(a norm and a softmax are row reductions too), `addmm` a GEMM. Plain arithmetic marks a task elementwise only
when nothing else does; a named activation (relu, gelu, ...) beside a GEMM marks its fused epilogue.
"""

from __future__ import annotations

import math
import re

from ksearch.gpu.task import Task
from ksearch.gpu.tasks import contract
from ksearch.gpu.tasks.facts import TaskFacts
from ksearch.tools.prompting.facts_wait import facts_for
from ksearch.tools.workspace import Workspace
from ksearch.worldmodel.bank import TaskSignature
from ksearch.worldmodel.models import Search

# pattern -> words of an op name that mark it (a word is matched whole, or as the name's suffix for `mm`)
_WORDS: dict[str, tuple[str, ...]] = {
    "attention": ("attention", "sdpa", "attn", "mha", "flash"),
    "convolution": ("conv", "conv1d", "conv2d", "conv3d", "convolution", "conv_transpose", "convtranspose"),
    "gemm": ("mm", "bmm", "addmm", "baddbmm", "matmul", "linear", "einsum", "gemm", "gemv", "dot", "trimul"),
    "norm": ("layer_norm", "layernorm", "rms_norm", "rmsnorm", "group_norm", "groupnorm", "batch_norm",
             "batchnorm", "instance_norm", "instancenorm", "norm", "normalize"),
    "softmax": ("softmax", "log_softmax", "logsoftmax", "cross_entropy", "crossentropy"),
    "scan": ("cumsum", "cumprod", "cummax", "cummin", "logcumsumexp", "scan", "prefixsum", "prefix_sum"),
    "reduction": ("sum", "mean", "amax", "amin", "max", "min", "argmax", "argmin", "var", "std", "prod",
                  "logsumexp", "vector_norm", "nll_loss", "reduce", "histogram"),
}  # fmt: skip
_ACTIVATIONS = ("relu", "gelu", "silu", "sigmoid", "tanh", "swiglu", "swish", "hardswish", "hardtanh", "elu",
                "leaky_relu", "softplus", "mish", "selu", "dropout", "hardsigmoid", "relu6")  # fmt: skip
# (`clamp` is left out: clamp_min(eps) guards a division in norms, it is not an activation)
_ARITHMETIC = ("add", "sub", "mul", "div", "exp", "log", "pow", "sqrt", "rsqrt", "abs", "neg", "where",
               "maximum", "minimum", "fma", "affine", "scale")  # fmt: skip
_ROW_REDUCTIONS = ("norm", "softmax")  # each is a reduction along a row as well
_CALL = re.compile(r"(?:\btorch\.(?:nn\.functional\.)?|\bF\.|\bnn\.|\.)([A-Za-z_]\w*)\s*\(")
_MATMUL_OP = re.compile(r"[\w\])]\s*@\s*[\w(]")  # `a @ b`, not a decorator


def _words(name: str) -> tuple[str, set[str]]:
    low = name.lower().lstrip("_")
    return low, {w for w in re.split(r"[^a-z0-9]+", low) if w}


def _matches(name: str, words: tuple[str, ...]) -> bool:
    low, parts = _words(name)
    for w in words:
        if "_" in w:
            if w in low:
                return True
        elif w in parts or low == w or (w == "mm" and low.endswith("mm")):
            return True
    return False


def patterns_of(ops: list[str]) -> list[str]:
    """The sorted op patterns of a list of op names (see the module's docstring)."""
    found = {p for p in _WORDS if any(_matches(op, _WORDS[p]) for op in ops)}
    if found & set(_ROW_REDUCTIONS):
        found.add("reduction")
    if any(_matches(op, _ACTIVATIONS) for op in ops) or (
        not found and any(_matches(op, _ARITHMETIC) for op in ops)
    ):
        found.add("elementwise")
    return sorted(found)


def source_ops(text: str) -> list[str]:
    """The torch calls a reference's source makes, in order of first appearance (`@` is `matmul`)."""
    names: list[str] = []
    for m in _CALL.finditer(text):
        if m.group(1) not in names:
            names.append(m.group(1))
    if any(not line.lstrip().startswith("@") and _MATMUL_OP.search(line) for line in text.splitlines()):
        names.append("matmul")
    return names


def _scale(facts: TaskFacts) -> float | None:
    sizes = [
        math.prod(t.shape)
        for w in facts.workloads
        if w.split == "search"
        for t in w.inputs
        if t.shape and t.dtype not in ("int", "float", "bool", "str")
    ]
    return round(math.log10(max(sizes)), 2) if sizes and max(sizes) > 0 else None


def signature(task: Task, facts: TaskFacts | None) -> TaskSignature:
    """The signature of `task`, from its reference's source and (when given) the facts of its run."""
    ops: list[str] = []
    if facts is not None:
        for name in [o.strip() for o in facts.op.split("+")]:
            if name and name != "..." and name not in ops:
                ops.append(name)
        for w in facts.workloads:
            ops += [o for o in w.uncounted_ops if o not in ops]
    elif task.op:
        ops.append(task.op)
    ops += [o for o in source_ops(contract.reference_text(task)) if o not in ops]
    pats = patterns_of(ops)
    marked = [o for o in ops if patterns_of([o])]
    dtype, bound, scale = task.dtype, task.bound, None
    if facts is not None:
        dtype = facts.dtype if facts.dtype_source != "none" else dtype
        bound = facts.bound if facts.bound_source != "none" else bound
        scale = _scale(facts)
    return TaskSignature(
        task=task.name,
        ecosystem="native" if task.builtin else task.style,
        patterns=pats,
        ops=marked[:12],
        dtype=dtype or "unknown",
        bound=bound or "unknown",
        scale=scale,
    )


async def search_signature(ws: Workspace, s: Search) -> TaskSignature:
    """The signature of a search's task (its facts are cached per task content: the prompts read them first)."""
    task = ws.search_task(s)
    facts = await facts_for(task)  # None: an assistant's reading that did not wait for them
    return signature(task, None if facts is None or (facts.error and not facts.workloads) else facts)
