# --- candidate source generator (shared by every attempt of this round) ---
KERNEL_TEMPLATE = '''"""@@DOC@@"""

import torch
import triton
import triton.language as tl

TUNABLES = {
    "WARPS_SMALL": [1, 2, 4, 8],
    "WARPS_LARGE": [4, 8, 16, 32],
    "MODE_SMALL": [0, 1, 2],
    "MODE_LARGE": [0, 1, 2],
    "CTAS_SMALL": [2, 4, 8, 10, 12, 16],
    "CTAS_LARGE": [1, 2, 4],
}
SMALL_N_MAX = 2048  # rows whose BLOCK_N is at most this use the *_SMALL settings
MAX_REG_N = 16384  # longer rows fall back to a chunked kernel (no workload here has them)
WARPS_SMALL = @@WS@@
WARPS_LARGE = @@WL@@
MODE_SMALL = @@MS@@  # 0: one row per program; 1: persistent programs; 2: persistent + next-row prefetch
MODE_LARGE = @@ML@@
CTAS_SMALL = @@CS@@  # persistent programs per SM
CTAS_LARGE = @@CL@@


@triton.jit
def _ln_row(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    # one program per row; the whole row lives in registers: one HBM read of x, one write of y
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask, other=0.0@@XH@@)
    mean = tl.sum(x, axis=0) / n_cols
    d = tl.where(mask, x - mean, 0.0)
    rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
    w = tl.load(w_ptr + cols, mask=mask, other=0.0@@WH@@)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0@@WH@@)
    tl.store(y_ptr + row * stride_y + cols, d * rstd * w + b, mask=mask@@YH@@)


@triton.jit
def _ln_persistent(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    # a few programs per SM loop over rows; weight and bias are loaded once and stay in registers
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0@@WH@@)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0@@WH@@)
    x_step = nprog.to(tl.int64) * stride_x
    y_step = nprog.to(tl.int64) * stride_y
    x_rp = x_ptr + pid.to(tl.int64) * stride_x
    y_rp = y_ptr + pid.to(tl.int64) * stride_y
    for _row in tl.range(pid, n_rows, nprog):
        x = tl.load(x_rp + cols, mask=mask, other=0.0@@XH@@)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        tl.store(y_rp + cols, d * rstd * w + b, mask=mask@@YH@@)
        x_rp += x_step
        y_rp += y_step


@triton.jit
def _ln_persistent_prefetch(x_ptr, w_ptr, b_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                            BLOCK_N: tl.constexpr):
    # as _ln_persistent, and the next row's load is issued before this row's reductions
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < n_cols
    w = tl.load(w_ptr + cols, mask=mask, other=0.0@@WH@@)
    b = tl.load(b_ptr + cols, mask=mask, other=0.0@@WH@@)
    x_step = nprog.to(tl.int64) * stride_x
    y_step = nprog.to(tl.int64) * stride_y
    x_rp = x_ptr + pid.to(tl.int64) * stride_x
    y_rp = y_ptr + pid.to(tl.int64) * stride_y
    x_next = tl.load(x_rp + cols, mask=mask, other=0.0@@XH@@)  # the grid is at most n_rows: row pid exists
    for row in tl.range(pid, n_rows, nprog):
        x = x_next
        x_rp += x_step
        lim = tl.where(row + nprog < n_rows, n_cols, 0)  # past the last row: load nothing
        x_next = tl.load(x_rp + cols, mask=cols < lim, other=0.0@@XH@@)
        mean = tl.sum(x, axis=0) / n_cols
        d = tl.where(mask, x - mean, 0.0)
        rstd = 1.0 / tl.sqrt(tl.sum(d * d, axis=0) / n_cols + eps)
        tl.store(y_rp + cols, d * rstd * w + b, mask=mask@@YH@@)
        y_rp += y_step


@triton.jit
def _ln_chunked(x_ptr, w_ptr, b_ptr, y_ptr, n_cols, stride_x, stride_y, eps, BLOCK_N: tl.constexpr):
    # fallback for rows longer than MAX_REG_N: three passes over the row in chunks
    row = tl.program_id(0).to(tl.int64)
    x_row = x_ptr + row * stride_x
    y_row = y_ptr + row * stride_y
    cols = tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        acc += tl.load(x_row + start + cols, mask=start + cols < n_cols, other=0.0)
    mean = tl.sum(acc, axis=0) / n_cols
    acc = tl.zeros([BLOCK_N], tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        m = start + cols < n_cols
        d = tl.where(m, tl.load(x_row + start + cols, mask=m, other=0.0) - mean, 0.0)
        acc += d * d
    rstd = 1.0 / tl.sqrt(tl.sum(acc, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_N):
        m = start + cols < n_cols
        x = tl.load(x_row + start + cols, mask=m, other=0.0)
        w = tl.load(w_ptr + start + cols, mask=m, other=0.0)
        b = tl.load(b_ptr + start + cols, mask=m, other=0.0)
        tl.store(y_row + start + cols, (x - mean) * rstd * w + b, mask=m)


_SM_COUNT = {}


def _num_sms(device):
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    n = _SM_COUNT.get(idx)
    if n is None:
        n = torch.cuda.get_device_properties(idx).multi_processor_count
        _SM_COUNT[idx] = n
    return n


class ModelNew(torch.nn.Module):
    def __init__(self, eps=1e-5):
        super().__init__()
        self.eps = eps

    def forward(self, x, weight, bias):
        n = x.shape[-1]
        x2 = x.reshape(-1, n)
        if x2.stride(-1) != 1:
            x2 = x2.contiguous()
        m = x2.shape[0]
        y = torch.empty((m, n), dtype=x.dtype, device=x.device)
        if m == 0:
            return y.view(x.shape)
        block = triton.next_power_of_2(n)
        if block > MAX_REG_N:
            _ln_chunked[(m,)](x2, weight, bias, y, n, x2.stride(0), y.stride(0), self.eps, BLOCK_N=4096, num_warps=8)
            return y.view(x.shape)
        small = block <= SMALL_N_MAX
        warps = WARPS_SMALL if small else WARPS_LARGE
        mode = MODE_SMALL if small else MODE_LARGE
        if mode == 0:
            _ln_row[(m,)](x2, weight, bias, y, n, x2.stride(0), y.stride(0), self.eps, BLOCK_N=block, num_warps=warps)
        else:
            ctas = CTAS_SMALL if small else CTAS_LARGE
            grid = max(1, min(m, _num_sms(x.device) * ctas))
            kernel = _ln_persistent if mode == 1 else _ln_persistent_prefetch
            kernel[(grid,)](
                x2, weight, bias, y, m, n, x2.stride(0), y.stride(0), self.eps, BLOCK_N=block, num_warps=warps
            )
        return y.view(x.shape)
'''


