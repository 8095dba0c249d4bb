"""Facts of GPU MODE references that pin their data to CUDA: measured without a GPU, with those placements read
as CPU ones inside the facts probe alone (gpu/tasks/rt/placement.py); evaluation still refuses them on a CPU."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from ksearch.gpu.task import TaskError
from ksearch.gpu.tasks import load_task
from ksearch.gpu.tasks.facts import task_facts
from ksearch.gpu.tasks.rt.placement import cuda_read_as_cpu
from ksearch.gpu.tasks.rt.runtime import TaskRuntime

FIX = Path(__file__).parent / "fixtures" / "gpumode"
PAIR = FIX / "pair_update_cuda"


def test_cuda_placements_are_read_as_cpu_only_inside_the_context() -> None:
    generator, tensor_cuda, sync = torch.Generator, torch.Tensor.cuda, torch.cuda.synchronize
    with cuda_read_as_cpu() as placed:
        gen = torch.Generator(device="cuda")
        assert isinstance(gen, generator) and gen.device.type == "cpu"
        gen.manual_seed(3)
        x = torch.randn(4, 8, device="cuda", generator=gen)
        moved = x.to("cuda", torch.float16)
        module = torch.nn.Linear(8, 2).to(torch.device("cuda:0"))
        torch.cuda.synchronize()  # CUDA housekeeping does nothing
        assert x.device.type == moved.device.type == module.weight.device.type == "cpu"
        assert moved.dtype == torch.float16 and x.cuda() is x
    assert placed.seen == {
        "torch.Generator(device='cuda')": 1,
        "device='cuda'": 1,
        ".to('cuda')": 3,
        ".cuda()": 1,
    }  # fmt: skip  (the module's weight and bias are moved one by one)
    # everything is as it was afterwards
    assert (
        torch.Generator is generator and torch.Tensor.cuda is tensor_cuda and torch.cuda.synchronize is sync
    )
    with cuda_read_as_cpu() as nothing:
        torch.randn(2)
    assert not nothing and nothing.seen == {}


@pytest.mark.slow
def test_a_trimul_shaped_reference_pinned_to_cuda_gets_its_facts() -> None:
    task = load_task(str(PAIR))
    assert task.extras["needs_gpu"] is not None  # as loaded: it pins its tensors to CUDA
    f = task_facts(task)
    assert f.error is None
    assert (f.dtype, f.dtype_source) == ("float32", "derived")
    assert f.bound_source == "derived" and f.bound == "compute"
    w = f.workload("bench0")
    assert w is not None and w.method == "fake" and w.error is None
    bs, n, dim, hidden = 2, 256, 128, 128
    rows = bs * n * n
    shapes = {t.name: t.shape for t in w.inputs}
    assert shapes["data[0]"] == [bs, n, n, dim] and shapes["data[1]"] == [bs, n, n]
    assert shapes["data[2]['proj.weight']"] == [2 * hidden, dim]
    assert [(t.name, t.value) for t in w.inputs if t.value is not None] == [
        ("data[3]['dim']", "128"),
        ("data[3]['hidden']", "128"),
    ]
    assert [(t.shape, t.dtype) for t in w.outputs] == [([bs, n, n, dim], "float32")]
    weights = 2 * dim + 2 * (2 * hidden * dim) + dim * hidden
    assert w.bytes == 4 * (rows * dim + rows + weights + rows * dim)
    # proj and gate (to 2*hidden), the pairwise einsum (a batched matmul over b and h), the output projection
    matmuls = 2 * (2 * rows * dim * 2 * hidden) + 2 * bs * hidden * n**3 + 2 * rows * hidden * dim
    assert w.flops_counted == matmuls
    assert w.flops is None and w.uncounted_ops == ["native_layer_norm", "sigmoid", "mul"]
    assert w.intensity is not None and w.intensity > 0 and w.bound == "compute"
    assert set(w.cuda_as_cpu) == {"torch.Generator(device='cuda')", "device='cuda'", ".to('cuda')"}
    text = f.text()
    assert "shapes from a fake-tensor run of the reference, its CUDA placements" in text
    assert "read as CPU ones for measuring" in text
    assert "dtype unknown" not in text and "bound unknown" not in text
    assert f.op.startswith("native_layer_norm + mm")
    cauchy = f.workload("bench1")  # the Cauchy branch draws on the CPU and moves with .to(device='cuda')
    assert cauchy is not None and cauchy.outputs[0].shape == [1, 512, 512, 384]


@pytest.mark.cpu
@pytest.mark.slow
def test_evaluation_still_refuses_a_pinned_reference_after_its_facts() -> None:
    task = load_task(str(FIX / "cuda_pinned"))
    f = task_facts(task)
    w = f.workload("bench1")
    assert w is not None and [t.shape for t in w.outputs] == [[8192]] and w.bytes == 2 * 4 * 8192
    assert w.cuda_as_cpu == ["torch.Generator(device='cuda')"]
    # the probe read the placements as CPU ones in its own process; here, as in a worker, nothing is read so
    with pytest.raises(TaskError, match=r"needs a GPU: reference\.py line 13"):
        TaskRuntime(task).make_inputs(task.smoke(), 1, "cpu")
    assert torch.Generator(device="cpu").device.type == "cpu"
    with pytest.raises(RuntimeError):
        torch.Generator(device="cuda")  # no CUDA on this machine, and nothing reads it as the CPU here
