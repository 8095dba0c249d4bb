# Round 1 of the log_softmax search: analysis, first intents, three intents x up to three candidates,
# final evaluation. Written to adapt: later candidates read earlier results.
import json as _json
import math as _math

S = "log_softmax"
AUTHOR = "llm:assistant"
WL = ["8192x32768", "32768x4096"]


def show(tag, obj):
    print(f"### {tag}: " + _json.dumps(obj, default=str)[:3000])


def walk(obj):
    """Every dict inside obj (depth first)."""
    if isinstance(obj, dict):
        yield obj
        for v in obj.values():
            yield from walk(v)
    elif isinstance(obj, list):
        for v in obj:
            yield from walk(v)


def is_err(r):
    return not isinstance(r, dict) or "error" in r


def first_key(d, *names):
    for n in names:
        if isinstance(d, dict) and d.get(n) is not None:
            return d[n]
    return None


def attempt_id_of(r):
    if is_err(r):
        return None
    v = first_key(r, "attempt_id")
    if v is None:
        a = r.get("attempt")
        if isinstance(a, dict):
            v = first_key(a, "id", "attempt_id")
        elif isinstance(a, int):
            v = a
    return v


def _ev(r):
    if is_err(r):
        return {}
    ev = r.get("evaluation")
    return ev if isinstance(ev, dict) else {}


def per_workload_medians(r):
    """{workload: median_us} from a benchmark result's evaluation.timings."""
    out = {}
    for t in _ev(r).get("timings") or []:
        if isinstance(t, dict) and isinstance(t.get("median_us"), (int, float)):
            out[t.get("workload")] = float(t["median_us"])
    return out


def per_workload_speedups(r):
    out = {}
    for t in _ev(r).get("timings") or []:
        if isinstance(t, dict):
            out[t.get("workload")] = {k: t.get(k) for k in ("speedup_vs_eager", "speedup_vs_compile",
                                                             "eager_median_us", "compile_median_us",
                                                             "roofline_fraction")}
    return out


def is_correct(r):
    ev = _ev(r)
    if ev.get("status") != "ok":
        return False
    cs = ev.get("correctness") or []
    return bool(cs) and all(isinstance(c, dict) and c.get("passed") for c in cs)


def geo_speedup(r):
    v = _ev(r).get("speedup_vs_eager")
    return float(v) if isinstance(v, (int, float)) else None


def refine_over(r):
    if is_err(r):
        return False
    rf = r.get("refine")
    return bool(isinstance(rf, dict) and rf.get("over"))


def summary(tag, r):
    s = {"tag": tag, "attempt": attempt_id_of(r), "candidate": None if is_err(r) else r.get("candidate_id"),
         "correct": is_correct(r), "status": _ev(r).get("status"), "error": (r.get("error") if is_err(r) else _ev(r).get("error")),
         "medians": per_workload_medians(r), "geo": geo_speedup(r), "per_wl": per_workload_speedups(r)}
    print("@@@ SUMMARY " + _json.dumps(s))
    return s


# --------------------------------------------------------------------------------------------------
# Kernel sources
# --------------------------------------------------------------------------------------------------

ROW_KERNELS = r'''
@triton.jit
def _lsm_rows(x_ptr, y_ptr, M, N, stride_x, stride_y,
              BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    # ROWS rows per program, each whole row in registers: one HBM read, one HBM write.
    pid = tl.program_id(0)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    rmask = rows < M
    cmask = cols < N
    mask = rmask[:, None] & cmask[None, :]
    rows64 = rows.to(tl.int64)
    x = tl.load(x_ptr + rows64[:, None] * stride_x + cols[None, :], mask=mask,
                other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=1)
    m = tl.where(rmask, m, 0.0)          # rows past M: keep the arithmetic finite
    z = x - m[:, None]
    s = tl.sum(tl.exp(z), axis=1)
    s = tl.where(rmask, s, 1.0)
    y = z - tl.log(s)[:, None]
    tl.store(y_ptr + rows64[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _lsm_row(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    # One program per row, the whole row in registers: one HBM read, one HBM write.
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
    m = tl.max(x, axis=0)
    z = x - m
    s = tl.sum(tl.exp(z), axis=0)
    y = z - tl.log(s)
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _lsm_row_persistent(x_ptr, y_ptr, M, N, stride_x, stride_y, BLOCK_N: tl.constexpr):
    # A grid of a few programs per SM, each looping over rows (whole row in registers).
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    for r in range(pid, M, nprog):
        row = r.to(tl.int64)
        x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=-float("inf")).to(tl.float32)
        m = tl.max(x, axis=0)
        z = x - m
        s = tl.sum(tl.exp(z), axis=0)
        y = z - tl.log(s)
        tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)
'''

