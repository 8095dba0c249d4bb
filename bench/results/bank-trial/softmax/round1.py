# Round 1: seed, analysis + first intents, intent A (row in registers) and intent B (online two-pass), 3 candidates each.
import json, math, re

S = "softmax"
AUTHOR = "llm:claude"

def show(label, r, keys=None):
    print(f"### {label}")
    if isinstance(r, dict) and "error" in r:
        print("ERROR:", r["error"])
    elif keys:
        print(json.dumps({k: r.get(k) for k in keys}, indent=1, default=str)[:4000])

def medians(r):
    """workload name -> median (us or whatever unit), from a benchmark result, searched generically."""
    out = {}
    def walk(o):
        if isinstance(o, dict):
            name = o.get("workload") or o.get("name")
            med = None
            for k in ("median_us", "median_ms", "median", "median_s"):
                if isinstance(o.get(k), (int, float)):
                    med = o[k]; break
            if isinstance(name, str) and med is not None:
                out.setdefault(name, med)
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(r)
    return out

def set_const(src, name, value):
    new, n = re.subn(rf"^{name} = .*$", f"{name} = {value}", src, flags=re.M)
    assert n == 1, name
    return new

# ---------------- seed ----------------
seed = call("benchmark", {"search": S, "node_id": 2, "candidate": {"seed": True, "language": "triton"}})
seed_id = seed.get("attempt_id") if isinstance(seed, dict) else None
print("SEED KEYS:", list(seed.keys()) if isinstance(seed, dict) else seed)
print("SEED medians:", medians(seed))

# ---------------- analysis + intents ----------------
ANALYSIS = """Row softmax over the last dim, fp32, y = exp(x - rowmax) / sum. Per element 1 read + 1 write (8 B) and ~4 FLOP: 0.5 FLOP/B, deep under the memory roofline of the H200 (4.8 TB/s peak; ksearch measured copy 4.2, best 4.48 TB/s).
Floors: 8192x32768: 268M elts, 2.15 GB -> ~450 us at 4.8 TB/s, ~480-510 us at the measured ceilings. 32768x4096: 134M elts, 1.07 GB -> ~225 / 240-255 us. Held-out 4096x50257: 1.65 GB -> ~345 / 370-390 us; ragged N (rows not 16-B aligned, no 128-bit vector loads) and too long for a register-resident row.
Regimes: short rows (16 KB, N=4096: many CTAs per SM, reductions cheap) vs long rows (128 KB, N=32768: a register-resident row needs a whole SM's register file, so 1 CTA/SM and exposed reduction bubbles) vs very long ragged rows (200 KB, N=50257).
Eager was measured at 0.85 ms / 0.46 ms on an H200 (docs), i.e. ~2.5 / 2.3 TB/s: ~55% of peak, so ~1.6-1.8x over eager is the ceiling.
Seed: 3 passes (max, sum, write) = 3 reads + 1 write; for 16 KB rows the re-reads hit L1/L2 (cost: load instructions, latency), for 128 KB rows with several CTAs/SM the L2 working set (132 SMs x k x 128 KB) nears the 50 MB L2 and re-reads partly go to HBM. Also BLOCK_N 2048 with 8 warps = 8 elts/thread per load: few bytes in flight per iteration.
Unsure: whether 1 CTA/SM (register-resident 32K row) keeps HBM busy; whether 2 exps/elt of the online pass matter (MUFU at ~40% of its rate at the roofline); how much of the re-read hits L2."""

