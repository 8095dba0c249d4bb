# Round 2: reflect on round 1, then intent #5 (persistent + prefetch) and intent #6 (cache hints), then the final evaluation.
import contextlib
import io
import json
import re

S = "rmsnorm"
AUTH = "llm:claude"
ROWS_T = r'''"""RMSNorm with several rows per program: a [ROWS, BLOCK_N] tile in registers, weight loaded once per program.

Each program owns ROWS = TILE_ELEMS // BLOCK_N consecutive rows (at least 1), reads them from HBM once,
reduces each row in fp32, scales by rstd * w (w loaded once and broadcast over the rows) and stores bf16.
Cache policy: x loads "@XEV@", weight loads "@WEV@", y stores "@YEV@" ("" = the hardware default).

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
    x = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                eviction_policy="@XEV@").to(tl.float32)
    w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="@WEV@").to(tl.float32)
    rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
    y = x * rstd[:, None] * w[None, :]
    tl.store(y_ptr + rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=mask,
             eviction_policy="@YEV@")


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
PERSIST_T = r'''"""Persistent RMSNorm with register prefetch: each program loads its next row tile before reducing the current one.

The grid is min(tiles, SMs * PROGRAMS_PER_SM); program p handles tiles p, p + grid, ... Before the reduction and the
store of tile t it issues the (masked) load of tile t + grid into a second set of registers, so every program keeps
one tile's loads in flight while it computes and stores the previous one. PROGRAMS_PER_SM = 0 sizes the grid to the
kernel's occupancy: the first call for a row length launches 2 programs per SM and reads the compiled kernel's
register count; later calls launch as many programs per SM as fit at once (the output never depends on the grid). The weight is loaded once per program
(W_PER_TILE = 0) or re-read from L1/L2 for every tile (W_PER_TILE = 1, fewer live registers).
Cache policy: x loads "@XEV@", weight loads "@WEV@", y stores "@YEV@" ("" = the hardware default).

Prediction: @NOTE@
"""

import torch
import triton
import triton.language as tl

TUNABLES = {"TILE_ELEMS": [4096, 8192, 16384], "NUM_WARPS": [4, 8, 16], "PROGRAMS_PER_SM": [0, 1, 2, 3, 4],
            "W_PER_TILE": [0, 1]}
TILE_ELEMS = @TILE@
NUM_WARPS = @WARPS@
PROGRAMS_PER_SM = @PPSM@
W_PER_TILE = @WPT@

_SM_COUNT = {}
_PPSM = {}


def _sm_count(device):
    if device.type != "cuda":
        return 4
    idx = device.index if device.index is not None else torch.cuda.current_device()
    if idx not in _SM_COUNT:
        _SM_COUNT[idx] = torch.cuda.get_device_properties(idx).multi_processor_count
    return _SM_COUNT[idx]


