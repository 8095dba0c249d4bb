"""Plain CUDA softmax (NVRTC): one block per row; block reductions for the max and the sum, then a write pass."""

import torch

from ksearch.gpu import nvrtc

TUNABLES = {"THREADS": [128, 256, 512, 1024]}
THREADS = 512

CUDA_SRC = r"""
__device__ float block_reduce(float v, float* partial, bool take_max) {
    partial[threadIdx.x] = v;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) {
            float o = partial[threadIdx.x + s];
            partial[threadIdx.x] = take_max ? fmaxf(partial[threadIdx.x], o) : partial[threadIdx.x] + o;
        }
        __syncthreads();
    }
    float r = partial[0];
    __syncthreads();  // partial is reused by the next reduction
    return r;
}

extern "C" __global__ void softmax_rows(const float* __restrict__ x, float* __restrict__ y, int n_cols) {
    extern __shared__ float partial[];
    const long long base = (long long)blockIdx.x * n_cols;
    float m = __int_as_float(0xff800000);  // -inf
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) m = fmaxf(m, x[base + c]);
    const float row_max = block_reduce(m, partial, true);
    float s = 0.0f;
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) s += expf(x[base + c] - row_max);
    const float inv = 1.0f / block_reduce(s, partial, false);
    for (int c = threadIdx.x; c < n_cols; c += blockDim.x) y[base + c] = expf(x[base + c] - row_max) * inv;
}
"""


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        kernel = nvrtc.compile(CUDA_SRC, "softmax_rows")
        kernel.launch(grid=(m,), block=(THREADS,), args=[x, y, n], shared_mem=4 * THREADS)
        return y
