# Round 1: seed, analysis + first intents, then two intents with up to 3 candidates each.
import json

S = "rmsnorm"
AUTH = "llm:claude"

# ---------------------------------------------------------------- kernels (templates)
SINGLE = r'''"""Single-pass RMSNorm: one program per row, the whole row held in registers.

BLOCK_N = next_pow2(N): x is read from HBM once, squared and summed in fp32, and the same registers
are scaled by rstd * w and stored as bf16. num_warps is picked so that each thread holds
ELEMS_PER_THREAD elements of the row (clamped to [MIN_WARPS, MAX_WARPS]).

Prediction: @NOTE@
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"ELEMS_PER_THREAD": [8, 16, 32, 64], "MIN_WARPS": [1, 2, 4], "MAX_WARPS": [8, 16, 32]}
ELEMS_PER_THREAD = @EPT@
MIN_WARPS = 4
MAX_WARPS = 16


@triton.jit
def _rmsnorm_row(x_ptr, w_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
    y = x * rstd * w
    tl.store(y_ptr + row * stride_y + cols, y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        block_n = triton.next_power_of_2(n)
        warps = min(MAX_WARPS, max(MIN_WARPS, block_n // (32 * ELEMS_PER_THREAD)))
        _rmsnorm_row[(m,)](x, weight, y, n, x.stride(0), y.stride(0), self.eps, BLOCK_N=block_n, num_warps=warps)
        return y
'''
ROWS = r'''"""RMSNorm with several rows per program: a [ROWS, BLOCK_N] tile in registers, weight loaded once per program.

Each program owns ROWS = TILE_ELEMS // BLOCK_N consecutive rows (at least 1), reads them from HBM once,
reduces each row in fp32, scales by rstd * w (w loaded once and broadcast over the rows) and stores bf16.
Fewer, fatter programs: less per-program overhead (weight load, index math, scheduling) per byte moved.

Prediction: @NOTE@
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"TILE_ELEMS": [4096, 8192, 16384, 32768], "NUM_WARPS": [4, 8, 16, 32]}
TILE_ELEMS = @TILE@
NUM_WARPS = @WARPS@


@triton.jit
def _rmsnorm_rows(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                  ROWS: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    rows = pid * ROWS + tl.arange(0, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0).to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0).to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask)


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-6):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        block_n = triton.next_power_of_2(n)
        rows = max(1, TILE_ELEMS // block_n)
        grid = (triton.cdiv(m, rows),)
        _rmsnorm_rows[grid](x, weight, y, m, n, x.stride(0), y.stride(0), self.eps,
                            ROWS=rows, BLOCK_N=block_n, num_warps=NUM_WARPS)
        return y
'''


def fill(tpl, **kw):
    for k, v in kw.items():
        tpl = tpl.replace("@%s@" % k, str(v))
    assert "@" not in tpl.replace("@triton.jit", ""), tpl
    assert '"""' not in kw.get("NOTE", "")
    return tpl


def err(r):
    return (not isinstance(r, dict)) or ("error" in r and len(r) == 1)


def speed(r):
    """Geomean speedup vs eager of a benchmark result, or None when not correct/timed."""
    if err(r):
        return None
    ev = r.get("evaluation") or {}
    if ev.get("status") != "ok" or ev.get("pure_pytorch"):
        return None
    return ev.get("speedup_vs_eager")


def bench(node, src, label):
    print("\n######## CANDIDATE %s on node %s" % (label, node))
    r = call("benchmark", {"search": S, "node_id": node, "author": AUTH,
                           "candidate": {"source": src, "language": "triton"}})
    if err(r):
        print("!!! benchmark error:", r)
        return r, None
    print("### %s -> attempt %s, status %s, speedup_vs_eager %s, vs compile %s, refine %s" % (
        label, r.get("attempt_id"), (r.get("evaluation") or {}).get("status"), speed(r),
        (r.get("evaluation") or {}).get("speedup_vs_compile"), json.dumps(r.get("refine"))))
    return r, speed(r)


