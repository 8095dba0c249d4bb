"""Causal scaled-dot-product attention forward, bf16, [batch, heads, seq, head_dim] layout.

out = softmax(q k^T / sqrt(d) + causal mask) v. Compute-bound at these lengths; the reference is
PyTorch's SDPA (FlashAttention-2 kernels on the H200), a strong baseline. The held-out workload
has head_dim 64 and a sequence length that is not a multiple of any block size.
Smoke workload: float16, because the Triton CPU interpreter computes bf16 dot products wrongly;
float16 exercises the same code path on the CPU.
"""

import torch
import torch.nn.functional as F

from ksearch.gpu.inputs import signed, torch_dtype

META = {"op": "attention", "dtype": "bfloat16", "bound": "compute", "title": "Causal attention forward (bf16)"}

WORKLOADS = [
    {"name": "b8h16s2048d128", "params": {"B": 8, "H": 16, "S": 2048, "D": 128}, "split": "search"},
    {"name": "b2h32s8192d128", "params": {"B": 2, "H": 32, "S": 8192, "D": 128}, "split": "search"},
    {"name": "b4h16s3000d64", "params": {"B": 4, "H": 16, "S": 3000, "D": 64}, "split": "heldout"},
    {"name": "smoke", "params": {"B": 1, "H": 2, "S": 80, "D": 32, "dtype": "float16"}, "split": "smoke"},
]


def COST(params):
    b, h, s, d = params["B"], params["H"], params["S"], params["D"]
    # Two matmuls (QK^T and PV) over the lower triangle: 2 * 2 * b*h*s*s*d / 2.
    return {"flops": 2.0 * b * h * s * s * d, "bytes": 2.0 * 4 * b * h * s * d, "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def forward(self, q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def get_inputs(B=8, H=16, S=2048, D=128, dtype="bfloat16"):
    dt = torch_dtype(dtype)
    return [signed(B, H, S, D, dtype=dt), signed(B, H, S, D, dtype=dt), signed(B, H, S, D, dtype=dt)]


def get_init_inputs(**params):
    return []