INTENTS = [
    {"title": "keep the whole row in registers: one HBM read, one write",
     "rationale": "BLOCK_N = next_pow2(N) loads the row once into registers (N<=32768); max, exp, sum and the store work on chip. Cuts HBM bytes from up to 16 B/elt (seed re-reads) to the 8 B/elt floor and removes 2 of 3 load passes. Rows too long for registers (held-out 50257) fall back to an online two-pass loop.",
     "priority": 0.9, "difficulty": 2, "expected_speedup": 1.4,
     "notes": "Refuted if 8192x32768 is not faster than the seed (1 CTA/SM and reduction bubbles would then dominate) or if it spills.",
     "params": {"MAX_REG_N": 32768}},
    {"title": "fuse the max and sum passes into one online-softmax read pass",
     "rationale": "Running per-lane max and rescaled sum in one pass, then one write pass: 2 reads + 1 write instead of 3 + 1, with many small CTAs per SM (good latency hiding) and the second read mostly from L2. Shape-agnostic, works for any N including ragged long rows.",
     "priority": 0.7, "difficulty": 2, "expected_speedup": 1.2,
     "notes": "Refuted if it is not faster than the seed on 8192x32768 (then the seed's re-reads already hit L2 and the cost is elsewhere) or if the 2 exps/elt make it compute-bound (check with ncu).",
     "params": {"CHUNK_N": 4096, "CHUNK_WARPS": 8}},
    {"title": "process several short rows per program as a 2-D tile",
     "rationale": "For N=4096 (16 KB rows), a [ROWS, BLOCK_N] tile per program amortizes the reduction/sync overhead and launches fewer CTAs; more bytes in flight per CTA.",
     "priority": 0.45, "difficulty": 2, "expected_speedup": 1.05,
     "notes": "Refuted if 32768x4096 does not move beyond noise versus one row per program.",
     "params": {"ROWS": 2}},
    {"title": "persistent grid: one program per SM loops over rows, prefetching the next row",
     "rationale": "Overlaps the next row's loads with the current row's reductions and stores, hiding the bubbles a register-resident row leaves when only 1 CTA fits per SM (N=32768).",
     "priority": 0.5, "difficulty": 3, "expected_speedup": 1.1,
     "notes": "Refuted if no faster than the register-resident kernel on 8192x32768; register pressure of two rows may force splitting the row."},
    {"title": "split each long row across several CTAs (partial max/sum, then normalize)",
     "rationale": "Gives more CTAs per SM for 128-200 KB rows at the cost of a second read (from L2 if scheduled close) and a tiny partials buffer; targets the held-out 50257 row and the 1-CTA/SM limit.",
     "priority": 0.25, "difficulty": 4, "expected_speedup": 1.05,
     "notes": "Likely loses to single-CTA rows because of the extra read; refuted if L2 hit rate of the second read is low."},
    {"title": "cache hints: stream the write and the last read, keep the first read in L2",
     "rationale": "evict_first on the last read and on stores, evict_last on the first read of a two-pass kernel, so the re-read finds its row in L2 instead of HBM.",
     "priority": 0.35, "difficulty": 1, "expected_speedup": 1.03,
     "notes": "Only matters for multi-pass kernels; refuted if no change beyond noise."},
]

r = call("edit_tree", {"search": S, "author": AUTHOR, "reason": "analysis of the task and the seed",
                       "edits": [{"op": "update", "node_id": 2, "notes": ANALYSIS}]})
show("edit_tree root", r)
pi = call("propose_intents", {"search": S, "author": AUTHOR, "reason": "first intents from the analysis", "intents": INTENTS})
print("PROPOSE KEYS:", list(pi.keys()) if isinstance(pi, dict) else pi)
print(json.dumps(pi, default=str)[:3000])

def find_ids(res):
    ids = []
    if isinstance(res, dict):
        for k in ("result", "ids", "node_ids", "created", "intents", "nodes"):
            v = res.get(k)
            if isinstance(v, list):
                for it in v:
                    if isinstance(it, int): ids.append(it)
                    elif isinstance(it, dict) and isinstance(it.get("id"), int): ids.append(it["id"])
                if ids: return ids
    return ids

ids = find_ids(pi)
print("INTENT IDS:", ids)
if len(ids) < 2:
    t = call("get_tree", {"search": S, "format": "json"})
    nodes = (t.get("tree") or {}).get("nodes", []) if isinstance(t, dict) else []
    by_title = {n.get("title"): n.get("id") for n in nodes if isinstance(n, dict)}
    ids = [by_title.get(i["title"]) for i in INTENTS]
    print("INTENT IDS (from tree):", ids)
