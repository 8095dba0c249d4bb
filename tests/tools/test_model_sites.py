"""The call sites behind `ksearch model`, in this process on tiny modules (gpu/model/capture.py and the standalone
runtime a plugged file carries): a matmul is fused with its activation only where every call of it is followed by
it; a kernel takes only the calls shaped as its task, the others run the original and are counted; a kernel whose
weights are not its task's is refused by name; unplugging gives the model back as it was."""

from __future__ import annotations

import sys

import pytest
import torch
import torch.nn as nn

from ksearch.gpu.model.capture import capture, group
from ksearch.gpu.model.load import Loaded
from ksearch.gpu.model.profile import plan_sites
from ksearch.gpu.model.runtime import plug
from ksearch.gpu.model.write import ROLES


class Shared(nn.Module):
    """fc is called twice on the same shapes: once under its GELU, once alone."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)) + self.fc(x)


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 16)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return self.act(self.fc(x)).sum() + torch.softmax(y, dim=-1).sum()


def _loaded(model: nn.Module) -> Loaded:
    return Loaded(
        ref="test",
        model=model.eval(),
        make_inputs=lambda seed: [],
        init_inputs=[],
        device=torch.device("cpu"),
        dtype=None,
        source_path=None,
        module=sys.modules[__name__],
    )


def test_a_matmul_called_alone_too_is_not_fused_with_its_activation() -> None:
    items = group(capture(_loaded(Shared()), [torch.randn(2, 8)]))
    assert sorted((i.kind, i.label, i.calls) for i in items) == [
        ("function", "add", 1),
        ("module", "GELU", 1),
        ("module", "Linear", 2),
    ]
    fused = group(capture(_loaded(Mlp()), [torch.randn(2, 8), torch.randn(3, 5)]))
    assert {(i.kind, i.label) for i in fused} >= {("linear_act", "Linear + GELU"), ("function", "softmax")}


class FusedKernel(nn.Module):
    """Linear + GELU as its task's Model holds it (linear.*, act)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(8, 16)
        self.act = nn.GELU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(x @ self.linear.weight.t() + self.linear.bias)


class SoftmaxKernel(nn.Module):
    def forward(self, y: torch.Tensor) -> torch.Tensor:
        e = (y - y.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)


def _plan(model: Mlp, x: torch.Tensor, y: torch.Tensor) -> dict[str, dict]:
    from ksearch.gpu.model.write import _weights

    out = {}
    for item in group(capture(_loaded(model), [x, y])):
        weights = [
            {
                k: v
                for site, role in zip(occ, ROLES[item.kind], strict=False)
                for k, v in _weights(site, role).items()
            }
            for occ in item.occurrences
        ]
        out[item.label] = {"task": item.label, "sites": plan_sites(item, weights)}
    return out


def test_kernels_take_the_calls_shaped_as_their_tasks_and_unplug_undoes_it() -> None:
    torch.manual_seed(0)
    model = Mlp().eval()
    x, y = torch.randn(2, 8), torch.randn(3, 5)
    plan = _plan(model, x, y)
    with torch.no_grad():
        want = model(x, y)
        handle = plug(
            model,
            [plan["Linear + GELU"], plan["softmax"]],
            {"Linear + GELU": FusedKernel, "softmax": SoftmaxKernel},
        )
        torch.testing.assert_close(model(x, y), want)
        assert handle.counts() == {
            "Linear + GELU": {"hits": 1, "fallbacks": 0},
            "softmax": {"hits": 1, "fallbacks": 0},
        }
        # other shapes than the tasks': the originals run, counted as fallbacks
        x2, y2 = torch.randn(4, 8), torch.randn(3, 7)
        model(x2, y2)
        assert handle.counts() == {
            "Linear + GELU": {"hits": 1, "fallbacks": 1},
            "softmax": {"hits": 1, "fallbacks": 1},
        }
        # the kernel follows the model's weights: the same tensors
        model.fc.weight.mul_(2)
        handle.unplug()
        again = model(x, y)
        handle = plug(model, [plan["Linear + GELU"]], {"Linear + GELU": FusedKernel})
        torch.testing.assert_close(model(x, y), again)
        handle.unplug()
    assert "forward" not in vars(model.fc) and handle.tracker is None


def test_a_kernel_holding_other_weights_is_refused_by_name() -> None:
    model = Mlp().eval()
    plan = _plan(model, torch.randn(2, 8), torch.randn(3, 5))

    class Other(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.randn(16, 8))

    with pytest.raises(
        RuntimeError,
        match=r"it lacks linear\.bias, linear\.weight; it has w, which the Model has not",
    ):
        plug(model, [plan["Linear + GELU"]], {"Linear + GELU": Other})
    assert "forward" not in vars(model.fc)
