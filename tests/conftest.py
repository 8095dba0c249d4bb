"""Shared test setup: run Triton kernels under the interpreter when no GPU is present, skip `gpu` tests."""

from __future__ import annotations

import os

import pytest
import torch

_HAS_CUDA = torch.cuda.is_available()
if not _HAS_CUDA:
    # Must be set before triton is first imported: the interpreter is chosen at decoration time.
    os.environ.setdefault("TRITON_INTERPRET", "1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if _HAS_CUDA:
        # `cpu` tests assert what the Triton interpreter does (no timing ranks, the smoke workload only)
        only_cpu = pytest.mark.skip(reason="asserts CPU-interpreter behaviour; this machine has a GPU")
        for item in items:
            if "cpu" in item.keywords:
                item.add_marker(only_cpu)
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