def stop_refine(r):
    """True when the refine answer says to reflect (cap or stagnation reached)."""
    if err(r):
        return False
    ref = r.get("refine") or {}
    txt = json.dumps(ref).lower()
    return bool(ref.get("done") or ref.get("stop") or ("reflect" in (r.get("next") or "").lower()
                and "another" not in (r.get("next") or "").lower()))


# ---------------------------------------------------------------- phase 0: seed
seed = call("benchmark", {"search": S, "node_id": 1, "author": AUTH,
                          "candidate": {"seed": True, "language": "triton"}})
print("### SEED speedup", speed(seed))

ANALYSIS = """RMSNorm: y = x * rsqrt(mean(x^2, last dim) + 1e-6) * w on a bf16 [M, N] matrix, statistic in fp32, bf16 out.
Per call (both search workloads have M*N = 2^28): 1.07 GFLOP (4/elem) and at least 1.074 GB moved (2 B read + 2 B
written per element, weight negligible): ~1 FLOP/B, two orders below the H200 ridge, so HBM-bound. Floor: 1.074 GB /
4.2 TB/s (measured copy ceiling) = ~256 us (224 us at the 4.8 TB/s spec). Held-out 16384x5120: 0.336 GB, ~80 us.
Regimes: 32768 rows of 16 KB (N=8192) vs 65536 rows of 8 KB (N=4096), both power-of-2 rows; held-out N=5120 is
ragged (next_pow2 = 8192, 37.5% masked lanes); smoke 137x1096 is ragged in both dims. A whole row (<= 8192 fp32 =
32 KB per CTA) fits in registers, so one HBM pass is possible.
Where the seed loses: two passes over x (the second probably from L2, but twice the load instructions and L2
traffic), BLOCK_N=1024 with 4 warps = 8 elements per thread per iteration in a serial 4-8 iteration loop per pass
(little memory-level parallelism per CTA), the weight re-read for every row, one CTA per row (32K-64K CTAs).
Eager moves the matrix ~5 times in fp32 (~3.4 ms); torch.compile is near the roofline already (~252 us on N=8192,
~287 us on N=4096 in the README's replay), so the realistic goal is parity at N=8192 and a win at N=4096.
Unsure: whether the seed's second pass really hits L2; bytes in flight needed per SM (Little: ~4.8 TB/s x ~1 us =
~36 KB per SM); whether a 16-warp cross-warp reduction (shared-memory round trip) costs anything measurable."""

r = call("edit_tree", {"search": S, "author": AUTH, "edits": [{"op": "update", "node_id": 1, "notes": ANALYSIS,
                       "reason": "analysis of the kernel (analyse_kernel)"}]})
if err(r):
    print("!!! root notes refused:", r)

