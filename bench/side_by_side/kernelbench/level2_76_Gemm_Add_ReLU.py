"""KernelBench level2/76_Gemm_Add_ReLU: y = relu(x @ W^T + bias) in fp32, one launch (the reference runs the GEMM,
then the bias add and the ReLU as two more kernels over the output).

Tiles of 128x128 in grouped order (neighbouring programs share tiles of x and W in L2), the bias and the ReLU
applied to the accumulator before the one store. The products use three TF32 tensor-core passes ("tf32x3": each
operand split into a TF32 high part and a TF32 remainder), which keeps fp32's accuracy (KernelBench's fp32
tolerance is 1e-4) at tensor-core speed; where Triton cannot compile that, the plain fp32 path ("ieee") is used."""

import torch
import triton
import triton.language as tl

BLOCK_M = 128
BLOCK_N = 128
BLOCK_K = 32
GROUP_M = 8
NUM_WARPS = 8
NUM_STAGES = 3
PRECISIONS = ["tf32x3", "ieee"]  # the first that compiles is kept


@triton.jit
def _gemm_bias_relu(
    x_ptr,
    w_ptr,
    bias_ptr,
    y_ptr,
    M,
    N,
    K,
    stride_xm,
    stride_xk,
    stride_wn,
    stride_wk,
    stride_ym,
    stride_yn,
    PRECISION: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    pid = tl.program_id(0)
    grid_m = tl.cdiv(M, BLOCK_M)
    grid_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * grid_n
    first_m = (pid // per_group) * GROUP_M
    size_m = tl.minimum(grid_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % size_m
    pid_n = (pid % per_group) // size_m
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    x_tile = x_ptr + rm[:, None] * stride_xm + rk[None, :] * stride_xk
    w_tile = w_ptr + rk[:, None] * stride_wk + rn[None, :] * stride_wn  # W^T: (K, N)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        a = tl.load(x_tile, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
        b = tl.load(w_tile, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        x_tile += BLOCK_K * stride_xk
        w_tile += BLOCK_K * stride_wk
    bias = tl.load(bias_ptr + rn, mask=rn < N, other=0.0)
    out = tl.maximum(acc + bias[None, :], 0.0)
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    tl.store(y_ptr + rm[:, None] * stride_ym + rn[None, :] * stride_yn, out, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, in_features, out_features, bias_shape):
        super().__init__()
        self.gemm = torch.nn.Linear(in_features, out_features, bias=False)  # the same weights as Model's
        self.bias = torch.nn.Parameter(torch.randn(bias_shape))

    def forward(self, x):
        x = x.contiguous()
        w = self.gemm.weight
        m, k = x.shape
        n = w.shape[0]
        y = torch.empty((m, n), device=x.device, dtype=x.dtype)
        grid = (triton.cdiv(m, BLOCK_M) * triton.cdiv(n, BLOCK_N),)
        while True:
            try:
                _gemm_bias_relu[grid](
                    x,
                    w,
                    self.bias,
                    y,
                    m,
                    n,
                    k,
                    x.stride(0),
                    x.stride(1),
                    w.stride(0),
                    w.stride(1),
                    y.stride(0),
                    y.stride(1),
                    PRECISION=PRECISIONS[0],
                    BLOCK_M=BLOCK_M,
                    BLOCK_N=BLOCK_N,
                    BLOCK_K=BLOCK_K,
                    GROUP_M=GROUP_M,
                    num_warps=NUM_WARPS,
                    num_stages=NUM_STAGES,
                )
                return y
            except Exception:
                if len(PRECISIONS) == 1:
                    raise
                PRECISIONS.pop(0)  # this Triton cannot compile it: the next, for good