def _resident_programs(kernel, num_warps):
    """Programs of this kernel resident per SM (64K registers, 64 warps), from its compiled register count."""
    regs = getattr(kernel, "n_regs", None)
    if not regs:
        return None
    regs_per_warp = ((regs * 32 + 255) // 256) * 256
    return max(1, min(65536 // (regs_per_warp * num_warps), 64 // num_warps))


@triton.jit
def _rmsnorm_persistent(x_ptr, w_ptr, y_ptr, n_rows, n_cols, stride_x, stride_y, eps,
                        ROWS: tl.constexpr, BLOCK_N: tl.constexpr, W_PER_TILE: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    n_tiles = tl.cdiv(n_rows, ROWS)
    cols = tl.arange(0, BLOCK_N)
    col_mask = cols < n_cols
    w_keep = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="@WEV@").to(tl.float32)
    rows = (pid * ROWS + tl.arange(0, ROWS)).to(tl.int64)
    mask = (rows < n_rows)[:, None] & col_mask[None, :]
    x_next = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                     eviction_policy="@XEV@")
    for tile in range(pid, n_tiles, nprog):
        x = x_next.to(tl.float32)
        cur_rows = rows
        cur_mask = mask
        rows = ((tile + nprog) * ROWS + tl.arange(0, ROWS)).to(tl.int64)
        mask = (rows < n_rows)[:, None] & col_mask[None, :]
        x_next = tl.load(x_ptr + rows[:, None] * stride_x + cols[None, :], mask=mask, other=0.0,
                         eviction_policy="@XEV@")
        if W_PER_TILE:
            w = tl.load(w_ptr + cols, mask=col_mask, other=0.0, eviction_policy="@WEV@").to(tl.float32)
        else:
            w = w_keep
        rstd = tl.rsqrt(tl.sum(x * x, axis=1) / n_cols + eps)
        y = x * rstd[:, None] * w[None, :]
        tl.store(y_ptr + cur_rows[:, None] * stride_y + cols[None, :], y.to(y_ptr.dtype.element_ty),
                 mask=cur_mask, eviction_policy="@YEV@")


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
        n_tiles = triton.cdiv(m, rows)
        key = (block_n, x.device)
        ppsm = PROGRAMS_PER_SM or _PPSM.get(key, 2)
        grid = (min(n_tiles, _sm_count(x.device) * ppsm),)
        k = _rmsnorm_persistent[grid](x, weight, y, m, n, x.stride(0), y.stride(0), self.eps,
                                      ROWS=rows, BLOCK_N=block_n, W_PER_TILE=W_PER_TILE, num_warps=NUM_WARPS)
        if not PROGRAMS_PER_SM and key not in _PPSM:
            try:
                _PPSM[key] = _resident_programs(k, NUM_WARPS) or 2
            except Exception:
                _PPSM[key] = 2
        return y
'''

N_SINGLE, N_ROWS, N_PERSIST, N_HINTS, N_RAGGED, N_TMA = 3, 4, 5, 6, 7, 8
B1_ATTEMPT, B1_SPEED = 5, 13.349   # round 1's fastest: rows kernel, TILE 16384, 16 warps
summary = []


def qcall(tool, args, show="text"):
    """call() with its printed transcript captured; print only the text part (or the reflect prompt's key lines)."""
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        r = call(tool, args)
    out = buf.getvalue()
    head = out.split("STRUCTURED")[0]
    if show == "text":
        print(head[:2500])
    elif show == "reflect":
        keep = [ln for ln in head.splitlines() if ln.startswith((">>>", "next:", "# Round", "- attempt", "Best so far",
                                                                  "Predicted speedup", "Apply your answer"))]
        rp = r.get("reflect_prompt") if isinstance(r, dict) else None
        if rp:
            keep += [ln for ln in rp.splitlines() if ln.startswith(("# Round", "- attempt", "Best so far"))]
        print("\n".join(ln[:600] for ln in keep))
    if err(r):
        print("!!! %s error: %s" % (tool, r))
    return r


def fill(tpl, **kw):
    for k, v in kw.items():
        tpl = tpl.replace("@%s@" % k, str(v))
    assert "@" not in tpl.replace("@triton.jit", ""), tpl
    return tpl


def err(r):
    return (not isinstance(r, dict)) or ("error" in r and len(r) == 1)


def speed(r):
    if err(r):
        return None
    ev = r.get("evaluation") or {}
    if ev.get("status") != "ok" or ev.get("pure_pytorch"):
        return None
    return ev.get("speedup_vs_eager")


def per_wl(r):
    if err(r):
        return ""
    out = []
    for t in (r.get("evaluation") or {}).get("timings") or []:
        out.append("%s %.1fus eager %.2fx compile %s" % (t.get("workload"), t.get("median_us") or -1,
                   t.get("speedup_vs_eager") or -1, t.get("speedup_vs_compile")))
    return "; ".join(out)


def resident(r):
    if err(r):
        return ""
    msgs = [d.get("message", "") for d in ((r.get("evaluation") or {}).get("compile") or {}).get("diagnostics") or []]
    return " | ".join(m.split(";")[0] + ";" + m.split(";")[1] if ";" in m else m for m in msgs if "registers" in m)


def bench(node, src, label, base=None):
    args = {"search": S, "node_id": node, "author": AUTH, "candidate": {"source": src, "language": "triton"}}
    if base:
        args["base_attempt_id"] = base
    r = qcall("benchmark", args)
    if err(r):
        line = "%s: benchmark error %s" % (label, r)
    else:
        ev = r.get("evaluation") or {}
        line = "%s: attempt %s status %s geomean %s | %s | %s | error %s | refine over=%s stagnant=%s" % (
            label, r.get("attempt_id"), ev.get("status"), speed(r), per_wl(r), resident(r),
            (ev.get("error") or "")[:300], (r.get("refine") or {}).get("over"), (r.get("refine") or {}).get("stagnant"))
    print("### " + line)
    summary.append(line)
    return r, speed(r)


def over(r):
    return (not err(r)) and bool((r.get("refine") or {}).get("over"))


# ---------------------------------------------------------------- phase 3 of round 1's intents: reflection
REFLECTION = (
    "Measured on the H200 (ksearch protocol): seed 363/321 us (10.16x vs eager). Single pass (#3) 265/262 us, 1.30x "
    "over the seed (predicted 1.25x): the seed's re-read and its 8-elements-per-thread loop cost ~25%, the L2 re-read "
    "was not free. 16 vs 32 elements per thread: no difference; 8 per thread (16 warps at N=4096) 8% slower there. "
    "Rows per program (#4), 2 rows at N=8192 / 4 at N=4096 with 16 warps: 260.0/259.6 us, 1.014x over #3 (predicted "
    "1.05x at N=4096): outside the CI but under the 2% rule, so per-CTA fixed costs are not what is left. 4/8 rows per "
    "CTA (98 regs, 1 CTA per SM) lost 4%/38%: overlap between resident CTAs matters more than bytes per CTA. At "
    "~4.13 TB/s we are at ~98% of the measured 4.20 TB/s copy ceiling; torch.compile is at 251 us (N=8192) and 287 us "
    "(N=4096). What is left (~3%) is keeping loads in flight continuously (persistent + prefetch) and L2 policy.")
EDITS = [
    {"op": "update", "node_id": 1, "notes": (
        "Measured (H200, round 1): floor ~256 us at the 4.20 TB/s copy ceiling; best 260 us on both search shapes "
        "(rows kernel, attempt 5); torch.compile 251.4 us (N=8192), 286.8 us (N=4096); eager ~3.45 ms. "
        "Bandwidth follows overlap between resident CTAs: 2-3 CTAs/SM of 512 threads good, 1 CTA/SM (98 regs) bad.\n")},
    {"op": "update", "node_id": N_SINGLE, "notes": (
        "Measured: 264.9/262.0 us (EPT 16), 1.30x over the seed (predicted 1.25x). EPT 32 the same; EPT 8 (16 warps at "
        "N=4096) 284 us there. 39 regs, 3 CTAs of 512 threads per SM at N=8192.")},
    {"op": "update", "node_id": N_ROWS, "notes": (
        "Measured: TILE 16384/16 warps 260.0/259.6 us (1.014x over #3, under the 2% rule); TILE 8192/8 warps = #3; "
        "TILE 32768/16 warps 98 regs, 1 CTA/SM: 273/359 us. Predicted 1.05x at N=4096: refuted, fixed per-CTA costs "
        "are small.")},
    {"op": "update", "node_id": N_PERSIST, "base_attempt_id": B1_ATTEMPT, "priority": 0.6, "expected_speedup": 1.02,
     "title": "Persistent grid with register prefetch: load the next row tile before reducing and storing the current one",
     "rationale": ("Round 1 showed bandwidth follows how continuously loads are in flight per SM (1 fat CTA/SM lost 38%). "
                   "A persistent program that issues tile t+grid's loads before tile t's reduction and store keeps "
                   "loads outstanding through compute and store phases and removes CTA turnover; grid sized to the "
                   "kernel's occupancy."),
     "notes": "Refuted if no better than attempt 5 (260 us) at equal tile size."},
    {"op": "update", "node_id": N_HINTS, "base_attempt_id": B1_ATTEMPT, "priority": 0.55, "expected_speedup": 1.01,
     "notes": "Apply to the fastest kernel so far. Refuted if within noise of it."},
    {"op": "update", "node_id": N_RAGGED, "base_attempt_id": B1_ATTEMPT, "priority": 0.35,
     "notes": "Only the held-out 16384x5120 benefits; attempt 5 there runs 2 rows of an 8192-wide masked tile."},
    {"op": "update", "node_id": N_TMA, "base_attempt_id": B1_ATTEMPT, "priority": 0.2,
     "notes": "At ~98% of the copy ceiling, issue slots are not the limit: low expectation."},
]
r = qcall("edit_tree", {"search": S, "author": AUTH, "edits": EDITS, "reason": REFLECTION}, show="none")
if err(r):
    print("!!! edits refused:", r)
    summary.append("edits refused: %s" % r)
r = qcall("propose_intents", {"search": S, "author": AUTH, "reason": REFLECTION, "intents": [{
    "title": "Shorten live ranges to fit 3 tile-CTAs per SM: load w after the reduction, keep x packed bf16 until the scale",
    "parent_id": N_ROWS, "base_attempt_id": B1_ATTEMPT, "priority": 0.45, "difficulty": 2, "expected_speedup": 1.02,
    "rationale": "Attempt 5 runs 59 regs -> 2 CTAs of 512 threads per SM; at <= 42 regs 3 fit, 50% more bytes in flight.",
    "notes": "Refuted if registers fall but time does not."}]}, show="none")
if err(r):
    print("!!! propose refused:", r)

# ---------------------------------------------------------------- intent #5: persistent + prefetch
NOHINT = dict(XEV="", WEV="", YEV="")
cands = {B1_ATTEMPT: ("rows", dict(TILE=16384, WARPS=16))}
speeds = {B1_ATTEMPT: B1_SPEED}
sel = qcall("select_action", {"search": S, "node_id": N_PERSIST}, show="reflect")
if err(sel):
    print("!!! select #5 refused:", sel)
else:
    d = {}
    p1 = dict(TILE=8192, WARPS=16, PPSM=0, WPT=0)
    r1, s1 = bench(N_PERSIST, fill(PERSIST_T, NOTE="over attempt 5 (260 us): one 8 KB-16 KB tile's loads always in flight per "
                   "program during compute and store, grid sized to occupancy: ~1.02x; unsure whether Triton keeps the "
                   "prefetch load ahead of the reduction.", **p1, **NOHINT), "D1 persist T8192 w16 wkeep", B1_ATTEMPT)
    d["D1"] = (r1, s1, p1)
    if not over(r1):
        p2 = dict(TILE=8192, WARPS=16, PPSM=0, WPT=1)
        r2, s2 = bench(N_PERSIST, fill(PERSIST_T, NOTE="same, the weight re-read from L1/L2 per tile instead of held: "
                       "fewer live registers, more programs per SM; expected +-2% of D1.", **p2, **NOHINT),
                       "D2 persist T8192 w16 wreload")
        d["D2"] = (r2, s2, p2)
        if not over(r2):
            bestk = max(["D1", "D2"], key=lambda k: d[k][1] or 0)
            p3 = dict(d[bestk][2])
            p3["TILE"] = 16384
            r3, s3 = bench(N_PERSIST, fill(PERSIST_T, NOTE="the better of D1/D2 with a 16384-element tile (2 rows at "
                           "N=8192, 4 at N=4096): twice the bytes per prefetch, half the programs; expected +-2%.",
                           **p3, **NOHINT), "D3 persist T16384 from " + bestk)
            d["D3"] = (r3, s3, p3)
    for k, (rr, ss, pp) in d.items():
        if ss is not None and not err(rr):
            cands[rr["attempt_id"]] = ("persist", pp)
            speeds[rr["attempt_id"]] = ss

best_att = max(speeds, key=lambda a: speeds[a])
print("### best so far: attempt %s at %s" % (best_att, speeds[best_att]))
summary.append("best before hints: attempt %s %s" % (best_att, speeds[best_att]))
d_notes = "Measured: " + " || ".join(x for x in summary if x.startswith("D"))
fin = qcall("finish_intent", {"search": S, "node_id": N_PERSIST, "author": AUTH,
                             "edits": [{"op": "update", "node_id": N_HINTS, "base_attempt_id": best_att},
                                       {"op": "update", "node_id": N_PERSIST, "notes": d_notes[:3900]}],
                             "reason": "persistent+prefetch measured (see attempts); hints go on the fastest kernel so "
                                       "far, attempt %s (%.3fx vs eager)" % (best_att, speeds[best_att])}, show="reflect")
if err(fin):
    print("!!! finish #5 with edit refused:", fin)
    fin = qcall("finish_intent", {"search": S, "node_id": N_PERSIST, "author": AUTH}, show="reflect")

# ---------------------------------------------------------------- intent #6: cache hints on the best kernel
kind, params = cands[best_att]
tpl = ROWS_T if kind == "rows" else PERSIST_T
sel = qcall("select_action", {"search": S, "node_id": N_HINTS}, show="reflect")
if err(sel):
    print("!!! select #6 refused:", sel)
else:
    h1 = dict(XEV="evict_first", WEV="evict_last", YEV="")
    rc1, c1 = bench(N_HINTS, fill(tpl, NOTE="attempt %s plus evict_first on x loads and evict_last on the weight: x is "
                    "read once, so it should not displace the weight or dirty y lines in L2; expected 1.01x." % best_att,
                    **params, **h1), "C1 hints x-first w-last on %s" % best_att, best_att)
    if not over(rc1):
        h2 = dict(XEV="evict_first", WEV="evict_last", YEV="evict_first")
        rc2, c2 = bench(N_HINTS, fill(tpl, NOTE="C1 plus evict_first on the y stores (streamed out, never re-read); "
                        "expected +-1% of C1.", **params, **h2), "C2 hints + y-first on %s" % best_att, best_att)
        if not over(rc2):
            if (c2 or 0) > (c1 or 0):
                h3 = dict(XEV="", WEV="evict_last", YEV="evict_first")
                lab = "C3 hints w-last + y-first only"
                note = "C2 won over C1, so isolate the store side: default x loads, evict_last weight, evict_first y."
            else:
                h3 = dict(XEV="", WEV="evict_last", YEV="")
                lab = "C3 hint w-last only"
                note = "C2 did not beat C1, so isolate the weight: only evict_last on the weight loads."
            bench(N_HINTS, fill(tpl, NOTE=note + " Expected +-1%.", **params, **h3), lab + " on %s" % best_att, best_att)
    c_notes = "Measured (base attempt %s, %.3fx): " % (best_att, speeds[best_att]) + " || ".join(
        x for x in summary if x.startswith("C"))
    fin = qcall("finish_intent", {"search": S, "node_id": N_HINTS, "author": AUTH,
                                  "edits": [{"op": "update", "node_id": N_HINTS, "notes": c_notes[:3900]}],
                                  "reason": "cache hints measured on the fastest kernel so far; see the node's notes"},
                show="reflect")
    if err(fin):
        fin = qcall("finish_intent", {"search": S, "node_id": N_HINTS, "author": AUTH}, show="reflect")

# ---------------------------------------------------------------- final evaluation
fe = call("final_evaluation", {"search": S, "top_k": 3})
print("\n######## SUMMARY")
for line in summary:
    print("### " + line)
if err(fe):
    print("!!! final_evaluation:", fe)
else:
    print("### final keys:", list(fe.keys()))
    for k in ("result_rule", "status", "best_attempt_id", "chosen_by", "summary", "text"):
        if k in fe:
            print("### final %s: %s" % (k, json.dumps(fe[k])[:3000]))
    for row in fe.get("rows") or fe.get("results") or []:
        print("### final row:", json.dumps(row)[:1500])