INTENTS = [
    {"title": "Single pass: hold the whole row in registers (BLOCK_N = next_pow2(N)), one program per row",
     "rationale": "Reads x from HBM/L2 once instead of twice and issues all loads of a row at once (all of the row's "
                  "bytes in flight per CTA instead of 2-4 KB per loop iteration), removing the loop-carried "
                  "dependency of the seed's two chunk loops. The op is HBM-bound, so fewer load instructions and "
                  "more memory-level parallelism should bring it close to the ~256 us copy floor.",
     "priority": 0.9, "difficulty": 2, "expected_speedup": 1.25,
     "notes": "Refuted if < 1.05x over the seed (the seed's second pass was already an L2 hit and it was at the "
              "roofline), or if register spills show up at N=8192.",
     "params": {"ELEMS_PER_THREAD": [8, 16, 32]}},
    {"title": "Process several rows per program as a [ROWS, BLOCK_N] register tile, weight loaded once per program",
     "rationale": "Fewer, fatter CTAs: the weight load, index math and CTA scheduling are paid once per ROWS rows. "
                  "Matters most at N=4096 (65536 rows of 8 KB), where per-row fixed costs are twice as frequent "
                  "per byte as at N=8192 and where torch.compile is furthest from the roofline.",
     "priority": 0.7, "difficulty": 3, "expected_speedup": 1.05,
     "notes": "Speedup predicted over the single-pass kernel. Refuted if N=4096 does not improve by > 2% over it.",
     "params": {"TILE_ELEMS": [8192, 16384]}},
    {"title": "Persistent grid: SMs x k programs loop over row tiles, weight kept in registers across rows",
     "rationale": "Removes CTA launch/retire overhead and the tail wave of 32K-64K tiny CTAs; the weight stays in "
                  "registers for the whole kernel. Risk: without software pipelining each program waits for its "
                  "tile's loads, so it needs enough programs per SM to keep bytes in flight.",
     "priority": 0.5, "difficulty": 3, "expected_speedup": 1.03,
     "notes": "Speedup predicted over the single-pass kernel. Refuted if slower than the non-persistent tile "
              "kernel at equal tile size.",
     "params": {"PROGRAMS_PER_SM": [2, 4, 8]}},
    {"title": "Streaming cache hints: evict_first on x loads and y stores, evict_last on the weight",
     "rationale": "x and y are touched once; keeping them from displacing the weight (and each other) in L2 cuts "
                  "L2 thrash and write-back interference. Small, cheap change on top of the best kernel.",
     "priority": 0.4, "difficulty": 1, "expected_speedup": 1.02,
     "notes": "Refuted if within noise of the kernel it modifies."},
    {"title": "Cover ragged rows without masked lanes: a non-power-of-2 number of register chunks (5x1024 at N=5120)",
     "rationale": "next_pow2(5120) = 8192 wastes 37.5% of lanes and registers on the held-out shape (and forces "
                  "more warps or spills); chunking the row into N/CHUNK register blocks loaded up front keeps one "
                  "HBM pass with full lanes. Search shapes are powers of 2, so this only protects held-out.",
     "priority": 0.3, "difficulty": 3, "expected_speedup": 1.0,
     "notes": "Predicted ~1.0x on search shapes, ~1.1x on held-out 16384x5120; refuted if held-out does not move."},
    {"title": "Move rows through TMA block descriptors (Hopper bulk async copies) instead of per-thread vector loads",
     "rationale": "Bulk tensor copies into shared memory free issue slots and registers from address math and let "
                  "one thread keep many KB in flight; with a double-buffered persistent loop they overlap the next "
                  "row's load with this row's math and store.",
     "priority": 0.3, "difficulty": 4, "expected_speedup": 1.03,
     "notes": "Refuted if DRAM throughput does not rise above the best register kernel's."},
]

pi = call("propose_intents", {"search": S, "author": AUTH, "intents": INTENTS,
                              "reason": "first intents from the analysis: traffic (single pass), per-CTA costs "
                                        "(rows per program, persistence), cache policy, ragged shapes, bulk copies"})
ids = {}
if err(pi):
    print("!!! propose_intents refused:", pi)
else:
    for n in pi["result"]:
        ids[n["title"]] = n["id"]
print("### INTENT IDS", json.dumps(ids))
N_SINGLE = ids.get(INTENTS[0]["title"])
N_ROWS = ids.get(INTENTS[1]["title"])
N_PERSIST = ids.get(INTENTS[2]["title"])
others = [v for k, v in ids.items() if v not in (N_SINGLE,)]

# ---------------------------------------------------------------- intent A: single pass
sel = call("select_action", {"search": S, "node_id": N_SINGLE})
print("### SELECT A:", json.dumps(sel)[:1500])
prompt("implement_intent", {"search": S})