def make_src(cfg, doc):
    s = KERNEL_TEMPLATE
    hints = cfg.get("hints", "")
    xh = ', eviction_policy="evict_first"' if "x" in hints else ""
    wh = ', eviction_policy="evict_last"' if "w" in hints else ""
    yh = ', cache_modifier=".cs"' if "y" in hints else ""
    for k, v in (("@@DOC@@", doc), ("@@WS@@", str(cfg["ws"])), ("@@WL@@", str(cfg["wl"])),
                 ("@@MS@@", str(cfg["ms"])), ("@@ML@@", str(cfg["ml"])), ("@@CS@@", str(cfg["cs"])),
                 ("@@CL@@", str(cfg["cl"])), ("@@XH@@", xh), ("@@WH@@", wh), ("@@YH@@", yh)):
        s = s.replace(k, v)
    return s

# ===================== round 1: seed, analysis, intents, 3 intents x 3 candidates, final =====================
import json, math

S = "layernorm"
AUTHOR = "llm:claude"
LOG = []  # (label, attempt_id, status, medians dict, cfg)


def say(*a):
    print("### " + " ".join(str(x) for x in a), flush=True)


def err(r):
    return (not isinstance(r, dict)) or ("error" in r and len(r) == 1)


def medians(r):
    """workload -> median_us for a correct, timed evaluation; None otherwise."""
    if err(r):
        return None
    ev = r.get("evaluation") or {}
    if ev.get("status") != "ok" or ev.get("pure_pytorch"):
        return None
    if not all(c.get("passed") for c in (ev.get("correctness") or [])):
        return None
    out = {}
    for t in ev.get("timings") or []:
        if t.get("median_us"):
            out[t["workload"]] = float(t["median_us"])
    return out or None


SPEED = {}  # attempt id -> text of its speedups per workload


