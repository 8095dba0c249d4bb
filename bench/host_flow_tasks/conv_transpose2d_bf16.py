"""KernelBench-style problem (a fixture of bench/host_flow.py and bench/baseline_repeat.py): a bf16
ConvTranspose2d layer (3x3, stride 2, padding 1, output padding 1: doubles the image), weights and bias made by
the layer itself and cast to bf16."""

import torch

batch_size = 16
in_channels = 64
out_channels = 32
height = 64
width = 64
kernel_size = 3
stride = 2
padding = 1
output_padding = 1

# bf16 outputs: the usual bf16 tolerance (an fp32-accumulated kernel and the library differ in the last bits)
TOLERANCE = {"atol": {"bfloat16": 2e-2}, "rtol": {"bfloat16": 2e-2}}

WORKLOADS = [
    {
        "name": "16x64x64x64",
        "params": {"batch_size": 16, "in_channels": 64, "out_channels": 32, "height": 64, "width": 64},
        "split": "search",
    },
    {
        "name": "8x128x32x32",
        "params": {"batch_size": 8, "in_channels": 128, "out_channels": 64, "height": 32, "width": 32},
        "split": "search",
    },
    {
        "name": "4x32x128x128",
        "params": {"batch_size": 4, "in_channels": 32, "out_channels": 16, "height": 128, "width": 128},
        "split": "heldout",
    },
    {
        "name": "smoke",
        "params": {"batch_size": 2, "in_channels": 4, "out_channels": 4, "height": 8, "width": 8},
        "split": "smoke",
    },
]


class Model(torch.nn.Module):
    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        stride: int,
        padding: int,
        output_padding: int,
    ) -> None:
        super().__init__()
        self.conv = torch.nn.ConvTranspose2d(
            in_channels,
            out_channels,
            kernel_size,
            stride=stride,
            padding=padding,
            output_padding=output_padding,
        ).to(torch.bfloat16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


def get_inputs(
    batch_size: int = batch_size, in_channels: int = in_channels, height: int = height, width: int = width
) -> list[torch.Tensor]:
    return [torch.randn(batch_size, in_channels, height, width, dtype=torch.bfloat16)]


def get_init_inputs(in_channels: int = in_channels, out_channels: int = out_channels) -> list[int]:
    return [in_channels, out_channels, kernel_size, stride, padding, output_padding]