CHUNK_KERNEL = r'''
@triton.jit
def _lsm_chunked(x_ptr, y_ptr, N, stride_x, stride_y, BLOCK_N: tl.constexpr, EVICT: tl.constexpr):
    # Any row length: sweep 1 keeps a per-lane online (max, sum-exp) over chunks; sweep 2 re-reads
    # the row (from L2 when it stayed there) and writes x - logsumexp.
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    offs = tl.arange(0, BLOCK_N)
    m_i = tl.full([BLOCK_N], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        if EVICT:
            x = tl.load(x_row + cols, mask=cols < N, other=-float("inf"),
                        eviction_policy="evict_last").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=cols < N, other=-float("inf")).to(tl.float32)
        m_new = tl.maximum(m_i, x)
        live = m_new > -float("inf")
        alpha = tl.where(live, tl.exp(m_i - m_new), 0.0)
        p = tl.where(live, tl.exp(x - m_new), 0.0)
        l_i = l_i * alpha + p
        m_i = m_new
    m = tl.max(m_i, axis=0)
    l_i = tl.where(m_i > -float("inf"), l_i * tl.exp(m_i - m), 0.0)
    lse = m + tl.log(tl.sum(l_i, axis=0))
    for start in range(0, N, BLOCK_N):
        cols = start + offs
        mask = cols < N
        if EVICT:
            x = tl.load(x_row + cols, mask=mask, other=0.0, eviction_policy="evict_first").to(tl.float32)
        else:
            x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_row + cols, (x - lse).to(y_ptr.dtype.element_ty), mask=mask)
'''

HEADER = '''"""{doc}"""
import torch
import triton
import triton.language as tl

'''

FORWARD_COMMON = r'''

_SM_COUNT = {}


def _sm_count(device):
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def _launch_chunked(x2, y, M, N):
    block = min(CHUNK_N, triton.next_power_of_2(N))
    _lsm_chunked[(M,)](x2, y, N, x2.stride(0), y.stride(0), BLOCK_N=block, EVICT=EVICT_HINTS,
                       num_warps=NUM_WARPS_CHUNK)
'''


def fused_module(doc, p):
    """Whole row in registers for N <= MAX_FUSED_N (optionally ROWS rows per program for short rows, or a
    persistent grid); the chunked two-sweep kernel beyond."""
    consts = f'''MAX_FUSED_N = {p["MAX_FUSED_N"]}
NUM_WARPS_SHORT = {p["NUM_WARPS_SHORT"]}
NUM_WARPS_MID = {p["NUM_WARPS_MID"]}
NUM_WARPS_LONG = {p["NUM_WARPS_LONG"]}
ROWS_SHORT = {p["ROWS_SHORT"]}
PERSISTENT = {p["PERSISTENT"]}
PROGS_PER_SM_SHORT = {p["PROGS_PER_SM_SHORT"]}
PROGS_PER_SM_LONG = {p["PROGS_PER_SM_LONG"]}
CHUNK_N = {p["CHUNK_N"]}
NUM_WARPS_CHUNK = {p["NUM_WARPS_CHUNK"]}
EVICT_HINTS = {p["EVICT_HINTS"]}
TUNABLES = {{
    "MAX_FUSED_N": [16384, 32768],
    "NUM_WARPS_SHORT": [2, 4, 8, 16],
    "NUM_WARPS_MID": [8, 16, 32],
    "NUM_WARPS_LONG": [8, 16, 32],
    "ROWS_SHORT": [1, 2, 4, 8],
    "PERSISTENT": [False, True],
    "PROGS_PER_SM_SHORT": [2, 4, 8, 16],
    "PROGS_PER_SM_LONG": [1, 2],
    "CHUNK_N": [2048, 4096, 8192],
    "NUM_WARPS_CHUNK": [4, 8, 16],
    "EVICT_HINTS": [False, True],
}}
'''
    model = r'''

class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        N = shape[-1]
        x2 = x.reshape(-1, N)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        M = x2.shape[0]
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M == 0 or N == 0:
            return y.reshape(shape)
        block = triton.next_power_of_2(N)
        if block > MAX_FUSED_N:
            _launch_chunked(x2, y, M, N)
        elif block <= 4096:
            if PERSISTENT:
                grid = min(M, _sm_count(x.device) * PROGS_PER_SM_SHORT)
                _lsm_row_persistent[(grid,)](x2, y, M, N, x2.stride(0), y.stride(0), BLOCK_N=block,
                                             num_warps=NUM_WARPS_SHORT)
            elif ROWS_SHORT > 1:
                _lsm_rows[(triton.cdiv(M, ROWS_SHORT),)](x2, y, M, N, x2.stride(0), y.stride(0), BLOCK_N=block,
                                                         ROWS=ROWS_SHORT, num_warps=NUM_WARPS_SHORT)
            else:
                _lsm_row[(M,)](x2, y, N, x2.stride(0), y.stride(0), BLOCK_N=block, num_warps=NUM_WARPS_SHORT)
        else:
            nw = NUM_WARPS_MID if block <= 16384 else NUM_WARPS_LONG
            if PERSISTENT:
                grid = min(M, _sm_count(x.device) * PROGS_PER_SM_LONG)
                _lsm_row_persistent[(grid,)](x2, y, M, N, x2.stride(0), y.stride(0), BLOCK_N=block, num_warps=nw)
            else:
                _lsm_row[(M,)](x2, y, N, x2.stride(0), y.stride(0), BLOCK_N=block, num_warps=nw)
        return y.reshape(shape)
'''
    return HEADER.format(doc=doc) + consts + ROW_KERNELS + CHUNK_KERNEL + FORWARD_COMMON + model


