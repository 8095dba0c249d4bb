# Round 1 (the only device round): seed, analysis + first intents, three intents of up to 3 candidates each,
# then the final evaluation. Candidates are generated from one template; later ones adapt to measured results.
import json
import math

S = "layernorm"
AUTHOR = "llm:claude"
WL_L = "16384x8192"   # long rows (block >= 4096): also the held-out 12288x6144 takes this path
WL_S = "65536x1024"   # short rows

# ----------------------------------------------------------------------------------------------------------
# candidate template
HEADER = '''import torch
import triton
import triton.language as tl
'''

K1D = '''

@triton.jit
def _ln_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    # one program per row; the whole row lives in registers, so x is read from HBM once
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    var = tl.sum(d * d, axis=0) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0)
    tl.store(y_ptr + row * stride_y + cols, d * rstd * w + b, mask=mask)
'''

K2D = '''

@triton.jit
def _ln_rows(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
             BLOCK_N: tl.constexpr, ROWS: tl.constexpr):
    # ROWS rows per program as one [ROWS, BLOCK_N] tile; weight and bias loaded once per tile
    pid = tl.program_id(0)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0)
    mean = tl.sum(x, axis=1) / n_cols
    d = tl.where(mask, x - mean[:, None], 0.0)
    var = tl.sum(d * d, axis=1) / n_cols
    rstd = 1.0 / tl.sqrt(var + eps)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0)
    b = tl.load(b_ptr + cols, mask=col_mask, other=0.0)
    y = d * rstd[:, None] * w[None, :] + b[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y, mask=mask)
'''

BODY = '''

def _launch(x, weight, bias, y, m, n, eps, block, rows, warps, maxnreg):
    opts = {"num_warps": warps}
    if maxnreg:
        opts["maxnreg"] = maxnreg
    if rows == 1:
        _ln_row[(m,)](x, weight, bias, y, n, x.stride(0), y.stride(0), eps, BLOCK_N=block, **opts)
    else:
        _ln_rows[(triton.cdiv(m, rows),)](
            x, weight, bias, y, m, n, x.stride(0), y.stride(0), eps, BLOCK_N=block, ROWS=rows, **opts
        )


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        x = x.contiguous()
        m, n = x.shape
        y = torch.empty_like(x)
        block = triton.next_power_of_2(n)
        if block >= 4096:  # long rows
            _launch(x, weight, bias, y, m, n, self.eps, block, ROWS_LARGE, WARPS_LARGE, MAXNREG_LARGE)
        else:  # short rows
            _launch(x, weight, bias, y, m, n, self.eps, block, ROWS_SMALL, WARPS_SMALL, 0)
        return y
'''


def make_src(cfg, doc):
    L, Sm = cfg["L"], cfg["S"]
    consts = (
        '\nTUNABLES = {"ROWS_LARGE": [1, 2], "WARPS_LARGE": [4, 8, 16], "MAXNREG_LARGE": [0, 32, 40, 64, 80, 128, 168],\n'
        '            "ROWS_SMALL": [1, 2, 4, 8, 16], "WARPS_SMALL": [1, 2, 4, 8, 16]}\n'
        f"ROWS_LARGE = {L['rows']}\n"
        f"WARPS_LARGE = {L['warps']}\n"
        f"MAXNREG_LARGE = {L.get('maxnreg', 0)}\n"
        f"ROWS_SMALL = {Sm['rows']}\n"
        f"WARPS_SMALL = {Sm['warps']}\n"
    )
    kernels = K1D + (K2D if (L["rows"] > 1 or Sm["rows"] > 1) else "")
    return '"""' + doc + '"""\n\n' + HEADER + consts + kernels + BODY


def cfg_str(cfg):
    L, Sm = cfg["L"], cfg["S"]
    s = f"long rows: {L['rows']} row(s)/program, {L['warps']} warps"
    if L.get("maxnreg"):
        s += f", maxnreg {L['maxnreg']}"
    return s + f"; short rows: {Sm['rows']} row(s)/program, {Sm['warps']} warps"


