"""Plain CUDA SwiGLU (NVRTC): one thread per element, computed in fp32.

bf16 is handled as raw 16-bit words (no headers needed): widened by a shift, narrowed with
round-to-nearest-even.
"""

import torch

from ksearch.gpu import nvrtc

TUNABLES = {"THREADS": [128, 256, 512, 1024]}
THREADS = 256

CUDA_SRC = r"""
__device__ __forceinline__ float bf16_to_f32(unsigned short h) { return __uint_as_float(((unsigned int)h) << 16); }
__device__ __forceinline__ unsigned short f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    u += 0x7FFFu + ((u >> 16) & 1u);
    return (unsigned short)(u >> 16);
}

extern "C" __global__ void swiglu(const unsigned short* __restrict__ gate, const unsigned short* __restrict__ up,
                                  unsigned short* __restrict__ out, long long n) {
    const long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        const float g = bf16_to_f32(gate[i]);
        out[i] = f32_to_bf16(g / (1.0f + expf(-g)) * bf16_to_f32(up[i]));
    }
}
"""


class ModelNew(torch.nn.Module):
    def forward(self, gate, up):
        gate = gate.contiguous()
        up = up.contiguous()
        out = torch.empty_like(gate)
        n = gate.numel()
        kernel = nvrtc.compile(CUDA_SRC, "swiglu")
        kernel.launch(grid=((n + THREADS - 1) // THREADS,), block=(THREADS,), args=[gate, up, out, nvrtc.i64(n)])
        return out
