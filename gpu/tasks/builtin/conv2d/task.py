"""2D convolution, 3x3, stride 1, padding 1, NCHW, bf16 (ResNet-style stage shapes), no bias.

Compute-bound: an implicit GEMM of (N*H*W) x (C*9) by (C*9) x K. The weights are the module's
own nn.Conv2d parameters, created after the fixed init seed (a candidate's ModelNew must create
the same nn.Conv2d so the weights match). Smoke workload: float16, because the Triton CPU
interpreter computes bf16 dot products wrongly; float16 exercises the same code path on the CPU.
"""

import torch

from ksearch.gpu.inputs import signed, torch_dtype

META = {"op": "conv2d", "dtype": "bfloat16", "bound": "compute", "title": "Conv2d 3x3 NCHW (bf16)"}

WORKLOADS = [
    {"name": "n64c128k128hw56", "params": {"N": 64, "C": 128, "K": 128, "H": 56, "W": 56}, "split": "search"},
    {"name": "n32c256k256hw28", "params": {"N": 32, "C": 256, "K": 256, "H": 28, "W": 28}, "split": "search"},
    {"name": "n48c192k160hw30", "params": {"N": 48, "C": 192, "K": 160, "H": 30, "W": 30}, "split": "heldout"},
    {"name": "smoke", "params": {"N": 2, "C": 8, "K": 72, "H": 10, "W": 9, "dtype": "float16"}, "split": "smoke"},
]


def COST(params):
    n, c, k, h, w = params["N"], params["C"], params["K"], params["H"], params["W"]
    flops = 2.0 * n * k * h * w * c * 9
    return {"flops": flops, "bytes": 2.0 * (n * c * h * w + k * c * 9 + n * k * h * w), "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def __init__(self, C, K, dtype="bfloat16"):
        super().__init__()
        self.conv = torch.nn.Conv2d(C, K, kernel_size=3, stride=1, padding=1, bias=False)
        self.conv.to(torch_dtype(dtype))

    def forward(self, x):
        return self.conv(x)


def get_inputs(N=64, C=128, K=128, H=56, W=56, dtype="bfloat16"):
    return [signed(N, C, H, W, dtype=torch_dtype(dtype))]


def get_init_inputs(C=128, K=128, dtype="bfloat16", **params):
    return [C, K, dtype]