def mk(L, Sm):
    return {"L": dict(L), "S": dict(Sm)}


# ----------------------------------------------------------------------------------------------------------
# reading results
def ok(r):
    if not isinstance(r, dict) or "error" in r:
        return False
    ev = r.get("evaluation") or {}
    if ev.get("status") != "ok" or ev.get("pure_pytorch"):
        return False
    return all(c.get("passed") for c in ev.get("correctness") or [])


def med(r, wl):
    if not ok(r):
        return None
    for t in r["evaluation"].get("timings") or []:
        if t.get("workload") == wl:
            return t.get("median_us")
    return None


def score(r):
    """geomean speedup vs eager (higher is better); None when not a correct kernel"""
    if not ok(r):
        return None
    return r["evaluation"].get("speedup_vs_eager")


def fmt(r):
    if not isinstance(r, dict) or "error" in r:
        return "error: " + str((r or {}).get("error"))[:300]
    ev = r.get("evaluation") or {}
    if not ok(r):
        bad = [c for c in ev.get("correctness") or [] if not c.get("passed")]
        return f"status {ev.get('status')}: {str(ev.get('error'))[:300]} {bad[:1]}"
    parts = []
    for t in ev.get("timings") or []:
        parts.append(
            f"{t.get('workload')} {t.get('median_us', 0):.1f}us (eager {t.get('speedup_vs_eager') or 0:.2f}x,"
            f" compile {t.get('speedup_vs_compile') or 0:.2f}x, roof {t.get('roofline_fraction') or 0:.2f})"
        )
    return f"geomean vs eager {ev.get('speedup_vs_eager') or 0:.3f}x; " + "; ".join(parts)


LOG = []  # (label, attempt_id, cfg, result)
BEST = {"attempt_id": None, "cfg": None, "score": None, "label": "none"}


def note(label, cfg, r):
    LOG.append((label, r.get("attempt_id") if isinstance(r, dict) else None, cfg, r))
    print(f"\n=== {label}: attempt {r.get('attempt_id') if isinstance(r, dict) else None}; "
          f"{cfg_str(cfg) if cfg else 'seed'}; {fmt(r)}")
    sc = score(r)
    if sc is not None and (BEST["score"] is None or sc > BEST["score"]):
        BEST.update(attempt_id=r["attempt_id"], cfg=cfg, score=sc, label=label)
    print(f"=== best so far: {BEST['label']} (attempt {BEST['attempt_id']}, {BEST['score']})")


def bench(label, node_id, cfg, doc, base):
    args = {"search": S, "node_id": node_id, "candidate": {"source": make_src(cfg, doc), "language": "triton"}}
    if base:
        args["base_attempt_id"] = base
    r = call("benchmark", args)
    note(label, cfg, r)
    return r


def regime_winner(entries, wl, part):
    """entries: [(cfg, r)]; the cfg part of the correct entry with the lowest median on workload wl"""
    best = None
    for cfg, r in entries:
        m = med(r, wl)
        if m is None:
            sc = score(r)
            m = 1.0 / sc if sc else None
        if m is not None and (best is None or m < best[0]):
            best = (m, cfg[part])
    return best[1] if best else None


def res_of(aid):
    return next((r for lab, a, c, r in LOG if a == aid and aid is not None), None)


def rel(a, b):
    return f"{a / b:.3f}" if a and b else "n/a"


# ----------------------------------------------------------------------------------------------------------
# Phase 0: the seed, the analysis, the first intents
seed = call("benchmark", {"search": S, "node_id": 1, "candidate": {"seed": True, "language": "triton"}})
note("seed", None, seed)
SEED_ID = seed.get("attempt_id") if isinstance(seed, dict) else None

prompt("analyse_kernel", {"search": S})

