"""Row softmax in CUDA C through NVRTC: one block per row, block-wide max and sum, then the write."""

import torch

from ksearch.gpu import nvrtc

THREADS = 1024

SRC = r"""
#define NEG_INF __int_as_float(0xff800000)

__device__ float block_reduce(float v, bool is_max, float* scratch) {
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_down_sync(0xffffffff, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) scratch[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? scratch[lane] : (is_max ? NEG_INF : 0.0f);
        for (int off = 16; off > 0; off >>= 1) {
            float o = __shfl_down_sync(0xffffffff, v, off);
            v = is_max ? fmaxf(v, o) : v + o;
        }
        if (lane == 0) scratch[0] = v;
    }
    __syncthreads();
    float r = scratch[0];
    __syncthreads();
    return r;
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n) {
    __shared__ float scratch[32];
    const float* row = x + (size_t)blockIdx.x * n;
    float* out = y + (size_t)blockIdx.x * n;
    float m = NEG_INF;
    for (int j = threadIdx.x; j < n; j += blockDim.x) m = fmaxf(m, row[j]);
    m = block_reduce(m, true, scratch);
    float s = 0.0f;
    for (int j = threadIdx.x; j < n; j += blockDim.x) s += __expf(row[j] - m);
    s = block_reduce(s, false, scratch);
    float inv = 1.0f / s;
    for (int j = threadIdx.x; j < n; j += blockDim.x) out[j] = __expf(row[j] - m) * inv;
}
"""


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = nvrtc.compile(SRC, "softmax_rows")

    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        self.kernel.launch(grid=(m,), block=(THREADS,), args=[x, y, n])
        return y