def speeds(r):
    if err(r):
        return ""
    ev = r.get("evaluation") or {}
    parts = []
    for t in ev.get("timings") or []:
        se, sc, rf = t.get("speedup_vs_eager"), t.get("speedup_vs_compile"), t.get("roofline_fraction")
        if se is None and sc is None:
            continue
        parts.append(f"{t['workload']}: {se or 0:.2f}x eager, {sc or 0:.2f}x compile, roofline {rf or 0:.2f}")
    return "; ".join(parts)


def regime(wl):
    # 'MxN' workloads: N > SMALL_N_MAX (2048) is the large regime; the CPU smoke workload (N=1100) is small
    try:
        return "large" if int(wl.split("x")[1]) > 2048 else "small"
    except Exception:
        return "small"


def geo(meds, ref=None):
    ks = sorted(meds) if ref is None else sorted(k for k in meds if k in ref)
    if not ks:
        return float("inf")
    return math.exp(sum(math.log(meds[k]) for k in ks) / len(ks))


def regime_time(meds, reg):
    vals = [v for k, v in meds.items() if regime(k) == reg]
    return geo(dict(enumerate(vals))) if vals else None


def bench(node, cfg, doc, base=None, label="", profile=False):
    args = {"search": S, "node_id": node, "candidate": {"source": make_src(cfg, doc), "language": "triton"},
            "author": AUTHOR}
    if base:
        args["base_attempt_id"] = base
    if profile:
        args["profile"] = True
    r = call("benchmark", args)
    m = medians(r)
    aid = None if err(r) else r.get("attempt_id")
    st = "error" if err(r) else (r.get("evaluation") or {}).get("status")
    LOG.append((label, aid, st, m, dict(cfg)))
    SPEED[aid] = speeds(r)
    say("RESULT", label, "attempt", aid, "status", st, "medians", m, "cfg", cfg,
        "refine", None if err(r) else json.dumps(r.get("refine"))[:600])
    return aid, m


def best_of(entries):
    """(aid, meds, cfg) with the lowest geomean over the workloads all entries share."""
    ok = [e for e in entries if e[1] and e[0]]
    if not ok:
        return None
    common = set.intersection(*(set(e[1]) for e in ok))
    return min(ok, key=lambda e: geo({k: e[1][k] for k in common}) if common else geo(e[1]))


def fmt(m):
    return "n/a" if not m else ", ".join(f"{k} {v:.1f} us" for k, v in sorted(m.items()))


def ratio(base_m, new_m):
    """geomean speedup of new over base on their common workloads, as text."""
    if not base_m or not new_m:
        return "n/a"
    return f"{geo(base_m, new_m) / geo(new_m, base_m):.3f}x"


def finish(node, edits, new_intents, reason):
    args = {"search": S, "node_id": node, "edits": edits, "new_intents": new_intents, "reason": reason,
            "author": AUTHOR}
    r = call("finish_intent", args)
    if not err(r):
        return r
    say("finish_intent refused; retrying with the reason on each edit and no new intents' extras")
    e2 = [dict(e, reason=e.get("reason") or reason[:2000]) for e in edits]
    r = call("finish_intent", {"search": S, "node_id": node, "edits": e2, "new_intents": new_intents,
                               "author": AUTHOR, **({"reason": reason} if new_intents else {})})
    if not err(r):
        return r
    say("finish_intent refused again; closing bare, then applying the edits separately")
    r = call("finish_intent", {"search": S, "node_id": node, "author": AUTHOR})
    if edits:
        call("edit_tree", {"search": S, "edits": e2, "author": AUTHOR})
    if new_intents:
        call("propose_intents", {"search": S, "intents": new_intents, "author": AUTHOR, "reason": reason})
    return r


# ---------- phase 0: the seed ----------
ROOT = 15
t = call("get_tree", {"search": S, "format": "json"})
try:
    ROOT = int((t.get("tree") or {}).get("root_id") or ROOT)
except Exception as e:
    say("could not read the root from get_tree json:", e)
say("ROOT", ROOT)

r = call("benchmark", {"search": S, "node_id": ROOT, "candidate": {"seed": True, "language": "triton"}})
SEED_AID = None if err(r) else r.get("attempt_id")
SEED_MED = medians(r)
say("SEED attempt", SEED_AID, "medians", SEED_MED)