A_ID, B_ID = ids[0], ids[1]

# ---------------- candidate sources ----------------
SRC_A = r'''"""Row softmax, whole row in registers: one HBM read and one write per element.

Rows up to MAX_REG_N columns are loaded once into registers (BLOCK_N = next power of two of N); max, exp,
sum and the scaled store happen on chip. Longer rows fall back to an online two-pass loop (running max and
rescaled sum per lane in one read pass, then a write pass).
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"MAX_REG_N": [8192, 16384, 32768], "WARPS_4K": [4, 8, 16], "WARPS_8K": [8, 16], "WARPS_16K": [8, 16, 32], "WARPS_32K": [16, 32], "CHUNK_N": [2048, 4096, 8192], "CHUNK_WARPS": [4, 8, 16]}
MAX_REG_N = 32768
WARPS_4K = 8
WARPS_8K = 8
WARPS_16K = 16
WARPS_32K = 16
CHUNK_N = 8192
CHUNK_WARPS = 16


@triton.jit
def _softmax_row_reg(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))
    row_max = tl.max(x, axis=0)
    e = tl.exp(x - row_max)
    inv = 1.0 / tl.sum(e, axis=0)
    tl.store(y_ptr + row * stride_y + cols, e * inv, mask=mask)


@triton.jit
def _softmax_row_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_use) + tl.exp(x - m_use)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        tl.store(y_row + start + cols, tl.exp(x - row_max) * inv, mask=mask)


def _reg_warps(block):
    if block <= 2048:
        return 4
    if block <= 4096:
        return WARPS_4K
    if block <= 8192:
        return WARPS_8K
    if block <= 16384:
        return WARPS_16K
    return WARPS_32K


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        if n <= MAX_REG_N:
            block = triton.next_power_of_2(n)
            _softmax_row_reg[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=_reg_warps(block))
        else:
            _softmax_row_online[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK_N=CHUNK_N, num_warps=CHUNK_WARPS)
        return y
'''

SRC_B = r'''"""Row softmax, online two-pass: one read pass keeps a running max and a rescaled running sum per lane
(no separate max pass), then a second pass re-reads the row (from L2 while it is still there) and writes.
Two reads and one write per element instead of the seed's three reads and one write.
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"CHUNK_N": [2048, 4096, 8192], "CHUNK_WARPS": [4, 8, 16]}
CHUNK_N = 4096
CHUNK_WARPS = 8


@triton.jit
def _softmax_row_online(x_ptr, y_ptr, n_cols, stride_x, stride_y, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    m = tl.full([BLOCK_N], float("-inf"), tl.float32)
    s = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))
        m_new = tl.maximum(m, x)
        m_use = tl.where(m_new == float("-inf"), 0.0, m_new)
        s = s * tl.exp(m - m_use) + tl.exp(x - m_use)
        m = m_new
    row_max = tl.max(m, axis=0)
    inv = 1.0 / tl.sum(s * tl.exp(m - row_max), axis=0)
    for start in range(0, n_cols, BLOCK_N):
        mask = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))
        tl.store(y_row + start + cols, tl.exp(x - row_max) * inv, mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        block = min(CHUNK_N, triton.next_power_of_2(n))
        _softmax_row_online[(m,)](x, y, n, x.stride(0), y.stride(0), BLOCK_N=block, num_warps=CHUNK_WARPS)
        return y
'''

def bench(node, src, label, base=None):
    args = {"search": S, "node_id": node, "author": AUTHOR, "candidate": {"source": src, "language": "triton"}}
    if base:
        args["base_attempt_id"] = base
    r = call("benchmark", args)
    print(f"=== {label}: attempt {r.get('attempt_id') if isinstance(r, dict) else None}; medians {medians(r)}")
    return r

