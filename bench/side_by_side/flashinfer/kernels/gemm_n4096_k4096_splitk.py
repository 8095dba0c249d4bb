"""gemm_n4096_k4096 (C = A @ B.T, float16, float32 accumulation), tiled with tl.dot. Up to 64 rows of A the
reduction over K is split in 8 (256 programs instead of 32 stream B, 32 MB, in parallel): partial sums go
to a float32 workspace and a second launch adds them into C. Larger M: one launch, 128 x 128 tiles.
Destination-passing (run writes into `C`)."""

import torch
import triton
import triton.language as tl


@triton.jit
def _gemm(
    a_ptr,
    b_ptr,
    out_ptr,
    M,
    N,
    K,
    k_per_split,
    BM: tl.constexpr,
    BN: tl.constexpr,
    BK: tl.constexpr,
    SPLIT: tl.constexpr,
):
    pid_n = tl.program_id(0)
    pid_m = tl.program_id(1)
    pid_k = tl.program_id(2)
    rm = pid_m * BM + tl.arange(0, BM)
    rn = pid_n * BN + tl.arange(0, BN)
    rk = pid_k * k_per_split + tl.arange(0, BK)
    a = a_ptr + rm[:, None].to(tl.int64) * K + rk[None, :]
    b = b_ptr + rn[None, :].to(tl.int64) * K + rk[:, None]  # B is [N, K]: its tile read as [BK, BN]
    in_m = rm[:, None] < M
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for _ in range(0, k_per_split, BK):
        acc += tl.dot(tl.load(a, mask=in_m, other=0.0), tl.load(b))
        a += BK
        b += BK
    offs = rm[:, None].to(tl.int64) * N + rn[None, :]
    if SPLIT == 1:
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=in_m)
    else:
        tl.store(out_ptr + pid_k * M * N + offs, acc, mask=in_m)


@triton.jit
def _sum_splits(ws_ptr, c_ptr, MN, SPLIT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < MN
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    for s in tl.static_range(SPLIT):
        acc += tl.load(ws_ptr + s * MN + offs, mask=mask, other=0.0)
    tl.store(c_ptr + offs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def run(A, B, C):
    M, K = A.shape
    N = B.shape[0]
    if not M:
        return
    if M <= 64:
        bm = 16 if M <= 16 else 32 if M <= 32 else 64
        split, bn, bk = 8, 128, 64
        ws = torch.empty((split, M, N), dtype=torch.float32, device=A.device)
        _gemm[(N // bn, triton.cdiv(M, bm), split)](
            A, B, ws, M, N, K, K // split, BM=bm, BN=bn, BK=bk, SPLIT=split, num_warps=4, num_stages=4
        )
        block = 1024
        _sum_splits[(triton.cdiv(M * N, block),)](ws, C, M * N, SPLIT=split, BLOCK=block, num_warps=4)
        return
    _gemm[(N // 128, triton.cdiv(M, 128), 1)](
        A, B, C, M, N, K, K, BM=128, BN=128, BK=64, SPLIT=1, num_warps=8, num_stages=3
    )