def chunked_module(doc, p):
    consts = f'''CHUNK_N = {p["CHUNK_N"]}
NUM_WARPS_CHUNK = {p["NUM_WARPS_CHUNK"]}
EVICT_HINTS = {p["EVICT_HINTS"]}
TUNABLES = {{
    "CHUNK_N": [1024, 2048, 4096, 8192],
    "NUM_WARPS_CHUNK": [4, 8, 16],
    "EVICT_HINTS": [False, True],
}}
'''
    model = r'''

class ModelNew(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shape = x.shape
        N = shape[-1]
        x2 = x.reshape(-1, N)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        M = x2.shape[0]
        y = torch.empty((M, N), dtype=x.dtype, device=x.device)
        if M == 0 or N == 0:
            return y.reshape(shape)
        _launch_chunked(x2, y, M, N)
        return y.reshape(shape)
'''
    return HEADER.format(doc=doc) + consts + CHUNK_KERNEL + FORWARD_COMMON + model


BASE_P = dict(MAX_FUSED_N=32768, NUM_WARPS_SHORT=8, NUM_WARPS_MID=16, NUM_WARPS_LONG=16, ROWS_SHORT=1,
              PERSISTENT=False, PROGS_PER_SM_SHORT=8, PROGS_PER_SM_LONG=1, CHUNK_N=4096, NUM_WARPS_CHUNK=8,
              EVICT_HINTS=True)

# --------------------------------------------------------------------------------------------------
# Phase 0: analysis and first intents
# --------------------------------------------------------------------------------------------------

ANALYSIS = """log_softmax over the last dim of fp32 [M,N]: y = x - max(x) - log(sum(exp(x - max))). ~5 FLOP/elem,
min bytes = 8 B/elem (read x once, write y once): 8192x32768 -> 2.15 GB, 32768x4096 -> 1.07 GB; AI ~0.6 FLOP/B,
far under the H200 ridge (~14 FLOP/B fp32), so HBM-bound. Floor at the measured ~4.2-4.5 TB/s: ~480-510 us
and ~240-255 us; held-out 4096x50257 (ragged, 196 KB rows) 1.65 GB -> ~370-390 us.
Regimes: long rows (128 KB, 8192 rows = 62 rows per SM) vs short rows (16 KB, 32768 rows, 248 per SM);
held-out is non-power-of-2 and longer than any register-resident row (65536-wide block = 256 KB/row).
Where eager likely loses: PyTorch's softmax kernel keeps a row in shared memory only when it fits the 48 KB
default (N=4096 yes: one read; N=32768 no: max, sum and write passes re-read x -> up to 3 reads, part from L2).
So expect eager near the floor on 32768x4096 and 1.5-2.5x above it on 8192x32768. torch.compile likely emits a
looped online reduction + second write loop: 2 reads, i.e. ~1.5x the minimum bytes unless L2 catches the re-read.
Plan: single HBM read with the whole row in registers (BLOCK_N = next_pow2(N) <= 32768, 16-32 warps for
32768: 32-64 fp32/thread); chunked two-sweep online kernel (evict_last on sweep 1 so sweep 2 hits L2) for
longer rows. Unsure: register pressure/spills at BLOCK_N=32768; whether 1 program/SM residency for long rows
leaves enough bytes in flight; how much of a 2nd sweep L2 (50 MB) absorbs with ~132-264 rows of 128 KB live;
exp/log approximations are far inside 1e-4 (|y| ~ 10)."""

