# 40_LayerNorm: a KernelBench ModelNew file written by ksearch from search 'kb', attempt #4 (normalize pass walks the chunks in reverse so the tail of x still in L2 is read first)
# triton candidate c09d25fdadbd619f; status: correct; timed on NVIDIA H200 by the kernelbench protocol: 32.820x vs eager PyTorch
#
import torch
import torch.nn as nn
import triton
import triton.language as tl

# Split-row LayerNorm: a row has 4M elements, so one program per row (eager's choice) leaves most SMs idle.
# Kernel 1: (row, split) programs write partial sum / sum of squares. Kernel 2: (split, row) programs,
# row-minor so the 16 rows of one weight/bias chunk run together (weight/bias read from HBM about once),
# each combines its row's partials into mean/rstd and normalizes its chunk. The normalize pass walks the chunks in
# reverse order, so the tail of x the stats pass read last (still in L2) is read first.
BLOCK = 4096
NUM_WARPS = 8
SPLITS = 128
BLOCK2 = 4096
NUM_WARPS2 = 8
CHUNK2_BLOCKS = 4
TUNABLES = {"BLOCK": [1024, 2048, 4096, 8192], "NUM_WARPS": [4, 8, 16], "SPLITS": [32, 64, 128, 256],
            "BLOCK2": [1024, 2048, 4096, 8192], "NUM_WARPS2": [4, 8, 16], "CHUNK2_BLOCKS": [1, 2, 4, 8]}


@triton.jit
def _stats_kernel(x_ptr, part_ptr, N, CHUNK, nsplit, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    sp = tl.program_id(1)
    base = x_ptr + row.to(tl.int64) * N
    start = sp * CHUNK
    offs = tl.arange(0, BLOCK)
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    acc2 = tl.zeros([BLOCK], dtype=tl.float32)
    for off in range(0, CHUNK, BLOCK):
        idx = start + off + offs
        v = tl.load(base + idx, mask=idx < N, other=0.0)
        acc += v
        acc2 += v * v
    p = part_ptr + (row * nsplit + sp) * 2
    tl.store(p, tl.sum(acc, axis=0))
    tl.store(p + 1, tl.sum(acc2, axis=0))


@triton.jit
def _norm_kernel(x_ptr, w_ptr, b_ptr, y_ptr, part_ptr, M, N, nsplit, eps,
                 SPLITS_P2: tl.constexpr, BLOCK2: tl.constexpr, CHUNK2_BLOCKS: tl.constexpr):
    pid = tl.program_id(0)
    row = pid % M
    nch = tl.num_programs(0) // M
    ch = nch - 1 - pid // M  # reverse: the chunks the stats pass read last (still in L2) first
    s = tl.arange(0, SPLITS_P2)
    sm = s < nsplit
    pp = part_ptr + (row * nsplit + s) * 2
    tot = tl.sum(tl.load(pp, mask=sm, other=0.0), axis=0)
    tot2 = tl.sum(tl.load(pp + 1, mask=sm, other=0.0), axis=0)
    mean = tot / N
    var = tl.maximum(tot2 / N - mean * mean, 0.0)
    rstd = 1.0 / tl.sqrt(var + eps)
    base = row.to(tl.int64) * N
    offs = tl.arange(0, BLOCK2)
    for i in range(CHUNK2_BLOCKS):
        idx = (ch * CHUNK2_BLOCKS + i) * BLOCK2 + offs
        m = idx < N
        x = tl.load(x_ptr + base + idx, mask=m, other=0.0)
        w = tl.load(w_ptr + idx, mask=m, other=0.0)
        b = tl.load(b_ptr + idx, mask=m, other=0.0)
        y = (x - mean) * rstd * w + b
        tl.store(y_ptr + base + idx, y, mask=m)


class ModelNew(nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = nn.LayerNorm(normalized_shape=normalized_shape)
        self._part = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.contiguous()
        w = self.ln.weight
        b = self.ln.bias
        N = w.numel()
        M = x.numel() // N
        y = torch.empty_like(x)
        nblk = triton.cdiv(N, BLOCK)
        nsplit = min(SPLITS, nblk)
        chunk = triton.cdiv(nblk, nsplit) * BLOCK
        nsplit = triton.cdiv(N, chunk)
        need = M * nsplit * 2
        if self._part is None or self._part.numel() < need or self._part.device != x.device:
            self._part = torch.empty(need, dtype=torch.float32, device=x.device)
        part = self._part
        _stats_kernel[(M, nsplit)](x, part, N, chunk, nsplit, BLOCK=BLOCK, num_warps=NUM_WARPS)
        nch = triton.cdiv(N, BLOCK2 * CHUNK2_BLOCKS)
        _norm_kernel[(M * nch,)](x, w, b, y, part, M, N, nsplit, self.ln.eps,
                                 SPLITS_P2=triton.next_power_of_2(nsplit), BLOCK2=BLOCK2,
                                 CHUNK2_BLOCKS=CHUNK2_BLOCKS, num_warps=NUM_WARPS2)
        return y
