"""Per-row cross-entropy loss over a large vocabulary: bf16 logits, int64 targets, fp32 losses.

loss[i] = logsumexp(logits[i]) - logits[i, target[i]], computed in fp32 (no reduction). With a
128k vocabulary (Llama 3) the logits are ~1 GB: memory-bound, one read of the logits is the floor;
eager upcasts the whole matrix to fp32 first.
"""

import torch
import torch.nn.functional as F

from ksearch.gpu.inputs import integers, signed

META = {"op": "cross_entropy", "dtype": "bfloat16", "bound": "memory", "title": "Cross-entropy, 128k vocab (bf16 logits)"}

WORKLOADS = [
    {"name": "4096x128256", "params": {"M": 4096, "V": 128256}, "split": "search"},
    {"name": "16384x32768", "params": {"M": 16384, "V": 32768}, "split": "search"},
    {"name": "8192x50257", "params": {"M": 8192, "V": 50257}, "split": "heldout"},
    {"name": "smoke", "params": {"M": 133, "V": 4501}, "split": "smoke"},
]


def COST(params):
    m, v = params["M"], params["V"]
    return {"flops": 4.0 * m * v, "bytes": 2.0 * m * v + 8.0 * m + 4.0 * m, "dtype": "bfloat16"}


class Model(torch.nn.Module):
    def forward(self, logits, targets):
        return F.cross_entropy(logits.float(), targets, reduction="none")


def get_inputs(M=4096, V=128256):
    return [signed(M, V, dtype="bfloat16", scale=3.0), integers(M, high=V)]


def get_init_inputs(**params):
    return []
