# histogram_py: a GPU MODE submission written by ksearch from search 'gm', attempt #2 (privatised per-program tl.histogram over a grid-stride range, merged in one launch via an atomic ticket)
# triton candidate c172cb3c708ce820; status: correct; timed on NVIDIA H200 by the gpumode protocol: 8.944x vs eager PyTorch
#
import torch
import triton
import triton.language as tl

BLOCK = 8192
NUM_WARPS = 8
PROGS_PER_SM = 4
TUNABLES = {"BLOCK": [2048, 4096, 8192, 16384], "NUM_WARPS": [4, 8, 16], "PROGS_PER_SM": [1, 2, 4]}

_STATE = {}


@triton.jit
def _hist_kernel(x_ptr, out_ptr, scratch_ptr, ticket_ptr, n, nblocks, pad,
                 BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    offs = tl.arange(0, BLOCK)
    hist = tl.zeros([256], dtype=tl.int32)
    for blk in range(pid, nblocks, nprog):
        idx = blk * BLOCK + offs
        v = tl.load(x_ptr + idx, mask=idx < n, other=0)
        hist += tl.histogram(v.to(tl.int32), 256)
    bins = tl.arange(0, 256)
    tl.atomic_add(scratch_ptr + bins, hist)
    tl.debug_barrier()
    t = tl.atomic_add(ticket_ptr, 1)
    if t == nprog - 1:
        tot = tl.atomic_xchg(scratch_ptr + bins, tl.zeros([256], dtype=tl.int32))
        tot = tot - tl.where(bins == 0, pad, 0)
        tl.store(out_ptr + bins, tot.to(tl.int64))
        tl.atomic_xchg(ticket_ptr, 0)


def _state(dev):
    st = _STATE.get(dev)
    if st is None:
        scratch = torch.zeros(257, dtype=torch.int32, device=dev)
        if dev.type == "cuda":
            sms = torch.cuda.get_device_properties(dev).multi_processor_count
        else:
            sms = 4
        st = (scratch[:256], scratch[256:], sms)
        _STATE[dev] = st
    return st


def custom_kernel(data):
    x, out = data
    n = x.numel()
    scratch, ticket, sms = _state(x.device)
    nblocks = triton.cdiv(n, BLOCK)
    grid = max(1, min(nblocks, sms * PROGS_PER_SM))
    pad = nblocks * BLOCK - n
    _hist_kernel[(grid,)](x, out, scratch, ticket, n, nblocks, pad, BLOCK=BLOCK, num_warps=NUM_WARPS)
    return out