INTENTS = [
    dict(title="keep each row in registers: one program per row, single HBM read and write",
         rationale="Eager re-reads long rows (no smem caching above 48 KB); a register-resident row needs one read "
                   "of x and one write of y, the 8 B/elem minimum. BLOCK_N=next_pow2(N) up to 32768 with 16-32 "
                   "warps keeps 32-64 fp32 per thread; rows beyond fall back to a chunked two-sweep kernel.",
         priority=0.95, difficulty=2, expected_speedup=1.4,
         notes="Refuted if 8192x32768 stays >1.3x above ~500 us (spills or too few bytes in flight with one "
               "512-1024-thread program per SM), or if 32768x4096 is no faster than eager.",
         params={"NUM_WARPS_SHORT": 8, "NUM_WARPS_LONG": 16, "MAX_FUSED_N": 32768}),
    dict(title="fuse max and sum into one online sweep over chunks, then a write sweep that re-reads from L2",
         rationale="Bounded registers for any N (held-out 50257 cannot stay in registers): per-lane online "
                   "(max, sum-exp) in one read, then x - lse in a second sweep. With evict_last on sweep 1 and "
                   "evict_first on sweep 2 the re-read should mostly hit L2, so HBM traffic stays near 8 B/elem.",
         priority=0.6, difficulty=2, expected_speedup=1.2,
         notes="Refuted if it is >1.25x slower than the register-resident kernel on 8192x32768 (the re-read goes "
               "to HBM), or if the eviction hints change nothing.",
         params={"CHUNK_N": 4096, "NUM_WARPS_CHUNK": 8, "EVICT_HINTS": True}),
    dict(title="pack several short rows into one program as a 2D [ROWS, BLOCK_N] tile",
         rationale="On 32768x4096 each program moves only 16 KB: packing 2-4 rows per program raises bytes in "
                   "flight per program and halves/quarters program count and per-row reduction overhead.",
         priority=0.5, difficulty=2, expected_speedup=1.05,
         notes="Refuted if 32768x4096 does not move beyond noise versus one row per program.",
         params={"ROWS_SHORT": 2}),
    dict(title="launch a persistent grid of a few programs per SM that loop over rows",
         rationale="Removes block scheduling/tail effects and per-program prologue; lets the next row's load "
                   "be issued while the current row reduces (more overlap per SM).",
         priority=0.4, difficulty=2, expected_speedup=1.03,
         notes="Refuted if neither workload improves beyond noise; a tail effect is small with 62-248 rows/SM.",
         params={"PERSISTENT": True, "PROGS_PER_SM_SHORT": 8, "PROGS_PER_SM_LONG": 1}),
    dict(title="split each long row across several programs (partial max/sum, then combine)",
         rationale="For few, very long rows (held-out 50257 wide) a single program per row may not keep enough "
                   "bytes in flight; splitting the row over programs raises parallelism at the cost of a small "
                   "combine pass.",
         priority=0.25, difficulty=4, expected_speedup=1.1,
         notes="Only matters where M/#SMs is small; refuted if held-out does not beat the chunked fallback."),
    dict(title="use streaming cache hints on the write (evict_first stores) and wider vector accesses",
         rationale="y is never re-read: evict_first stores keep L2 for x (the second sweep in chunked variants) "
                   "and avoid write-allocate pollution; 128-bit accesses cut instruction count per byte.",
         priority=0.3, difficulty=1, expected_speedup=1.02,
         notes="Refuted if no workload moves beyond noise."),
    dict(title="compute in base 2 (exp2/log2 with a pre-scaled input) to shorten the instruction mix",
         rationale="ex2.approx and lg2.approx are the native SFU ops; tl.exp adds a multiply per element. Only "
                   "matters if the register-resident kernel turns out issue-bound rather than HBM-bound.",
         priority=0.15, difficulty=1, expected_speedup=1.01,
         notes="Refuted if the profile shows DRAM throughput already >85% of peak."),
]

