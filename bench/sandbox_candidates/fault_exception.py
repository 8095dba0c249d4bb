"""Fault: a plain Python exception inside forward."""

import torch


class ModelNew(torch.nn.Module):
    def forward(self, x):
        raise ValueError("block size must divide the row length")