# ---------- phase 0: analysis and first intents ----------
ANALYSIS = """LayerNorm over the last dim, fp32: y = (x - mean) * rstd * w + b per row, eps 1e-5. ~8 FLOP/elt; minimum traffic 8 B/elt (read x once, write y once; w and b are 2N floats, L2-resident): ~1 FLOP/B, far below the H200 ridge (~14 FLOP/B fp32), so HBM-bound.
Floors (4.8 TB/s spec / 4.2 TB/s measured copy ceiling): 16384x8192 moves 1.07 GB -> 224 / 256 us; 65536x1024 537 MB -> 112 / 128 us; held-out 12288x6144 604 MB -> 126 / 144 us.
Regimes: long rows (N=8192: 32 KB/row, one row per program needs 8-16 warps to hold it in registers) vs short rows (N=1024: 4 KB/row, 65536 rows: per-row fixed costs - launch of a program, two block reductions, reloading w and b - are amortised over only 1024 elements, and bytes in flight per SM come from many small programs). Held-out N=6144 is not a power of two: BLOCK_N=8192 with 25% of lanes masked (harmless if memory-bound).
Seed: one program per row, BLOCK_N=1024, 4 warps, three passes over the row (mean, variance, output): 3 loads of x per element (2 hopefully from L1/L2), plus w and b loaded per row: L2 load traffic ~5x the HBM payload, and serial chunk loops with a reduction per pass limit bytes in flight.
Unsure: how much of the seed's re-reads hit L1/L2 (then single-pass gains less); how close eager's native layer_norm already is to the roofline (likely the vs-eager ceiling is ~1.1-1.5x); register pressure and occupancy at N=8192 fp32 in registers (compile for sm_90: 16 warps -> 40 regs, 3 CTAs/SM; 8 warps -> 79 regs)."""

INTENTS = [
    {"title": "Single pass: hold the whole row in registers (BLOCK_N = next_pow2(N)), one program per row",
     "rationale": "Reads x from HBM exactly once and removes two of the three passes (and their serial chunk loops and reductions); the row (<= 32 KB) fits in registers of one CTA. Cuts L1/L2 load traffic ~3x and instructions per element; warps chosen per regime to keep enough bytes in flight.",
     "priority": 0.9, "difficulty": 2, "expected_speedup": 1.3,
     "notes": "Refuted if < 1.05x over the seed on 16384x8192 (then the seed's re-reads were already cheap L2 hits and it was near the roofline), or if spills appear at N=8192.",
     "params": {"WARPS_LARGE": [8, 16], "WARPS_SMALL": [2, 4]}},
    {"title": "Persistent programs: a few CTAs per SM loop over rows, weight and bias kept in registers, next row prefetched",
     "rationale": "Removes per-row program launch/teardown and the per-row reload of w and b (2N floats from L2 per row, as much L2 traffic as x itself); prefetching the next row overlaps its HBM latency with the current row's reductions. Matters most for short rows (N=1024, 65536 rows).",
     "priority": 0.7, "difficulty": 3, "expected_speedup": 1.06,
     "notes": "Refuted if 65536x1024 is not >= 3% faster than the one-row-per-program kernel (then the scheduler already hides program turnover and w/b come from L1).",
     "params": {"CTAS_SMALL": [8], "CTAS_LARGE": [1, 2]}},
    {"title": "Stream x and y past L2 (evict_first loads, .cs streaming stores), keep weight and bias resident",
     "rationale": "x and y are touched once; marking them streaming keeps L2 for w/b and reduces write-allocate pollution, which may lift achieved DRAM bandwidth a little.",
     "priority": 0.6, "difficulty": 1, "expected_speedup": 1.03,
     "notes": "Refuted if no workload gains >= 2%."},
    {"title": "Several rows per program as a [ROWS, BLOCK_N] register tile for short rows (N <= 2048)",
     "rationale": "Short rows: more bytes in flight per program, w/b loaded once per tile, fewer programs. Bank: the same idea on rmsnorm gave 1.01x, so low priority.",
     "priority": 0.4, "difficulty": 2, "expected_speedup": 1.04,
     "notes": "Refuted if 65536x1024 does not improve > 2% over the best single-row kernel."},
    {"title": "Fuse the mean and variance reductions into one tuple reduction (sum and sum of squares)",
     "rationale": "One block-level reduction (one shared-memory round trip and barrier) per row instead of two: shortens the dependent critical path per row, which matters when few CTAs per SM are resident (N=8192).",
     "priority": 0.35, "difficulty": 2, "expected_speedup": 1.03,
     "notes": "Refuted if no gain, or if max error grows toward the 1e-4 tolerance (E[x^2]-mean^2 cancellation when |mean| >> std)."},
]

