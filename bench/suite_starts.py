"""Starting kernels for KernelBench level-1 elementwise problems, for `ksearch suite run --starts DIR`: one Triton
kernel per problem (one program per BLOCK elements, the op in fp32), its block size and warp count declared as
TUNABLES so the offline tuner has something to move. Written from one template, named as KernelBench names the
problem's file.

    python bench/suite_starts.py DIR       # writes DIR/19_ReLU.py, DIR/21_Sigmoid.py, ...
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# problem file stem -> the elementwise expression of `x` (fp32), as each problem's Model computes it
OPS = {
    "19_ReLU": "tl.maximum(x, 0.0)",
    "21_Sigmoid": "1.0 / (1.0 + tl.exp(-x))",
    "22_Tanh": "tl.where(x >= 0, 1.0, -1.0) * (1.0 - tl.exp(-2.0 * tl.abs(x))) / (1.0 + tl.exp(-2.0 * tl.abs(x)))",
    "25_Swish": "x / (1.0 + tl.exp(-x))",
    "26_GELU_": "0.5 * x * (1.0 + tl.math.erf(x * 0.7071067811865476))",
    "27_SELU_": "1.0507009873554805 * (tl.maximum(x, 0.0) + tl.minimum(1.6732632423543772 * (tl.exp(x) - 1.0), 0.0))",
    "29_Softplus": "tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))",
    "30_Softsign": "x / (1.0 + tl.abs(x))",
}

TEMPLATE = '''"""KernelBench {name}: one program per BLOCK elements, the op in fp32 (a starting kernel for a suite)."""

import torch
import triton
import triton.language as tl

TUNABLES = {{"BLOCK": [512, 1024, 2048, 4096], "num_warps": [2, 4, 8]}}
BLOCK = 1024
num_warps = 4


@triton.jit
def _op(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m).to(tl.float32)
    tl.store(y_ptr + offs, {expr}, mask=m)


class ModelNew(torch.nn.Module):
    def __init__(self, *args: object) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _op[(triton.cdiv(n, BLOCK),)](x, y, n, BLOCK=BLOCK, num_warps=num_warps)
        return y
'''


def write_starts(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, expr in OPS.items():
        f = folder / f"{name}.py"
        f.write_text(TEMPLATE.format(name=name, expr=expr))
        out.append(f)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description="Write starting kernels for KernelBench level-1 elementwise problems."
    )
    ap.add_argument("folder", type=Path, help="where to write them (made if missing)")
    a = ap.parse_args(argv)
    for p in write_starts(a.folder):
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
