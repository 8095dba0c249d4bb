"""A bf16 `tl.dot` under Triton's interpreter: multiplied as values, so a correct bf16 GEMM is judged correct on the
CPU (the interpreter alone multiplies the operands' raw bits: ksearch.gpu.tasks.rt.interp_bf16)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.cli import ksearch_cli

PROBE = """
import torch, triton, triton.language as tl
from ksearch.gpu.tasks.rt import interp_bf16

@triton.jit
def dot(a_ptr, b_ptr, o_ptr, N: tl.constexpr):
    r = tl.arange(0, N)
    a = tl.load(a_ptr + r[:, None] * N + r[None, :])
    b = tl.load(b_ptr + r[:, None] * N + r[None, :])
    tl.store(o_ptr + r[:, None] * N + r[None, :], tl.dot(a, b))

def err():
    torch.manual_seed(0)
    a, b = torch.randn(16, 16, dtype=torch.bfloat16), torch.randn(16, 16, dtype=torch.bfloat16)
    o = torch.empty(16, 16)
    dot[(1,)](a, b, o, 16)
    return (o - a.float() @ b.float()).abs().max().item()

before = err()
patched = interp_bf16.install()
print(before, patched, err(), interp_bf16.install())
"""

TASK = """import torch
import torch.nn as nn

size_0 = 256
size_1 = 128


class Model(nn.Module):
    def __init__(self, size_0, size_1):
        super().__init__()
        self.op = nn.Linear(size_0, size_1, bias=False).to(torch.bfloat16)

    def forward(self, x0):
        return self.op(x0)


def get_inputs():
    return [torch.randn((64, size_0), dtype=torch.bfloat16)]


def get_init_inputs():
    return [size_0, size_1]
"""

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(a_ptr, b_ptr, c_ptr, M, N, K, sam, sak, sbk, sbn, scm, scn,
          BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    rm = tl.program_id(0) * BM + tl.arange(0, BM)
    rn = tl.program_id(1) * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, K, BK):
        kk = k + rk
        a = tl.load(a_ptr + rm[:, None] * sam + kk[None, :] * sak, mask=(rm[:, None] < M) & (kk[None, :] < K), other=0.0)
        b = tl.load(b_ptr + kk[:, None] * sbk + rn[None, :] * sbn, mask=(kk[:, None] < K) & (rn[None, :] < N), other=0.0)
        acc += tl.dot(a, b)
    tl.store(c_ptr + rm[:, None] * scm + rn[None, :] * scn, acc.to(tl.bfloat16), mask=(rm[:, None] < M) & (rn[None, :] < N))


class ModelNew(torch.nn.Module):
    def __init__(self, size_0, size_1):
        super().__init__()
        self.op = torch.nn.Linear(size_0, size_1, bias=False).to(torch.bfloat16)

    def forward(self, x0):
        w = self.op.weight
        m, k = x0.shape
        n = w.shape[0]
        c = torch.empty((m, n), dtype=x0.dtype)
        grid = (triton.cdiv(m, 32), triton.cdiv(n, 32))
        _gemm[grid](x0, w, c, m, n, k, x0.stride(0), x0.stride(1), w.stride(1), w.stride(0), c.stride(0), c.stride(1),
                    BM=32, BN=32, BK=32)
        return c
"""


def test_the_interpreter_s_bf16_dot_multiplies_values_once_patched() -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    before, patched, after, again = out.stdout.split()
    # where the interpreter is wrong (Triton 3.9: errors ~1e10) it is patched; where it is right it is left alone
    assert (float(before) > 1.0) == (patched == "True")
    assert float(after) < 1e-3 and again == patched


@pytest.mark.cpu
def test_a_correct_bf16_triton_gemm_is_judged_correct_on_the_cpu(tmp_path: Path) -> None:
    task, kernel = tmp_path / "linear_bf16.py", tmp_path / "cand.py"
    task.write_text(TASK)
    kernel.write_text(KERNEL)
    ev = ksearch_cli(tmp_path, "eval", str(task), str(kernel), "--json", "--no-timing")
    r = json.loads(ev.stdout)
    assert r["status"] == "ok", r
    assert [(c["workload"], c["passed"]) for c in r["correctness"]] == [("smoke", True)], r["correctness"]