info()

r = call("propose_intents", {"search": S, "intents": INTENTS, "author": AUTHOR,
                             "reason": "first intents from the roofline analysis"})
ids = {}
for d in walk(r):
    if isinstance(d.get("title"), str) and isinstance(d.get("id"), int):
        ids[d["title"]] = d["id"]
if len(ids) < len(INTENTS):
    t = call("get_tree", {"search": S, "format": "json"})
    for d in walk(t):
        if isinstance(d.get("title"), str) and isinstance(d.get("id"), int):
            ids.setdefault(d["title"], d["id"])
print("@@@ INTENT IDS " + _json.dumps(ids))
ID_FUSED = ids.get(INTENTS[0]["title"])
ID_CHUNK = ids.get(INTENTS[1]["title"])
ID_ROWS = ids.get(INTENTS[2]["title"])
ID_PERSIST = ids.get(INTENTS[3]["title"])
ID_SPLIT = ids.get(INTENTS[4]["title"])
ID_HINTS = ids.get(INTENTS[5]["title"])
ID_EXP2 = ids.get(INTENTS[6]["title"])

call("edit_tree", {"search": S, "author": AUTHOR, "reason": "analysis as the root's notes",
                   "edits": [{"op": "update", "node_id": 1, "notes": ANALYSIS}]})

# A quick functional check of the chunked fallback (multi-chunk, ragged last chunk) on the smoke workload:
# records nothing; the search workloads never send a row through it.
_p = dict(BASE_P, MAX_FUSED_N=1024, CHUNK_N=512, NUM_WARPS_CHUNK=4)
call("run_correctness", {"search": S, "workloads": ["smoke"], "trials": 1,
                         "candidate": {"source": fused_module("fallback check: chunked path forced", _p)}})


def clean(edits):
    return [e for e in edits if e.get("node_id")]


def better(a, b):
    """True when result summary a is faster than b on the geometric mean of the search workloads."""
    if not a or not a["correct"]:
        return False
    if not b or not b["correct"]:
        return True
    ka, kb = a["medians"], b["medians"]
    common = [w for w in WL if w in ka and w in kb]
    if common:
        return sum(_math.log(ka[w] / kb[w]) for w in common) < 0
    if a["geo"] is not None and b["geo"] is not None:
        return a["geo"] > b["geo"]
    return False


def run_intent(node_id, cands, label, base=None):
    """cands: list of functions (history -> (doc, params, builder) or None). Benchmarks each; stops early when
    the loop says reflect. Returns the list of (params, summary, raw result)."""
    hist = []
    sel = call("select_action", {"search": S, "node_id": node_id})
    if is_err(sel):
        print(f"@@@ select_action for {label} failed; skipping")
        return hist, sel
    prompt("implement_intent", {"search": S, "node_id": str(node_id)})
    for k, make in enumerate(cands):
        spec = make(hist)
        if spec is None:
            continue
        doc, params, builder = spec
        src = builder(doc, params)
        args = {"search": S, "node_id": node_id, "author": AUTHOR, "candidate": {"source": src}}
        best = best_of(hist)
        if best is not None and best[1]["attempt"] is not None:
            args["base_attempt_id"] = best[1]["attempt"]
        elif base:
            args["base_attempt_id"] = base
        res = call("benchmark", args)
        s = summary(f"{label}#{k + 1} {params}", res)
        hist.append((params, s, res))
        if refine_over(res):
            print("@@@ loop says reflect; stopping this intent")
            break
    return hist, sel


def best_of(hist):
    b = None
    for h in hist:
        if h[1]["correct"] and (b is None or better(h[1], b[1])):
            b = h
    return b


BYTES = {"8192x32768": 8192 * 32768 * 8, "32768x4096": 32768 * 4096 * 8}
PEAK = 4.48e12   # ksearch's measured best-of copy/read/write on the H200


def bw_frac(s):
    return {w: round(BYTES[w] / (s["medians"][w] * 1e-6) / PEAK, 3) for w in WL if w in s["medians"]}