ANALYSIS = (
    "LayerNorm over the last dim, fp32, affine (w, b), eps 1e-5: per row mean, variance, (x-mean)*rstd*w+b. "
    "~8 FLOP/element vs 8 B/element (x read once, y written once; w/b are 2N floats, negligible): "
    "~1 FLOP/B, deeply memory-bound on H200 (4.8 TB/s spec, ~4.2 TB/s measured copy). "
    "Floors at 4.2 TB/s: 16384x8192 1.07 GB -> ~256 us; 65536x1024 0.54 GB -> ~128 us; held-out 12288x6144 "
    "0.60 GB -> ~144 us. Regimes: long rows (8192 and 6144, non power of 2 -> padded 8192 block, 25% masked lanes) "
    "vs short rows (1024, 65536 of them). Every row fits on chip (<=32 KB), so one HBM read of x is possible. "
    "Seed losses: three dependent loops per row over 1024-wide chunks (mean, variance, output) read x three "
    "times (re-reads served by L1/L2, but 3x the L2->SM traffic) and keep only one 4 KB chunk in flight per "
    "program; w/b are re-read per row (2x the bytes of x from L1/L2). "
    "Risks/unknowns: (1) a whole 8192-float row in registers costs ~64 regs/thread at 16 warps (sm_90 compile: "
    "2 blocks/SM, register-limited), i.e. ~64 KB in flight per SM, which may be short of Little's law "
    "(~36-55 KB/SM needed); (2) whether per-row w/b reloads matter (likely L1 hits); (3) how good eager's "
    "vectorized LayerNorm and torch.compile's persistent reduction already are (probably 70-90% of roofline), "
    "so the headroom vs torch.compile may be small."
)

INTENTS = [
    {"title": "Read each row from HBM once: whole row in registers, one row per program",
     "rationale": "The seed makes three dependent passes over x per row in 1024-wide chunks: x is read 3x "
                  "(re-reads from L1/L2) and each program has one 4 KB chunk in flight at a time. Loading the "
                  "whole row (<=32 KB) at once issues all its loads together (memory-level parallelism) and "
                  "touches HBM once; mean and variance are register reductions.",
     "priority": 0.9, "difficulty": 2, "expected_speedup": 1.35,
     "notes": "Refuted if <=1.1x over the seed on 16384x8192: then the seed's re-reads were already cheap and it "
              "was near roofline. Warps to try: long rows 16 vs 8, short rows 4 vs 1 (warp-per-row, shuffle-only "
              "reductions).",
     "params": {"WARPS_LARGE": [16, 8], "WARPS_SMALL": [4, 1]}},
    {"title": "Process several short rows per program as a 2D tile, loading weight and bias once per tile",
     "rationale": "At N=1024 a one-row program moves 4 KB of x but reloads 8 KB of w/b and pays a CTA launch "
                  "and block reductions for it; 65536 tiny programs. A [ROWS, 1024] tile amortises w/b and the "
                  "per-program fixed cost over ROWS rows and puts more bytes in flight per program.",
     "priority": 0.7, "difficulty": 3, "expected_speedup": 1.08,
     "notes": "Refuted if 65536x1024 does not drop by >=3% vs the one-row kernel. For long rows a 2-row tile "
              "doubles registers per thread (1 block/SM): expected no gain there; measured as a side check.",
     "params": {"ROWS_SMALL": [4, 8]}},
    {"title": "Cap registers (maxnreg) so more 8192-wide row programs are resident per SM",
     "rationale": "A whole 8192-float row costs ~64 regs/thread at 16 warps: 2 blocks/SM (register-limited), "
                  "so only ~64 KB of loads in flight per SM. Capping at 40 regs (3 blocks) or 32 (4 blocks) "
                  "spills ~100 B/thread to L1-backed local memory but raises bytes in flight 1.5-2x.",
     "priority": 0.6, "difficulty": 2, "expected_speedup": 1.06,
     "notes": "Refuted if 16384x8192 does not improve (in-flight bytes are not the limit) or if spills make it "
              "slower. Short rows are not register-limited: left as they are.",
     "params": {"blocks_per_sm": [3, 4]}},
    {"title": "Persistent programs (grid ~ k x SMs) with weight and bias hoisted into registers",
     "rationale": "Removes the per-row w/b reloads and most CTA scheduling for 65536 short rows; a grid-stride "
                  "loop over row tiles also lets the compiler overlap the next tile's loads with this tile's "
                  "reductions. For long rows hoisting w/b doubles register use, so short rows only.",
     "priority": 0.45, "difficulty": 3, "expected_speedup": 1.04,
     "notes": "Refuted if 65536x1024 is not faster than the best 2D-tile kernel."},
    {"title": "Fuse mean and variance into one reduction (sum and sum of squares together)",
     "rationale": "One block-level reduction round (shared memory + barrier) per row instead of two shortens "
                  "the load-to-store latency of each row; var = E[x^2] - mean^2 is accurate enough in fp32 here "
                  "(|mean| << std for these inputs; tolerance 1e-4).",
     "priority": 0.3, "difficulty": 1, "expected_speedup": 1.02,
     "notes": "Refuted if no change beyond noise; watch max abs error."},
    {"title": "Streaming cache hints: evict_first on x loads, .cs stores for y, evict_last on weight/bias",
     "rationale": "x and y are touched once; marking them streaming keeps w/b resident in L1/L2 and reduces "
                  "L2 thrash from the 1 GB stream.",
     "priority": 0.3, "difficulty": 1, "expected_speedup": 1.02,
     "notes": "Refuted if no change beyond noise (L2 is flushed before each call anyway)."},
    {"title": "Chunked two-pass for long rows: stats in one streaming pass, normalize re-reading x from L2",
     "rationale": "If register-resident long rows cap occupancy, keep only a chunk in registers: pass 1 "
                  "accumulates sum and sum of squares, pass 2 re-reads the row (just read: an L2 hit) and "
                  "writes y. Many more programs per SM, loads pipelined with num_stages.",
     "priority": 0.25, "difficulty": 3, "expected_speedup": 1.0,
     "notes": "Only worth it if the maxnreg intent shows that occupancy is the limit but spills hurt."},
]

