"""Scripted decisions shared by the host-loop tests: what a model would answer in each phase."""

from __future__ import annotations

from typing import Any

KERNEL = """
import torch
import triton
import triton.language as tl

BLOCK = {block}
TUNABLES = {{"BLOCK": [256, 512, 1024, 2048]}}


@triton.jit
def _scaled_relu(x_ptr, y_ptr, n, scale, shift, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.maximum(x, 0.0) * scale + {shift}
    tl.store(y_ptr + offs, y, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, scale, shift):
        super().__init__()
        self.scale = scale
        self.shift = shift

    def forward(self, x):
        x = x.contiguous()
        y = torch.empty_like(x)
        n = x.numel()
        _scaled_relu[(triton.cdiv(n, BLOCK),)](x, y, n, self.scale, self.shift, BLOCK=BLOCK)
        return y
"""


def kernel(block: int, *, wrong: bool = False) -> str:
    # `wrong` forgets the shift: a correctness failure the next attempt fixes
    return KERNEL.format(block=block, shift="0.0" if wrong else "shift")


def scaled_relu_decisions() -> list[dict[str, Any]]:
    """Replay lines (phase, result) in the order the loop asks for them: init, then per round the
    write_code answers until the refine rule stops, then one update."""
    init = {
        "analysis": "Elementwise and memory-bound: one read and one write of the matrix is the floor.",
        "intents": [
            {
                "title": "one program per 1024-element block",
                "priority": 0.9,
                "difficulty": 1,
                "rationale": "a flat grid over all elements; loads and stores fully coalesced",
            },
            {
                "title": "persistent programs striding over rows",
                "priority": 0.5,
                "difficulty": 3,
                "rationale": "fewer programs, less launch and scheduling cost",
            },
        ],
    }
    round1 = [kernel(1024, wrong=True), kernel(1024), kernel(2048), kernel(512)]
    update1 = {
        "reflection": "correct after fixing the shift; block size made no difference beyond noise",
        "edits": [{"op": "update", "node_id": 3, "priority": 0.2, "notes": "flat grid already coalesced"}],
        "new_intents": [
            {
                "title": "two elements per thread with 2048-element blocks",
                "priority": 0.95,
                "difficulty": 1,
                "parent_id": 2,
                "rationale": "more bytes in flight per thread",
            }
        ],
    }
    round2 = [kernel(2048), kernel(256)]  # builds on a correct base: two without a gain end it
    update2 = {"reflection": "no gain beyond noise", "edits": [], "new_intents": []}
    lines: list[dict[str, Any]] = [{"phase": "init", "result": init}]
    lines += [{"phase": "write_code", "result": {"source": s}} for s in round1]
    lines.append({"phase": "update", "result": update1})
    lines += [{"phase": "write_code", "result": {"source": s}} for s in round2]
    lines.append({"phase": "update", "result": update2})
    return lines