def fmt_hist(hist):
    parts = []
    for params, s, _ in hist:
        med = ", ".join(f"{w} {v:.4g}" for w, v in s["medians"].items())
        sp = ", ".join(f"{w} x{(v or {}).get('speedup_vs_eager')} eager / x{(v or {}).get('speedup_vs_compile')} compile"
                       for w, v in s["per_wl"].items() if w in WL)
        parts.append(f"attempt {s['attempt']}: {'correct' if s['correct'] else 'NOT correct (' + str(s['status']) + ')'}; "
                     f"median us {med}; {sp}; of {PEAK / 1e12} TB/s {bw_frac(s)}")
    return " | ".join(parts)


# --------------------------------------------------------------------------------------------------
# Intent A: register-resident rows
# --------------------------------------------------------------------------------------------------

def a1(h):
    return ("log_softmax, whole row in registers, one program per row; 8 warps for N<=4096, 16 for N=32768.",
            dict(BASE_P), fused_module)


def a2(h):
    return ("log_softmax, whole row in registers; 4 warps for N<=4096 (more resident programs), 32 warps for "
            "N=32768 (32 fp32 per thread instead of 64, no spill risk).",
            dict(BASE_P, NUM_WARPS_SHORT=4, NUM_WARPS_LONG=32), fused_module)


def a3(h):
    # Per workload, take the warp count that measured faster; if that repeats a measured config, step the
    # short-row warp count further in its winning direction.
    p = dict(BASE_P)
    ok = [x for x in h if x[1]["correct"]]
    if len(ok) >= 2:
        m1, m2 = ok[0][1]["medians"], ok[1][1]["medians"]
        w_long, w_short = WL
        if w_long in m1 and w_long in m2:
            p["NUM_WARPS_LONG"] = ok[0][0]["NUM_WARPS_LONG"] if m1[w_long] <= m2[w_long] else ok[1][0]["NUM_WARPS_LONG"]
        if w_short in m1 and w_short in m2:
            p["NUM_WARPS_SHORT"] = ok[0][0]["NUM_WARPS_SHORT"] if m1[w_short] <= m2[w_short] else ok[1][0]["NUM_WARPS_SHORT"]
        seen = [(x[0]["NUM_WARPS_SHORT"], x[0]["NUM_WARPS_LONG"]) for x in ok]
        if (p["NUM_WARPS_SHORT"], p["NUM_WARPS_LONG"]) in seen:
            p["NUM_WARPS_SHORT"] = 16 if p["NUM_WARPS_SHORT"] == 8 else 2
        doc = (f"log_softmax, whole row in registers; per-workload best warp counts of the first two attempts "
               f"(short {p['NUM_WARPS_SHORT']}, long {p['NUM_WARPS_LONG']}).")
    elif len(ok) == 1:
        p = dict(ok[0][0])
        p["NUM_WARPS_LONG"] = 32 if p["NUM_WARPS_LONG"] == 16 else 16
        doc = "log_softmax, whole row in registers; the correct attempt with the other long-row warp count."
    else:
        # nothing correct so far: the safest form, 2D-free, moderate warps
        p = dict(BASE_P, NUM_WARPS_LONG=32, NUM_WARPS_MID=16, NUM_WARPS_SHORT=8)
        doc = "log_softmax, whole row in registers; retry with 32 warps for long rows."
    return (doc, p, fused_module)


histA, selA = run_intent(ID_FUSED, [a1, a2, a3], "A")
bestA = best_of(histA)
bestA_p = dict(bestA[0]) if bestA else dict(BASE_P)
bestA_att = bestA[1]["attempt"] if bestA else None
print(f"@@@ best A: {bestA_att} {bestA_p} bandwidth fraction {bw_frac(bestA[1]) if bestA else None}")

editsA = [{"op": "update", "node_id": ID_FUSED,
           "notes": ("Measured (median per workload): " + fmt_hist(histA) +
                     f". Best params {dict((k, bestA_p[k]) for k in ('NUM_WARPS_SHORT', 'NUM_WARPS_LONG'))}.")[:3900]}]
for nid in (ID_ROWS, ID_PERSIST, ID_HINTS, ID_EXP2):
    if nid and bestA_att:
        editsA.append({"op": "update", "node_id": nid, "base_attempt_id": bestA_att,
                       "reason": "build on the register-resident kernel's best attempt"})
newA = []
if bestA_att:
    newA.append(dict(title="dispatch warp counts per row-length class from measured per-workload bests",
                     rationale="The first attempts show each row length wants its own warp count; tune "
                               "NUM_WARPS_MID (8K-16K rows, not yet measured) and MAX_FUSED_N for the held-out class.",
                     priority=0.35, difficulty=1, expected_speedup=1.02, parent_id=ID_FUSED,
                     base_attempt_id=bestA_att, params={"NUM_WARPS_MID": [8, 16, 32]}))