pi = call("propose_intents", {"search": S, "intents": INTENTS, "author": AUTHOR,
                              "reason": "first intents from the analysis (root notes)"})
ids = [n["id"] for n in pi.get("result", [])] if isinstance(pi, dict) else []
print("INTENT IDS", ids)
call("edit_tree", {"search": S, "author": AUTHOR, "reason": "analysis of the task and the seed",
                   "edits": [{"op": "update", "node_id": 1, "notes": ANALYSIS}]})
if len(ids) < 3:
    raise SystemExit("propose_intents failed; stopping the round here")
A, B, C, PERS, FUSE, HINTS, CHUNK = ids

# ----------------------------------------------------------------------------------------------------------
# Intent A: one read of x, whole row in registers
sel = call("select_action", {"search": S, "node_id": A})
prompt("implement_intent", {"search": S, "node_id": A})
baseA = SEED_ID
a1c = mk({"rows": 1, "warps": 16}, {"rows": 1, "warps": 4})
a1 = bench("A1", A, a1c, "LayerNorm, one program per row, whole row in registers (x read once). Long rows 16 warps "
           "(16 floats/thread), short rows 4 warps (8 floats/thread).", baseA)
a2c = mk({"rows": 1, "warps": 8}, {"rows": 1, "warps": 1})
a2 = bench("A2", A, a2c, "As A1 with fewer warps: long rows 8 warps (32 floats/thread), short rows one warp per row "
           "(32 floats/thread, reductions in warp shuffles only).", baseA)
wL = regime_winner([(a1c, a1), (a2c, a2)], WL_L, "L") or a1c["L"]
wS = regime_winner([(a1c, a1), (a2c, a2)], WL_S, "S") or a1c["S"]
mS1, mS4 = med(a2, WL_S), med(a1, WL_S)
# third point for short rows: between/beyond the two tried (4 won clearly -> 8, else 2)
s3 = 8 if (mS1 and mS4 and mS4 < 0.95 * mS1) else 2
a3c = mk(wL, {"rows": 1, "warps": s3})
a3 = bench("A3", A, a3c, f"One row per program, whole row in registers: the faster long-row setting of A1/A2 "
           f"({wL['warps']} warps) and short rows at {s3} warps.", baseA)