p = call("propose_intents", {"search": S, "intents": INTENTS, "author": AUTHOR,
                             "reason": "First intents from the analysis: memory traffic (single pass, streaming hints), parallelism/overheads (persistent programs, multi-row tiles), critical path (fused reduction)."})
IDS = [n["id"] for n in p.get("result", [])] if not err(p) else []
say("INTENT IDS", IDS)
e = call("edit_tree", {"search": S, "edits": [{"op": "update", "node_id": ROOT, "notes": ANALYSIS}], "author": AUTHOR,
                       "reason": "analysis as the root's notes"})
if err(e):
    call("edit_tree", {"search": S, "edits": [{"op": "update", "node_id": ROOT, "notes": ANALYSIS[:3900]}], "author": AUTHOR})
if len(IDS) < 3:
    raise SystemExit("no intents: stop here")
I1, I2, I3, I4, I5 = IDS[:5]

# ---------- round 1: intent I1, single pass ----------
s = call("select_action", {"search": S, "node_id": I1})
say("SELECT", I1, "->", None if err(s) else s.get("base_attempt_id"))
prompt("implement_intent", {"search": S, "node_id": str(I1)})
DOC1 = "Single pass LayerNorm: one program per row, the whole row in registers (BLOCK_N = next_pow2(N)); one HBM read of x, one write of y. Warps per regime: WARPS_SMALL for BLOCK_N <= 2048, WARPS_LARGE above."
a1 = dict(ws=4, wl=16, ms=0, ml=0, cs=8, cl=2)
a2 = dict(ws=2, wl=8, ms=0, ml=0, cs=8, cl=2)
A1, M1 = bench(I1, a1, DOC1 + " (16 warps for long rows, 4 for short)", base=SEED_AID, label="I1.a")
A2, M2 = bench(I1, a2, DOC1 + " (8 warps for long rows, 2 for short)", base=SEED_AID, label="I1.b")
# third attempt: per-regime winner of the two; if one won both regimes, push further in its direction
a3 = None
if M1 and M2:
    win = {}
    for reg in ("small", "large"):
        t1, t2 = regime_time(M1, reg), regime_time(M2, reg)
        if t1 is not None and t2 is not None:
            win[reg] = 1 if t1 <= t2 else 2
    if win and "large" not in win:
        win["large"] = win.get("small")
    if win and "small" not in win:
        win["small"] = win.get("large")
    ws = a1["ws"] if win.get("small", 1) == 1 else a2["ws"]
    wl = a1["wl"] if win.get("large", 1) == 1 else a2["wl"]
    if win.get("small") == win.get("large") or not win:
        w = win.get("small", 1)
        ws, wl = (8, 32) if w == 1 else (1, 4)
    a3 = dict(ws=ws, wl=wl, ms=0, ml=0, cs=8, cl=2)
    base3 = A1 if geo(M1, M2) <= geo(M2, M1) else A2
elif M1 or M2:
    src, base3 = (a1, A1) if M1 else (a2, A2)
    a3 = dict(src, ws=8 if src["ws"] == 4 else 1, wl=32 if src["wl"] == 16 else 4)
else:
    a3 = dict(ws=4, wl=8, ms=0, ml=0, cs=8, cl=2)
    base3 = SEED_AID
A3, M3 = bench(I1, a3, DOC1 + f" ({a3['wl']} warps for long rows, {a3['ws']} for short: chosen from attempts 1-2)",
               base=base3, label="I1.c", profile=True)

c1 = [(A1, M1, a1), (A2, M2, a2), (A3, M3, a3)]
b1 = best_of(c1)
BEST = b1  # (aid, meds, cfg)
summ1 = "; ".join(f"#{a} warps small/large {c['ws']}/{c['wl']}: {fmt(m)} ({ratio(SEED_MED, m)} over seed)" for a, m, c in c1)
say("I1 SUMMARY seed", fmt(SEED_MED), "|", summ1, "| best", b1[0] if b1 else None, SPEED.get(b1[0]) if b1 else "")
g1 = ratio(SEED_MED, b1[1]) if b1 else "n/a"
refl1 = (f"Predicted 1.30x over the seed; best single-pass attempt #{b1[0] if b1 else None} measured {g1} (geomean, medians). "
         f"Seed {fmt(SEED_MED)}. {summ1}. Best's speedups: {SPEED.get(b1[0]) if b1 else 'n/a'}.")
