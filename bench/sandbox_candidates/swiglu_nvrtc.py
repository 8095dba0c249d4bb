"""SwiGLU in CUDA C through NVRTC: bf16 handled as raw 16-bit words, math in fp32."""

import torch

from ksearch.gpu import nvrtc

THREADS = 256

SRC = r"""
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);  // round to nearest even
    return (unsigned short)(u >> 16);
}

extern "C" __global__ void swiglu(const unsigned short* __restrict__ g, const unsigned short* __restrict__ u,
                                  unsigned short* __restrict__ y, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long stride = (long long)gridDim.x * blockDim.x;
    for (; i < n; i += stride) {
        float a = bf16_to_f32(g[i]);
        float b = bf16_to_f32(u[i]);
        y[i] = f32_to_bf16(a / (1.0f + __expf(-a)) * b);
    }
}
"""


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.kernel = nvrtc.compile(SRC, "swiglu")

    def forward(self, gate, up):
        gate, up = gate.contiguous(), up.contiguous()
        y = torch.empty_like(gate)
        n = gate.numel()
        blocks = min((n + THREADS - 1) // THREADS, 132 * 32)
        self.kernel.launch(grid=(blocks,), block=(THREADS,), args=[gate, up, y, nvrtc.i64(n)])
        return y
