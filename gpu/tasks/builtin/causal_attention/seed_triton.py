"""Plain Triton causal attention: one program per (query block, batch*head), online softmax over key blocks."""

import math

import torch
import triton
import triton.language as tl

TUNABLES = {"BLOCK_M": [32, 64, 128], "BLOCK_N": [32, 64, 128], "num_warps": [4, 8], "num_stages": [1, 2, 3]}
BLOCK_M = 64
BLOCK_N = 32
num_warps = 4
num_stages = 2


@triton.jit
def _causal_attention(q_ptr, k_ptr, v_ptr, o_ptr, S, sm_scale, sb, sh, ss, H,
                      D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    bh = tl.program_id(1).to(tl.int64)
    base = (bh // H) * sb + (bh % H) * sh
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, D)
    q = tl.load(q_ptr + base + offs_m[:, None] * ss + offs_d[None, :], mask=offs_m[:, None] < S, other=0.0)

    m_i = tl.full([BLOCK_M], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, D], tl.float32)
    hi = tl.minimum((pid_m + 1) * BLOCK_M, S)
    for start in range(0, hi, BLOCK_N):
        offs_n = start + tl.arange(0, BLOCK_N)
        kt = tl.load(k_ptr + base + offs_n[None, :] * ss + offs_d[:, None], mask=offs_n[None, :] < S, other=0.0)
        qk = tl.dot(q, kt) * sm_scale
        keep = (offs_m[:, None] >= offs_n[None, :]) & (offs_n[None, :] < S)
        qk = tl.where(keep, qk, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(qk, axis=1))
        p = tl.exp(qk - m_new[:, None])
        alpha = tl.exp(m_i - m_new)
        l_i = l_i * alpha + tl.sum(p, axis=1)
        v = tl.load(v_ptr + base + offs_n[:, None] * ss + offs_d[None, :], mask=offs_n[:, None] < S, other=0.0)
        acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v)
        m_i = m_new
    out = acc / l_i[:, None]
    tl.store(o_ptr + base + offs_m[:, None] * ss + offs_d[None, :], out.to(o_ptr.dtype.element_ty),
             mask=offs_m[:, None] < S)


class ModelNew(torch.nn.Module):
    def forward(self, q, k, v):
        q, k, v = q.contiguous(), k.contiguous(), v.contiguous()
        b, h, s, d = q.shape
        o = torch.empty_like(q)
        grid = (triton.cdiv(s, BLOCK_M), b * h)
        _causal_attention[grid](q, k, v, o, s, 1.0 / math.sqrt(d), q.stride(0), q.stride(1), q.stride(2), h,
                                D=d, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N, num_warps=num_warps, num_stages=num_stages)
        return o