fa = call("finish_intent", {"search": S, "node_id": ID_FUSED, "author": AUTHOR, "edits": clean(editsA),
                            "new_intents": newA,
                            "reason": "register-resident rows measured; re-base the follow-ups on its best attempt"})
if is_err(fa):
    # retry the close without the edits, then apply them apart so the loop goes on
    fa = call("finish_intent", {"search": S, "node_id": ID_FUSED, "author": AUTHOR})
    call("edit_tree", {"search": S, "author": AUTHOR, "edits": clean(editsA), "reason": "after intent A"})

# --------------------------------------------------------------------------------------------------
# Intent B: chunked two-sweep online kernel for every N
# --------------------------------------------------------------------------------------------------

def b1(h):
    return ("log_softmax, chunked: online per-lane (max, sum-exp) sweep, then a write sweep; 4096-wide chunks, "
            "8 warps, evict_last on sweep 1 / evict_first on sweep 2.",
            dict(CHUNK_N=4096, NUM_WARPS_CHUNK=8, EVICT_HINTS=True), chunked_module)


def b2(h):
    return ("log_softmax, chunked two-sweep with 8192-wide chunks and 16 warps (more bytes in flight per "
            "program), eviction hints on.",
            dict(CHUNK_N=8192, NUM_WARPS_CHUNK=16, EVICT_HINTS=True), chunked_module)


def b3(h):
    ok = [x for x in h if x[1]["correct"]]
    if len(ok) >= 2 and better(ok[1][1], ok[0][1]):
        # the wider chunk / fewer resident rows won: one step further (16384-wide, 16 warps: ~1 row per SM,
        # the live rows' footprint well inside L2)
        p = dict(CHUNK_N=16384, NUM_WARPS_CHUNK=16, EVICT_HINTS=True)
        doc = ("log_softmax, chunked two-sweep with 16384-wide chunks (16 warps): fewer rows resident per SM so "
               "the rows being re-read stay in L2.")
    else:
        b = best_of(h)
        p = dict(b[0]) if b else dict(CHUNK_N=4096, NUM_WARPS_CHUNK=8, EVICT_HINTS=True)
        p["EVICT_HINTS"] = False
        doc = ("log_softmax, chunked two-sweep, the better chunk of the first two attempts without eviction hints "
               "(measures what the hints are worth).")
    return (doc, p, chunked_module)


histB, selB = run_intent(ID_CHUNK, [b1, b2, b3], "B")
bestB = best_of(histB)
bestB_p = dict(bestB[0]) if bestB else None
print(f"@@@ best B: {bestB[1]['attempt'] if bestB else None} {bestB_p}")

editsB = [{"op": "update", "node_id": ID_CHUNK,
           "notes": ("Measured (median per workload): " + fmt_hist(histB) + f". Best chunk params {bestB_p}. "
                     "This kernel is the register kernel's fallback for N > MAX_FUSED_N (held-out 50257).")[:3900]}]
if bestB and bestA and better(bestB[1], bestA[1]):
    # surprise: the chunked kernel is faster than register rows: make the follow-ups build on it
    for nid in (ID_ROWS, ID_PERSIST):
        if nid:
            editsB.append({"op": "update", "node_id": nid, "priority": 0.3,
                           "reason": "the chunked kernel beat the register-resident one"})
fb = call("finish_intent", {"search": S, "node_id": ID_CHUNK, "author": AUTHOR, "edits": clean(editsB),
                            "reason": "chunked two-sweep measured against the register-resident rows"})
if is_err(fb):
    fb = call("finish_intent", {"search": S, "node_id": ID_CHUNK, "author": AUTHOR})
    call("edit_tree", {"search": S, "author": AUTHOR, "edits": clean(editsB), "reason": "after intent B"})

# Better fallback settings for the register kernel (used beyond MAX_FUSED_N) from what B measured
if bestB_p:
    for k in ("CHUNK_N", "NUM_WARPS_CHUNK", "EVICT_HINTS"):
        bestA_p[k] = bestB_p[k]

# --------------------------------------------------------------------------------------------------
# Intent C: several short rows per program (on A's best), then a persistent grid
# --------------------------------------------------------------------------------------------------

