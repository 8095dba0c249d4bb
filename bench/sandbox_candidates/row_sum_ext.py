"""Row sum as a CUDA C++ torch extension (load_inline through ksearch.gpu.cpp_ext): host wrapper in C++."""

import torch

from ksearch.gpu import cpp_ext

CPP = "torch::Tensor row_sum(torch::Tensor x);"

CUDA = r"""
#include <ATen/cuda/CUDAContext.h>

__global__ void row_sum_kernel(const float* __restrict__ x, float* __restrict__ y, int n_cols) {
    const float* row = x + (size_t)blockIdx.x * n_cols;
    float acc = 0.0f;
    for (int j = threadIdx.x; j < n_cols; j += blockDim.x) acc += row[j];
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
    __shared__ float partial[32];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) partial[warp] = acc;
    __syncthreads();
    if (warp == 0) {
        acc = lane < (blockDim.x >> 5) ? partial[lane] : 0.0f;
        for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync(0xffffffff, acc, off);
        if (lane == 0) y[blockIdx.x] = acc;
    }
}

torch::Tensor row_sum(torch::Tensor x) {
    TORCH_CHECK(x.is_cuda() && x.dim() == 2 && x.scalar_type() == torch::kFloat, "x: 2-D float32 CUDA tensor");
    auto xc = x.contiguous();
    auto y = torch::empty({xc.size(0)}, xc.options());
    row_sum_kernel<<<xc.size(0), 256, 0, at::cuda::getCurrentCUDAStream()>>>(
        xc.data_ptr<float>(), y.data_ptr<float>(), (int)xc.size(1));
    return y;
}
"""


class ModelNew(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.ext = cpp_ext.load("row_sum_ext", cpp_sources=CPP, cuda_sources=CUDA, functions=["row_sum"])

    def forward(self, x):
        return self.ext.row_sum(x)