edits = [{"op": "update", "node_id": I1, "notes": refl1[:3900]}]
new = []
if b1:
    edits += [{"op": "update", "node_id": n, "base_attempt_id": b1[0]} for n in (I2, I3, I4, I5)]
    new.append({"title": "Sweep warps per regime around the single-pass winner (WARPS_SMALL 1-8, WARPS_LARGE 4-32)",
                "rationale": "Attempts of the single-pass intent show how occupancy and bytes in flight per SM move the time in each regime; a finer sweep of the two settings may find a few % more.",
                "priority": 0.3, "difficulty": 1, "expected_speedup": 1.02, "parent_id": I1, "base_attempt_id": b1[0],
                "notes": "Refuted if no setting beats the winner beyond noise.",
                "params": {"WARPS_SMALL": [1, 2, 4, 8], "WARPS_LARGE": [4, 8, 16, 32]}})
f = finish(I1, edits, new, ("Reflection: " + refl1 + " Later intents now build on the best single-pass attempt.")[:2000])

# ---------- round 2: intent I2, persistent programs ----------
s = call("select_action", {"search": S, "node_id": I2})
say("SELECT", I2, "->", None if err(s) else s.get("base_attempt_id"))
bc = BEST[2] if BEST else dict(ws=4, wl=16, ms=0, ml=0, cs=8, cl=2)
bA = BEST[0] if BEST else SEED_AID
bM = BEST[1] if BEST else SEED_MED
DOC2 = "Persistent LayerNorm: a grid of CTAS_* programs per SM (as many as fit at once) loops over rows; weight and bias loaded once per program and kept in registers; whole row in registers (single pass)."
# warps and programs per SM chosen so that the grid is exactly one resident wave (sm_90 compile: 16 warps at
# N=8192 -> 64 regs, 2 CTAs/SM, prefetch 96 regs, 1 CTA/SM; 4 warps at N=1024 -> 40 regs, 12 CTAs/SM, prefetch 48 regs, 10)
p1 = dict(bc, ms=1, ml=1, ws=4, wl=16, cs=12, cl=2)
p2 = dict(bc, ms=2, ml=2, ws=4, wl=16, cs=10, cl=1)
P1, PM1 = bench(I2, p1, DOC2, base=bA, label="I2.a")
P2, PM2 = bench(I2, p2, DOC2 + " The next row's load is issued before the current row's reductions (register double buffer).",
                base=bA, label="I2.b")
# third: per regime, the fastest of {one row per program (base), persistent, persistent + prefetch}
opts = [(bM, bc), (PM1, p1), (PM2, p2)]
pick = {}
for reg in ("small", "large"):
    cands = [(regime_time(m, reg), k) for k, (m, c) in enumerate(opts) if m and regime_time(m, reg) is not None]
    if cands:
        pick[reg] = min(cands)[1]
ks, kl = pick.get("small", 2), pick.get("large", 2)
cs_, cl_ = opts[ks][1], opts[kl][1]
p3 = dict(bc, ms=cs_["ms"], ws=cs_["ws"], cs=cs_["cs"], ml=cl_["ml"], wl=cl_["wl"], cl=cl_["cl"])
if ks == kl:
    # one option won both regimes: try persistence with more warps per program (8 small / 32 large, 1 wave)
    mode = 2 if ks == 2 else 1
    p3 = dict(bc, ms=mode, ml=mode, ws=8, wl=32, cs=8, cl=1)
P3, PM3 = bench(I2, p3, DOC2 + f" Per regime: MODE_SMALL={p3['ms']}, MODE_LARGE={p3['ml']} (0: one row per program, 1: persistent, 2: persistent + prefetch), chosen from the attempts before it.",
                base=bA, label="I2.c")
c2 = [(P1, PM1, p1), (P2, PM2, p2), (P3, PM3, p3)]
b2 = best_of(c2 + ([BEST] if BEST else []))
summ2 = "; ".join(f"#{a} modes small/large {c['ms']}/{c['ml']}, warps {c['ws']}/{c['wl']}, ctas/SM {c['cs']}/{c['cl']}: {fmt(m)} ({ratio(bM, m)} over #{bA})" for a, m, c in c2)
say("I2 SUMMARY", summ2, "| best overall", b2[0] if b2 else None)
bp = best_of(c2)
small_gain = None
if bp and bM:
    ts_b, ts_p = regime_time(bM, "small"), regime_time(bp[1], "small")
    if ts_b and ts_p:
        small_gain = ts_b / ts_p