def better(ra, rb, wl):
    """True if ra's median on wl is lower than rb's (missing -> False)."""
    ma, mb = medians(ra).get(wl), medians(rb).get(wl)
    if ma is None: return False
    if mb is None: return True
    return ma < mb

def geo(r):
    m = medians(r)
    ws = [w for w in ("8192x32768", "32768x4096") if w in m]
    return math.exp(sum(math.log(m[w]) for w in ws) / len(ws)) if ws else float("inf")

# ---------------- intent A ----------------
sel = call("select_action", {"search": S, "node_id": A_ID})
show("select A", sel)
print(json.dumps(sel, default=str)[:1500])
print(">>> implement prompt (A)")
prompt("implement_intent", {"search": S, "node_id": str(A_ID)})

a1 = bench(A_ID, SRC_A, "A1 warps 4K=8 32K=16", seed_id)
src_a2 = set_const(set_const(SRC_A, "WARPS_4K", 4), "WARPS_32K", 32)
a2 = bench(A_ID, src_a2, "A2 warps 4K=4 32K=32", seed_id)
# A3: per workload the better warp setting of A1/A2, plus streaming cache hints (read once, write once)
w4 = 4 if better(a2, a1, "32768x4096") else 8
w32 = 32 if better(a2, a1, "8192x32768") else 16
src_a3 = set_const(set_const(SRC_A, "WARPS_4K", w4), "WARPS_32K", w32)
src_a3 = src_a3.replace('x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"))',
                        'x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=float("-inf"), eviction_policy="evict_first")')
src_a3 = src_a3.replace("tl.store(y_ptr + row * stride_y + cols, e * inv, mask=mask)",
                        'tl.store(y_ptr + row * stride_y + cols, e * inv, mask=mask, eviction_policy="evict_first")')
print(f"A3 uses WARPS_4K={w4} WARPS_32K={w32} + evict_first")
a3 = bench(A_ID, src_a3, "A3 best warps + evict_first", seed_id)

fa = call("finish_intent", {"search": S, "node_id": A_ID})
show("finish A", fa)
print(json.dumps(fa, default=str)[:6000])

# ---------------- intent B ----------------
sel = call("select_action", {"search": S, "node_id": B_ID})
show("select B", sel)
print(json.dumps(sel, default=str)[:1500])

b1 = bench(B_ID, SRC_B, "B1 chunk 4096 / 8 warps", seed_id)
src_b2 = set_const(set_const(SRC_B, "CHUNK_N", 8192), "CHUNK_WARPS", 16)
b2 = bench(B_ID, src_b2, "B2 chunk 8192 / 16 warps", seed_id)
src_b3 = src_b2 if geo(b2) < geo(b1) else SRC_B
print("B3 builds on", "B2" if src_b3 is src_b2 else "B1")
src_b3 = src_b3.replace('x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"))',
                        'x = tl.load(x_row + start + cols, mask=start + cols < n_cols, other=float("-inf"), eviction_policy="evict_last")')
src_b3 = src_b3.replace('x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"))',
                        'x = tl.load(x_row + start + cols, mask=mask, other=float("-inf"), eviction_policy="evict_first")')
src_b3 = src_b3.replace("tl.store(y_row + start + cols, tl.exp(x - row_max) * inv, mask=mask)",
                        'tl.store(y_row + start + cols, tl.exp(x - row_max) * inv, mask=mask, eviction_policy="evict_first")')
b3 = bench(B_ID, src_b3, "B3 + evict_last first read / evict_first re-read and store", seed_id)

fb = call("finish_intent", {"search": S, "node_id": B_ID})
show("finish B", fb)
print(json.dumps(fb, default=str)[:6000])

print(">>> reflect prompt (A)")
prompt("reflect_and_edit", {"search": S, "node_id": str(A_ID)})
print(">>> tree")
call("get_tree", {"search": S, "format": "text", "budget_chars": 12000})