best_a = None
if not err(sel):
    results = []
    r1, s1 = bench(N_SINGLE, fill(SINGLE, EPT=16, NOTE="vs the seed, one HBM read of x instead of a read plus an L2 re-read, and the whole row in flight per CTA: ~1.25x, near the ~256 us copy floor on both search shapes. 16 elements per thread = 16 warps at N=8192, 8 at N=4096. Unsure whether the seed's second pass was already cheap."), "A1 single EPT=16")
    results.append(("A1", s1))
    if not stop_refine(r1):
        r2, s2 = bench(N_SINGLE, fill(SINGLE, EPT=32, NOTE="same kernel with 32 elements per thread (8 warps at N=8192, 4 at N=4096): more independent loads per thread and more CTAs per SM, a cheaper cross-warp reduction; expected within +-3% of 16 per thread."), "A2 single EPT=32")
        results.append(("A2", s2))
        if not stop_refine(r2):
            if s2 is not None and s1 is not None and s2 > s1:
                src3 = fill(SINGLE, EPT=64, NOTE="64 elements per thread (4 warps at N=8192, 2 at N=4096) since 32 beat 16: even more bytes in flight per thread and cheaper reductions; risk of fewer warps to hide latency. Expected +-3%.").replace("MIN_WARPS = 4", "MIN_WARPS = 2")
                lab = "A3 single EPT=64 (min 2 warps)"
            else:
                src3 = fill(SINGLE, EPT=8, NOTE="8 elements per thread (16 warps at both shapes) since 32 did not beat 16: more warps to hide latency, one 16-byte vector per thread. Expected +-3%.")
                lab = "A3 single EPT=8"
            r3, s3 = bench(N_SINGLE, src3, lab)
            results.append(("A3", s3))
    print("### A results", results)

# close A; rebase the open intents on its best
tree = call("get_tree", {"search": S, "format": "json"})
nodes = {}
if not err(tree):
    def walk(o):
        if isinstance(o, dict):
            if "id" in o and "kind" in o and "status" in o:
                nodes[o["id"]] = o
            for v in o.values():
                walk(v)
        elif isinstance(o, list):
            for v in o:
                walk(v)
    walk(tree)
best_a = (nodes.get(N_SINGLE) or {}).get("best_attempt_id")
print("### best attempt of A (from tree):", best_a)
edits = []
if best_a:
    for nid in others:
        edits.append({"op": "update", "node_id": nid, "base_attempt_id": best_a,
                      "reason": "every other intent is a refinement of the single-pass kernel: start from its best"})
fin = call("finish_intent", {"search": S, "node_id": N_SINGLE, "author": AUTH, "edits": edits,
                             "reason": "round 1: single pass implemented; later intents rebased on its best" if edits else ""})
if err(fin) and edits:
    print("!!! finish with edits refused, finishing without:", fin)
    fin = call("finish_intent", {"search": S, "node_id": N_SINGLE, "author": AUTH})

# ---------------------------------------------------------------- intent B: rows per program
sel = call("select_action", {"search": S, "node_id": N_ROWS})
print("### SELECT B:", json.dumps(sel)[:1500])
if not err(sel):
    rb1, sb1 = bench(N_ROWS, fill(ROWS, TILE=16384, WARPS=16, NOTE="over the single-pass kernel: 2 rows per program at N=8192, 4 at N=4096, the weight loaded once per program; fixed per-CTA costs amortised over 32 KB of x. Expected ~1.05x at N=4096, ~1.0x at N=8192."), "B1 rows TILE=16384 warps=16")
    if not stop_refine(rb1):
        rb2, sb2 = bench(N_ROWS, fill(ROWS, TILE=8192, WARPS=8, NOTE="smaller tile (1 row at N=8192, 2 at N=4096) with 8 warps: more CTAs per SM for latency hiding while keeping weight reuse at N=4096. Expected +-3% of the 16384 tile."), "B2 rows TILE=8192 warps=8")
        if not stop_refine(rb2):
            if sb1 is not None and sb2 is not None and sb2 > sb1:
                bench(N_ROWS, fill(ROWS, TILE=8192, WARPS=4, NOTE="the 8192 tile won, so halve the warps: 64 elements per thread, more CTAs resident per SM. Expected +-3%."), "B3 rows TILE=8192 warps=4")
            else:
                bench(N_ROWS, fill(ROWS, TILE=32768, WARPS=16, NOTE="the 16384 tile won, so double it (4 rows at N=8192, 8 at N=4096): fewer CTAs, more weight reuse, 64 elements per thread. Expected +-3%."), "B3 rows TILE=32768 warps=16")
    fin = call("finish_intent", {"search": S, "node_id": N_ROWS, "author": AUTH})

call("get_tree", {"search": S})
prompt("reflect_and_edit", {"search": S})
call("select_action", {"search": S, "claim": False})