entriesA = [(a1c, a1), (a2c, a2), (a3c, a3)]
bestA = max([(score(r), r["attempt_id"], c) for c, r in entriesA if score(r) is not None] or [(None, None, None)],
            key=lambda t: t[0] or 0)
seedL, seedS = med(seed, WL_L), med(seed, WL_S)
reflA = (
    f"A predicted 1.35x over the seed. Seed: {fmt(seed)}. "
    + " | ".join(f"{lab}: {fmt(r)}" for lab, _, _, r in LOG if lab.startswith('A'))
    + f". Long rows vs seed: A1 {rel(seedL, med(a1, WL_L))}x, A2 {rel(seedL, med(a2, WL_L))}x; short rows vs seed: "
    f"A1 {rel(seedS, med(a1, WL_S))}x, A2 {rel(seedS, med(a2, WL_S))}x, A3 {rel(seedS, med(a3, WL_S))}x. "
    f"Best of A: attempt {bestA[1]} ({cfg_str(bestA[2]) if bestA[2] else 'none correct'})."
)[:1990]
editsA = [{"op": "update", "node_id": A, "notes": reflA[:3990]}]
if bestA[1]:
    editsA += [
        {"op": "update", "node_id": B, "base_attempt_id": bestA[1],
         "notes": f"Builds on attempt {bestA[1]} (best one-row kernel: {cfg_str(bestA[2])}). " + INTENTS[1]["notes"]},
        {"op": "update", "node_id": C, "base_attempt_id": bestA[1],
         "notes": f"Builds on attempt {bestA[1]}. " + INTENTS[2]["notes"]},
        {"op": "update", "node_id": PERS, "base_attempt_id": bestA[1]},
        {"op": "update", "node_id": FUSE, "base_attempt_id": bestA[1]},
        {"op": "update", "node_id": HINTS, "base_attempt_id": bestA[1]},
    ]
fa = call("finish_intent", {"search": S, "node_id": A, "edits": editsA, "reason": reflA, "author": AUTHOR})
if isinstance(fa, dict) and "error" in fa:  # edits refused: close the intent anyway, then apply what is accepted
    fa = call("finish_intent", {"search": S, "node_id": A, "reason": reflA, "author": AUTHOR})

