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
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