refl2 = (f"Predicted 1.06x over #{bA} (mostly on short rows); best persistent attempt #{bp[0] if bp else None} measured "
         f"{ratio(bM, bp[1]) if bp else 'n/a'} overall, {'%.3fx' % small_gain if small_gain else 'n/a'} on the short-row regime. "
         f"Base #{bA}: {fmt(bM)}. {summ2}. Fastest so far: #{b2[0] if b2 else None} ({SPEED.get(b2[0]) if b2 else ''}).")
BEST = b2 or BEST
edits = [{"op": "update", "node_id": I2, "notes": refl2[:3900]}]
if BEST:
    edits += [{"op": "update", "node_id": n, "base_attempt_id": BEST[0]} for n in (I3, I4, I5)]
if small_gain is not None and small_gain < 1.03:
    edits.append({"op": "update", "node_id": I4, "priority": 0.25,
                  "notes": f"Persistent programs (w/b reused across rows) gave {small_gain:.3f}x on 65536x1024: per-row fixed costs and w/b reloads are not what limits short rows, so a multi-row tile (the same amortisation) is unlikely to gain. Refuted if 65536x1024 does not improve > 2%."})
f = finish(I2, edits, [], ("Reflection: " + refl2)[:2000])

# ---------- round 3: intent I3, streaming cache hints ----------
s = call("select_action", {"search": S, "node_id": I3})
say("SELECT", I3, "->", None if err(s) else s.get("base_attempt_id"))
bc = BEST[2] if BEST else dict(ws=4, wl=16, ms=0, ml=0, cs=8, cl=2)
bA = BEST[0] if BEST else SEED_AID
bM = BEST[1] if BEST else SEED_MED
DOC3 = "LayerNorm, the fastest kernel so far with cache hints: "
h1 = dict(bc, hints="xwy")
h2 = dict(bc, hints="xw")
h3 = dict(bc, hints="y")
H1, HM1 = bench(I3, h1, DOC3 + "x loads evict_first, w/b evict_last, y stores .cs (streaming).", base=bA, label="I3.a")
H2, HM2 = bench(I3, h2, DOC3 + "x loads evict_first, w/b evict_last; plain stores.", base=bA, label="I3.b")
H3, HM3 = bench(I3, h3, DOC3 + "y stores .cs (streaming) only.", base=bA, label="I3.c")
c3 = [(H1, HM1, h1), (H2, HM2, h2), (H3, HM3, h3)]
summ3 = "; ".join(f"#{a} hints {c['hints']}: {fmt(m)} ({ratio(bM, m)} over #{bA})" for a, m, c in c3)
say("I3 SUMMARY", summ3)
bh = best_of(c3)
b3 = best_of(c3 + ([BEST] if BEST else []))
refl3 = (f"Predicted 1.03x over #{bA}; best hinted attempt #{bh[0] if bh else None} measured {ratio(bM, bh[1]) if bh else 'n/a'}. "
         f"Base #{bA}: {fmt(bM)}. {summ3}. Fastest so far: #{b3[0] if b3 else None} ({SPEED.get(b3[0]) if b3 else ''}).")
BEST = b3 or BEST
edits = [{"op": "update", "node_id": I3, "notes": refl3[:3900]}]
if BEST:
    edits += [{"op": "update", "node_id": n, "base_attempt_id": BEST[0]} for n in (I4, I5)]
f = finish(I3, edits, [], ("Reflection: " + refl3)[:2000])

# ---------- the end: final evaluation ----------
say("ALL ATTEMPTS")
for lab, aid, st, m, cfg in LOG:
    say(" ", lab, aid, st, fmt(m), cfg, "|", SPEED.get(aid, ""))
say("BEST BY MY METRIC", BEST[0] if BEST else None)
fe = call("final_evaluation", {"search": S, "top_k": 3})
if err(fe):
    say("final_evaluation refused:", fe)
    call("select_action", {"search": S, "claim": False})
call("get_tree", {"search": S, "format": "text", "budget_chars": 12000})