def c1(h):
    p = dict(bestA_p, ROWS_SHORT=2, PERSISTENT=False)
    p["NUM_WARPS_SHORT"] = min(16, 2 * bestA_p["NUM_WARPS_SHORT"])
    return ("log_softmax, whole rows in registers; rows of <=4096 packed 2 per program as a [2, BLOCK_N] tile "
            f"({p['NUM_WARPS_SHORT']} warps: the same elements per thread as the best one-row kernel).", p, fused_module)


def c2(h):
    p = dict(bestA_p, ROWS_SHORT=4, PERSISTENT=False)
    p["NUM_WARPS_SHORT"] = min(16, 4 * bestA_p["NUM_WARPS_SHORT"])
    return ("log_softmax, whole rows in registers; rows of <=4096 packed 4 per program "
            f"({p['NUM_WARPS_SHORT']} warps).", p, fused_module)


def c3(h):
    b = best_of(h)
    if b and bestA and better(b[1], bestA[1]):
        # packing helped: one more step in the direction that measured faster
        p = dict(b[0])
        if p["ROWS_SHORT"] == 2:
            p["NUM_WARPS_SHORT"] = max(2, p["NUM_WARPS_SHORT"] // 2)
            doc = "log_softmax, 2 short rows per program with half the warps (twice the elements per thread)."
        else:
            p["ROWS_SHORT"] = 8
            p["NUM_WARPS_SHORT"] = 16
            doc = "log_softmax, 8 short rows per program, 16 warps."
        return (doc, p, fused_module)
    # packing with more warps did not help: pack 2 rows keeping the best one-row warp count
    p = dict(bestA_p, ROWS_SHORT=2, PERSISTENT=False)
    return ("log_softmax, 2 short rows per program with the best one-row kernel's warp count "
            f"({p['NUM_WARPS_SHORT']}): twice the elements per thread, half the programs.", p, fused_module)


histC, selC = run_intent(ID_ROWS, [c1, c2, c3], "C", base=bestA_att)
bestC = best_of(histC)
print(f"@@@ best C: {bestC[1]['attempt'] if bestC else None} {bestC[0] if bestC else None}")
editsC = [{"op": "update", "node_id": ID_ROWS,
           "notes": ("Measured (median per workload): " + fmt_hist(histC) + ". Built on the best register-resident "
                     f"attempt {bestA_att}.")[:3900]}]
best_all = best_of([x for x in [bestA, bestC] if x])
if best_all:
    fr = bw_frac(best_all[1])
    if ID_PERSIST:
        editsC.append({"op": "update", "node_id": ID_PERSIST, "base_attempt_id": best_all[1]["attempt"],
                       "priority": 0.6 if fr.get(WL[1], 1) < 0.85 else 0.3,
                       "reason": f"best so far reaches {fr} of {PEAK / 1e12} TB/s"})
    if ID_SPLIT:
        editsC.append({"op": "update", "node_id": ID_SPLIT,
                       "priority": 0.5 if fr.get(WL[0], 1) < 0.8 else 0.2,
                       "reason": f"long rows reach {fr.get(WL[0])} of peak with one row per SM at a time"})
fc = call("finish_intent", {"search": S, "node_id": ID_ROWS, "author": AUTHOR, "edits": clean(editsC),
                            "reason": "row packing measured against one row per program"})
if is_err(fc):
    fc = call("finish_intent", {"search": S, "node_id": ID_ROWS, "author": AUTHOR})
    call("edit_tree", {"search": S, "author": AUTHOR, "edits": clean(editsC), "reason": "after intent C"})

# --------------------------------------------------------------------------------------------------
# Final evaluation
# --------------------------------------------------------------------------------------------------
fe = call("final_evaluation", {"search": S, "top_k": 3})
if is_err(fe):
    print("@@@ final_evaluation refused; asking the loop what it wants")
    call("select_action", {"search": S, "claim": False})
    call("set_budgets", {"search": S, "rounds": 3, "author": AUTHOR})
    fe = call("final_evaluation", {"search": S, "top_k": 3})
call("get_tree", {"search": S, "format": "text", "budget_chars": 12000})

# Last (informative only): Nsight Compute on the best register-resident kernel, long rows
if bestA and bestA[1].get("candidate"):
    call("profile_ncu", {"search": S, "candidate": {"candidate_id": bestA[1]["candidate"]}, "workload": WL[0]})
