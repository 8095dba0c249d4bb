"""KernelBench level1/40_LayerNorm: LayerNorm over (64, 256, 256) per sample, 16 samples, in two launches.

PyTorch's kernel gives each row one thread block, so 16 rows of 4M elements keep 16 SMs busy. Here the rows are
cut into chunks: the first launch computes each chunk's mean and sum of squared deviations (per block exactly,
merged along the chunk with Chan's formula: no cancellation whatever the data's offset); the second merges a
row's chunks again in every program (a few hundred numbers) and normalizes its own chunk with the weight and bias."""

import torch
import triton
import triton.language as tl

CHUNK = 16384  # elements per program (a multiple of BLOCK)
BLOCK = 2048
NUM_WARPS = 8


@triton.jit
def _chunk_stats(x_ptr, mean_ptr, m2_ptr, N, n_chunks, CHUNK: tl.constexpr, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    start = chunk * CHUNK
    base = x_ptr + row.to(tl.int64) * N
    count = 0.0
    mean = 0.0
    m2 = 0.0
    for off in range(0, CHUNK, BLOCK):
        cols = start + off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(base + cols, mask=mask, other=0.0)
        nb = tl.sum(mask.to(tl.float32), axis=0)
        safe = tl.maximum(nb, 1.0)
        mb = tl.sum(x, axis=0) / safe
        d = tl.where(mask, x - mb, 0.0)
        m2b = tl.sum(d * d, axis=0)
        total = tl.maximum(count + nb, 1.0)
        delta = mb - mean
        mean = mean + delta * (nb / total)
        m2 = m2 + m2b + delta * delta * (count * nb / total)
        count = count + nb
    tl.store(mean_ptr + row * n_chunks + chunk, mean)
    tl.store(m2_ptr + row * n_chunks + chunk, m2)


@triton.jit
def _normalize(
    x_ptr,
    w_ptr,
    b_ptr,
    y_ptr,
    mean_ptr,
    m2_ptr,
    N,
    n_chunks,
    eps,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
    NCH: tl.constexpr,
):
    row = tl.program_id(0)
    chunk = tl.program_id(1)
    # the row's statistics from its chunks': counts are CHUNK except for a shorter last one
    idx = tl.arange(0, NCH)
    valid = idx < n_chunks
    cm = tl.load(mean_ptr + row * n_chunks + idx, mask=valid, other=0.0)
    cq = tl.load(m2_ptr + row * n_chunks + idx, mask=valid, other=0.0)
    cn = tl.where(valid, tl.minimum(N - idx * CHUNK, CHUNK).to(tl.float32), 0.0)
    n_total = N.to(tl.float32)
    mean = tl.sum(cn * cm, axis=0) / n_total
    dev = cm - mean
    var = (tl.sum(cq, axis=0) + tl.sum(cn * dev * dev, axis=0)) / n_total
    rstd = 1.0 / tl.sqrt(var + eps)
    base = row.to(tl.int64) * N
    start = chunk * CHUNK
    for off in range(0, CHUNK, BLOCK):
        cols = start + off + tl.arange(0, BLOCK)
        mask = cols < N
        x = tl.load(x_ptr + base + cols, mask=mask)
        w = tl.load(w_ptr + cols, mask=mask)
        b = tl.load(b_ptr + cols, mask=mask)
        tl.store(y_ptr + base + cols, (x - mean) * rstd * w + b, mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, normalized_shape: tuple):
        super().__init__()
        self.ln = torch.nn.LayerNorm(normalized_shape=normalized_shape)

    def forward(self, x):
        x = x.contiguous()
        n = self.ln.weight.numel()
        rows = x.numel() // n
        n_chunks = triton.cdiv(n, CHUNK)
        means = torch.empty((rows, n_chunks), device=x.device, dtype=torch.float32)
        m2s = torch.empty_like(means)
        y = torch.empty_like(x)
        grid = (rows, n_chunks)
        _chunk_stats[grid](x, means, m2s, n, n_chunks, CHUNK=CHUNK, BLOCK=BLOCK, num_warps=NUM_WARPS)
        _normalize[grid](
            x,
            self.ln.weight.reshape(-1),
            self.ln.bias.reshape(-1),
            y,
            means,
            m2s,
            n,
            n_chunks,
            self.ln.eps,
            CHUNK=CHUNK,
            BLOCK=BLOCK,
            NCH=max(triton.next_power_of_2(n_chunks), 16),
            num_warps=NUM_WARPS,
        )
        return y
