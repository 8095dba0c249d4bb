"""What the direct tests of the tool functions share besides fixtures: candidate sources, the tiny seedless
task's text and the type of the `snapshot` fixture. A module of its own (not conftest.py): several test
folders have a conftest.py, so `from conftest import ...` would find whichever was imported first."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
ROW_SUM_SEED = (ROOT / "gpu" / "tasks" / "builtin" / "row_sum" / "seed_triton.py").read_text()
# the seed with each row sum doubled: compiles and runs, wrong values
WRONG_ROW_SUM = ROW_SUM_SEED.replace("tl.sum(acc, axis=0))", "tl.sum(acc, axis=0) * 2.0)")
# the seed with its entry point renamed: parses, but defines no ModelNew, so it does not compile
NO_MODELNEW = ROW_SUM_SEED.replace("class ModelNew(", "class ModelOld(")
NOT_PYTHON = "import torch\n\nclass ModelNew(torch.nn.Module:\n    pass\n"

# A seedless task (every KernelBench, GPU MODE and FlashInfer-Bench task is): a row sum with a search, a
# held-out and a smoke workload, all small enough for the interpreter.
TINY_TASK = '''"""Row sum of a small fp32 matrix (the tools tests' seedless task)."""

import torch

from ksearch.gpu.inputs import signed

META = {"op": "row_sum", "dtype": "float32", "bound": "memory", "title": "Row sum (tools tests)"}

WORKLOADS = [
    {"name": "wide", "params": {"M": 16, "N": 300}, "split": "search"},
    {"name": "tall", "params": {"M": 40, "N": 64}, "split": "search"},
    {"name": "heldout", "params": {"M": 24, "N": 200}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 8, "N": 100}, "split": "smoke"},
]

TOLERANCE = {"atol": {"float32": 1e-3}, "rtol": {"float32": 1e-5}}


class Model(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim=-1)


def get_inputs(M=16, N=300):
    return [signed(M, N)]


def get_init_inputs(**params):
    return []
'''

Snapshot = Callable[[], Awaitable[dict[str, list[tuple[Any, ...]]]]]