# ----------------------------------------------------------------------------------------------------------
# Intent B: several short rows per program (2D tile)
sel = call("select_action", {"search": S, "node_id": B})
prompt("implement_intent", {"search": S, "node_id": B})
baseB = BEST["attempt_id"]
bc = BEST["cfg"] or a1c
wsB = bc["S"]["warps"] if bc["S"]["rows"] == 1 else max(1, bc["S"]["warps"] // bc["S"]["rows"])


def tile_s(rows):
    return {"rows": rows, "warps": min(16, wsB * rows)}


b1c = mk({"rows": 2, "warps": 16}, tile_s(4))
b1 = bench("B1", B, b1c, "Rows per program as a 2D tile, w/b loaded once per tile: short rows 4 rows/program "
           "(same floats per thread as the one-row base); long rows 2 rows/program at 16 warps (side check).", baseB)
b2c = mk(bc["L"], tile_s(8))
b2 = bench("B2", B, b2c, "Short rows 8 rows/program as a 2D tile (w/b once per 8 rows); long rows unchanged from "
           "the base.", baseB)
mb1, mb2 = med(b1, WL_S), med(b2, WL_S)
rows3 = 16 if (mb1 and mb2 and mb2 < mb1) else 2
baseL_med = med(res_of(baseB), WL_L)
# long rows: keep the 2-row tile only if it beat the base's long-row time
b3L = b1c["L"] if (med(b1, WL_L) and baseL_med and med(b1, WL_L) < 0.98 * baseL_med) else bc["L"]
b3c = mk(b3L, tile_s(rows3))
b3 = bench("B3", B, b3c, f"Short rows {rows3} rows/program as a 2D tile (continuing the trend of B1/B2); long rows "
           f"{b3L['rows']} row(s)/program.", baseB)
entriesB = [(b1c, b1), (b2c, b2), (b3c, b3)]
baseS_med = med(res_of(baseB), WL_S)
reflB = (
    f"B predicted 1.08x over attempt {baseB} (short rows). "
    + " | ".join(f"{lab}: {fmt(r)}" for lab, _, _, r in LOG if lab.startswith('B'))
    + f". Short rows vs base: B1(4 rows) {rel(baseS_med, mb1)}x, B2(8 rows) {rel(baseS_med, mb2)}x, "
    f"B3({rows3} rows) {rel(baseS_med, med(b3, WL_S))}x; long rows 2-row tile vs base {rel(baseL_med, med(b1, WL_L))}x. "
    f"Best so far: attempt {BEST['attempt_id']} ({cfg_str(BEST['cfg']) if BEST['cfg'] else 'seed'})."
)[:1990]
gainB = any(med(r, WL_S) and baseS_med and med(r, WL_S) < 0.97 * baseS_med for _, r in entriesB)
editsB = [{"op": "update", "node_id": B, "notes": reflB[:3990]}]
if BEST["attempt_id"]:
    editsB += [{"op": "update", "node_id": n, "base_attempt_id": BEST["attempt_id"]} for n in (C, PERS, FUSE, HINTS)]
editsB.append({"op": "update", "node_id": PERS, "priority": 0.55 if gainB else 0.35,
               "notes": ("Short-row tiles helped (w/b amortisation / fewer programs matter): persistence pushes "
                         "the same lever further." if gainB else
                         "Short-row tiles did not help beyond noise: per-program cost and w/b reloads are not "
                         "what limits 65536x1024; persistence is less likely to help.")
               + " " + INTENTS[3]["notes"]})
fb = call("finish_intent", {"search": S, "node_id": B, "edits": editsB, "reason": reflB, "author": AUTHOR})
if isinstance(fb, dict) and "error" in fb:
    fb = call("finish_intent", {"search": S, "node_id": B, "reason": reflB, "author": AUTHOR})

# ----------------------------------------------------------------------------------------------------------
# Intent C: cap registers for long rows so more row programs are resident
sel = call("select_action", {"search": S, "node_id": C})
prompt("implement_intent", {"search": S, "node_id": C})
baseC = BEST["attempt_id"]
cc = BEST["cfg"] or a1c


def capped(L, k, warps=None):
    # one long row per program, k programs resident per SM: registers per thread <= 65536 / (threads * k)
    w = warps or L["warps"]
    cap = int(65536 / (32 * w * k)) // 8 * 8
    return {"rows": 1, "warps": w, "maxnreg": max(24, min(255, cap))}


c1c = mk(capped(cc["L"], 3), cc["S"])
c1 = bench("C1", C, c1c, f"Long rows: registers capped at {c1c['L']['maxnreg']} so 3 row programs are resident "
           "per SM (more bytes in flight); short rows as the base.", baseC)
entriesC = [(c1c, c1)]
if not ok(c1) and "maxnreg" in json.dumps(c1, default=str):
    print("C1 did not compile: maxnreg refused? stopping intent C after one attempt")
else:
    c2c = mk(capped(cc["L"], 4), cc["S"])
    c2 = bench("C2", C, c2c, f"Long rows: registers capped at {c2c['L']['maxnreg']} so 4 row programs are resident "
               "per SM; short rows as the base.", baseC)
    entriesC.append((c2c, c2))
    baseCL = med(res_of(baseC), WL_L)
    m1, m2 = med(c1, WL_L), med(c2, WL_L)
    other_w = 8 if cc["L"]["warps"] == 16 else 16
    if m1 and m2 and baseCL and min(m1, m2) < 0.98 * baseCL:
        k = 3 if m1 <= m2 else 4
        c3c = mk(capped(cc["L"], k, other_w), cc["S"])  # same residency with the other warp count
    else:
        c3c = mk(capped(cc["L"], 3, other_w), cc["S"])
    c3 = bench("C3", C, c3c, f"Long rows: {c3c['L']['warps']} warps with registers capped at "
               f"{c3c['L']['maxnreg']} (residency of the better of C1/C2 with the other warp count).", baseC)
    entriesC.append((c3c, c3))
baseCL = med(res_of(baseC), WL_L)
gainC = any(med(r, WL_L) and baseCL and med(r, WL_L) < 0.98 * baseCL for _, r in entriesC)
reflC = (
    f"C predicted 1.06x on long rows over attempt {baseC}. "
    + " | ".join(f"{lab}: {fmt(r)}" for lab, _, _, r in LOG if lab.startswith('C'))
    + f". Long rows vs base: " + ", ".join(f"{cfg_str(c).split(';')[0]} {rel(baseCL, med(r, WL_L))}x"
                                          for c, r in entriesC)
    + f". Best so far: attempt {BEST['attempt_id']} ({cfg_str(BEST['cfg']) if BEST['cfg'] else 'seed'})."
)[:1990]
editsC = [{"op": "update", "node_id": C, "notes": reflC[:3990]},
          {"op": "update", "node_id": CHUNK, "priority": 0.4 if gainC else 0.15,
           "notes": ("Register-capped residency helped long rows: occupancy is a lever; a chunked two-pass gets "
                     "more residency without spills." if gainC else
                     "Capping registers for more residency did not help long rows: bytes in flight are not the "
                     "limit, so a chunked two-pass (more residency, extra L2 traffic) is unlikely to help.")}]
if BEST["attempt_id"]:
    editsC += [{"op": "update", "node_id": n, "base_attempt_id": BEST["attempt_id"]} for n in (PERS, FUSE, HINTS, CHUNK)]
newC = []
if BEST["cfg"]:
    newC.append({"title": "Sweep the winning layout's warps and rows per program once more around the best",
                 "rationale": "Each regime's best setting so far came from 2-3 points per axis; the neighbours "
                              "of the best (warps x2 / /2, rows x2 / /2) are untested.",
                 "priority": 0.35, "difficulty": 1, "expected_speedup": 1.02, "base_attempt_id": BEST["attempt_id"],
                 "params": {"ROWS_SMALL": BEST["cfg"]["S"]["rows"], "WARPS_SMALL": BEST["cfg"]["S"]["warps"],
                            "WARPS_LARGE": BEST["cfg"]["L"]["warps"], "MAXNREG_LARGE": BEST["cfg"]["L"].get("maxnreg", 0)}})
fc = call("finish_intent", {"search": S, "node_id": C, "edits": editsC, "new_intents": newC, "reason": reflC,
                            "author": AUTHOR})
if isinstance(fc, dict) and "error" in fc:
    fc = call("finish_intent", {"search": S, "node_id": C, "reason": reflC, "author": AUTHOR})

# ----------------------------------------------------------------------------------------------------------
# the search's best on the long-row workload under Nsight Compute (for the report), then the final evaluation
best_row = next((r for lab, aid, c, r in LOG if aid == BEST["attempt_id"]), None)
if isinstance(best_row, dict) and best_row.get("candidate_id") and BEST["cfg"]:
    call("profile_ncu", {"search": S, "candidate": {"candidate_id": best_row["candidate_id"], "language": "triton"},
                         "workload": WL_L})

print("\n=== SUMMARY")
for lab, aid, c, r in LOG:
    print(f"{lab}: attempt {aid}; {cfg_str(c) if c else 'seed'}; {fmt(r)}")
print(f"best in search (by my geomean): {BEST}")

fe = call("final_evaluation", {"search": S})
call("get_tree", {"search": S, "format": "text", "budget_chars": 12000})
call("list_searches", {})
